#!/bin/bash
# t1190-metrics.sh: /metrics passes a strict exposition-format lint (HELP
# and TYPE for every family, counters end in _total, histograms
# cumulative...; promtool too when installed), every FM HTTP call is
# counted by call and result (a reservation's GET included), the build
# info is there, and a job whose collectives were unavailable keeps that
# state and its reason after CLEANUP.
. "$(dirname "$0")/lib.sh"
reserve_ms=500 timeout_ms=1000
start_mockfm
start_broker || bail_out "broker did not start"
body='{"uid":1000,"nodes":["n1","n2"]}'
metrics () { rm_call GET /metrics; }
# sample NAME{LABELS}: its value (0 if absent)
sample () { metrics | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'; }

lint () {
    python3 - "$1" <<'PY'
import re, sys
name_re = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*$')
sample_re = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
label_re = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')
helps, types, seen, done, errors = {}, {}, set(), set(), []
hist = {}
current = None
def family(name):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name
for n, line in enumerate(open(sys.argv[1]).read().split("\n"), 1):
    if line == "":
        continue
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        parts = line.split(" ", 3)
        if len(parts) < 4 or not parts[3].strip() or not name_re.match(parts[2]):
            errors.append(f"{n}: malformed: {line}")
            continue
        d = helps if parts[1] == "HELP" else types
        if parts[2] in d:
            errors.append(f"{n}: second {parts[1]} for {parts[2]}")
        if parts[2] in done:
            errors.append(f"{n}: {parts[2]}: metadata after its samples")
        d[parts[2]] = parts[3]
        if parts[1] == "TYPE" and parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
            errors.append(f"{n}: bad type {parts[3]}")
        if current and current != parts[2]:
            done.add(current)
        current = parts[2]
        continue
    if line.startswith("#"):
        continue
    m = sample_re.match(line)
    if not m:
        errors.append(f"{n}: malformed sample: {line}")
        continue
    name, labels, value = m.group(1), m.group(3) or "", m.group(4)
    fam = family(name)
    if fam in done and fam != current:
        errors.append(f"{n}: {fam}: samples not grouped together")
    if current and fam != current:
        done.add(current)
    current = fam
    rest, lab = labels, {}
    while rest:
        lm = label_re.match(rest)
        if not lm:
            errors.append(f"{n}: bad labels: {labels}")
            break
        lab[lm.group(1)] = lm.group(2)
        rest = rest[lm.end():]
    try:
        v = float(value)
    except ValueError:
        errors.append(f"{n}: bad value {value}")
        continue
    key = (name, tuple(sorted(lab.items())))
    if key in seen:
        errors.append(f"{n}: duplicate sample {line}")
    seen.add(key)
    if fam not in helps:
        errors.append(f"{n}: {fam} has no HELP")
    if fam not in types:
        errors.append(f"{n}: {fam} has no TYPE")
    t = types.get(fam)
    if t == "counter" and not name.endswith("_total"):
        errors.append(f"{n}: counter {name} does not end in _total")
    if t in ("counter", "histogram") and v < 0:
        errors.append(f"{n}: negative {name}")
    if t == "histogram":
        series = tuple(sorted((k, x) for k, x in lab.items() if k != "le"))
        h = hist.setdefault((fam, series), {"buckets": [], "count": None})
        if name.endswith("_bucket"):
            if "le" not in lab:
                errors.append(f"{n}: bucket without le")
            else:
                h["buckets"].append((float(lab["le"]), v))
        elif name.endswith("_count"):
            h["count"] = v
for (fam, series), h in hist.items():
    b = h["buckets"]
    if not b or b[-1][0] != float("inf"):
        errors.append(f"{fam}{series}: no +Inf bucket")
        continue
    if [x for x, _ in b] != sorted(x for x, _ in b) or [y for _, y in b] != sorted(y for _, y in b):
        errors.append(f"{fam}{series}: buckets not cumulative")
    if h["count"] != b[-1][1]:
        errors.append(f"{fam}{series}: _count differs from the +Inf bucket")
if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"{len(seen)} samples, {len(types)} families: clean")
PY
}

expect_ok 'the lint catches what it should (a family without HELP)' '
    printf "# TYPE x_total counter\nx_total 1\n" >bad.txt && ! lint bad.txt >out &&
    grep -q "x_total has no HELP" out
'
expect_ok 'a new job'"'"'s reservation counts its POST, and no GET' '
    rm_call PUT /v1/jobs/1 "$body" | jq -e ".hwcoll.state == \"reserved\"" &&
    test "$(sample "fmbroker_fm_requests_total{call=\"create\",result=\"ok\"}")" -eq 1 &&
    test "$(sample "fmbroker_fm_requests_total{call=\"get\",result=\"not_found\"}")" -eq 0 &&
    test "$(sample "fmbroker_fm_requests_total{call=\"get\",result=\"ok\"}")" -eq 0
'
expect_ok 'a job the FM holds already counts the refused create and the get that found it' '
    curl -sf -X POST --data-binary "{\"jobID\":\"c1-2\",\"mcastLimit\":4}" \
        "$fm_url/fabric/collectives/jobs" >/dev/null &&
    before=$(sample "fmbroker_fm_requests_total{call=\"get\",result=\"ok\"}") &&
    refused=$(sample "fmbroker_fm_requests_total{call=\"create\",result=\"retryable\"}") &&
    rm_call PUT /v1/jobs/2 "$body" | jq -e ".hwcoll.state == \"reserved\"" &&
    test "$(sample "fmbroker_fm_requests_total{call=\"get\",result=\"ok\"}")" -eq $((before + 1)) &&
    test "$(sample "fmbroker_fm_requests_total{call=\"create\",result=\"retryable\"}")" -eq $((refused + 1))
'
# Each request is read in a pass of its own or shares one: at least one
# pass more per request, each under a second on an idle broker.
from () { awk -v k="$2" '$1 == k { print $2 }' "$1"; } # FILE SAMPLE
expect_ok 'every pass of the loop is counted in fmbroker_loop_pass_seconds' '
    metrics >p0.txt &&
    for i in 1 2 3 4 5; do rm_call GET /v1/jobs/1 >/dev/null || return 1; done &&
    metrics >p.txt && grep "^fmbroker_loop_pass_seconds" p.txt &&
    n=$(( $(from p.txt fmbroker_loop_pass_seconds_count) - $(from p0.txt fmbroker_loop_pass_seconds_count) )) &&
    le1=fmbroker_loop_pass_seconds_bucket{le=\"1\"} &&
    under_1s=$(( $(from p.txt "$le1") - $(from p0.txt "$le1") )) &&
    echo "# $n passes, $under_1s of them under 1 s" && test "$n" -ge 5 && test "$under_1s" -eq "$n" &&
    awk -v s="$(from p.txt fmbroker_loop_pass_seconds_sum)" "BEGIN { exit !(s > 0) }"
'
expect_ok 'build info names the running version' '
    v=$("$FMB_BIN/fmbrokerd" --version | cut -d" " -f2) &&
    test "$(sample "fmbroker_build_info{version=\"$v\"}")" = 1
'
expect_ok 'a job whose collectives were unavailable keeps state and reason after CLEANUP' '
    stop_mockfm &&
    rm_call PUT /v1/jobs/3 "$body" | jq -e ".hwcoll.state == \"unavailable\"" &&
    reason=$(job_field 3 .hwcoll.reason) && test -n "$reason" && test "$reason" != null &&
    rm_call DELETE /v1/jobs/3 >/dev/null && start_mockfm &&
    wait_for 200 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/3 | jq -e \".state == \\\"released\\\"\"" &&
    rm_call GET /v1/jobs/3 | jq -e --arg r "$reason" ".hwcoll.state == \"unavailable\" and .hwcoll.reason == \$r"
'
expect_ok 'a released reservation still shows released' '
    rm_call DELETE /v1/jobs/1 >/dev/null &&
    wait_for 200 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/1 | jq -e \".hwcoll.state == \\\"released\\\"\""
'
expect_ok '/metrics passes the strict lint after all that' '
    metrics >m.txt && lint m.txt
'
expect_ok 'and promtool check metrics, when it is installed' '
    if command -v promtool >/dev/null; then promtool check metrics <m.txt; else echo "skipped: no promtool"; fi
'
done_testing

#!/bin/bash
# t1055-listing-pages.sh: listing a store of many jobs.  A filter that
# the listing's index does not hold ('since'; a user within a state) is
# tested job by job, so a page reads at most 10,000 stored jobs: it stops
# there with next_after however few jobs it listed (even none), and the
# loop is never held for the whole store.  Following next_after yields
# every match once, in order.  The VNI pool is listed in pages too.
. "$(dirname "$0")/lib.sh"
start_mockfm
# 25,000 released jobs (r000000000 on) of earlier days, as the broker keeps them
"$FMB_BIN/fmbench-mkstore" "$T/store.db" "$T/store.key" 25000 0 >/dev/null ||
    { echo "Bail out! fmbench-mkstore failed"; exit 1; }
mkdir -m 700 "$T/state" && mv "$T/store.db" "$T/state/fmbroker.db" &&
    mv "$T/store.key" "$T/state/token.key"
# no retention: it would delete the oldest stored jobs (40 days back) 10 s on
write_broker_conf "[broker]" "retain_days = 0"
start_broker
since=$(date +%s%3N)
body='{"uid":1000,"nodes":["n1","n2"]}'
# list QUERY: every page of /v1/jobs?QUERY, one line per page: "JOBS NEXT"
list () {
    local after= page n=0
    while :; do
        page=$(rm_call GET "/v1/jobs?$1${after:+&after=$after}") || return 1
        echo "$page" | jq -r '"\(.jobs | map(.id) | join(",")) \(.next_after // "-")"'
        after=$(echo "$page" | jq -r '.next_after // empty')
        [ -n "$after" ] || return 0
        [ $((n += 1)) -lt 20 ] || return 1
    done
}
show () { cat pages page 2>/dev/null; tail -n 5 "$T/broker.err"; }
step_fail_hook=show

expect_ok 'two jobs start after 25,000 stored ones' '
    rm_call PUT /v1/jobs/a1 "$body" >/dev/null && rm_call PUT /v1/jobs/zz9 "$body" >/dev/null
'
# a1 sorts before every stored job, zz9 after: they are on the first and
# the last page; the page between lists nothing and still goes on
expect_ok 'jobs changed since a time: pages of at most 10,000 read, the matches in order' '
    list "since=$since&limit=100" >pages && cat pages &&
    test "$(wc -l <pages)" = 3 &&
    test "$(cut -d" " -f1 pages | tr "\n" " ")" = "a1  zz9 " &&
    test "$(cut -d" " -f2 pages | tr "\n" " ")" = "r000009998 r000019998 - "
'
expect_ok 'released jobs changed since a time (the state index, then since): none, in 3 pages' '
    list "state=released&since=$since" >pages && cat pages &&
    test "$(cut -d" " -f2 pages | tr "\n" " ")" = "r000009999 r000019999 - " &&
    test "$(cut -d" " -f1 pages | tr -d "\n")" = ""
'
# As it runs for a user: their own jobs only, through their index (50 of
# the stored jobs are theirs), so on one page.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chmod 755 "$T" # the socket's directory, for uid 1000
    expect_ok 'a plain user lists their jobs changed since a time on the socket: theirs, one page' '
        as_user 1000 curl -sf --unix-socket "$T/api.sock" "http://fmbroker/v1/jobs?since=$since" >page &&
        jq -e "[.jobs[].id] == [\"a1\", \"zz9\"] and (has(\"next_after\") | not)" page
    '
fi
# A page of 1,000 jobs of 1,000 nodes each was 12 MB, built on the loop.
expect_ok 'a listing gives each job its node count, not its nodes; GET of the job has them' '
    rm_call GET "/v1/jobs?state=released&limit=3" >page &&
    jq -e "[.jobs[] | has(\"nodes\")] == [false, false, false]" page >/dev/null &&
    jq -e "[.jobs[].node_count] | all(. > 0)" page >/dev/null &&
    id=$(jq -r ".jobs[0].id" page) && n=$(jq ".jobs[0].node_count" page) &&
    rm_call GET "/v1/jobs/$id" | jq -e --argjson n "$n" ".nodes | length == \$n"
'
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    expect_ok 'so does a plain user listing their own jobs' '
        as_user 1000 curl -sf --unix-socket "$T/api.sock" "http://fmbroker/v1/jobs?since=$since" >page &&
        jq -e "[.jobs[] | [has(\"nodes\"), .node_count]] == [[false, 2], [false, 2]]" page
    '
fi
expect_ok 'without a filter beyond the index, a full page ends at its last job' '
    rm_call GET "/v1/jobs?state=released&limit=1000" >page &&
    jq -e ".jobs | length == 1000" page >/dev/null &&
    jq -e ".next_after == \"r000000999\"" page >/dev/null
'
expect_ok 'fmbroker jobs --limit 2500 reads 3 pages and says that more are left' '
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json jobs --state released --limit 2500 >cli.json 2>err &&
    jq -e ".jobs | length == 2500 and .[0].id == \"r000000000\"" cli.json >/dev/null &&
    jq -e ".next_after == \"r000002499\"" cli.json >/dev/null &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" jobs --state released --limit 1500 --noheader >table 2>err &&
    test "$(wc -l <table)" = 1500 && grep -qx "fmbroker: jobs: more jobs than --limit: a larger --limit, or the API.s after=r000001499" err
'
# The pool's VNIs a page at a time: a whole pool in one answer was 3 MB.
expect_ok 'VNIs come 1,000 a page, in order, each once; fmbroker vni list reads every page' '
    "$FMB_BIN/fmbench" run --socket "$T/api.sock" --count 1100 --concurrency 4 --prefix v >/dev/null &&
    after=0 && : >vnis &&
    for n in 1 2 3 4; do
        rm_call GET "/v1/vnis?limit=500&after=$after" >page &&
        jq -r ".vnis[].vni" page >>vnis &&
        after=$(jq -r ".next_after // empty" page) && [ -n "$after" ] || break
    done &&
    test "$n" = 3 && test "$(wc -l <vnis)" = 1102 && sort -n -u vnis | cmp -s - vnis &&
    test "$(rm_call GET /v1/vnis | jq ".vnis | length")" = 1000 &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json vni list >cli.json &&
    jq -r ".vnis[].vni" cli.json | cmp -s - vnis &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" vni list >table &&
    test "$(wc -l <table)" = 1103
'
expect_ok 'a VNI page asked for badly is a 400 that says what is wrong' '
    for q in after=x after=65536 after= after=-1 limit=0 limit=1001 limit=ten limit=%2B5; do
        api_call GET "/v1/vnis?$q" >r && read code _ <r && test "$code" = 400 || return 1
    done &&
    api_call GET "/v1/vnis?limit=0" | grep -q "limit: 1..1000"
'
done_testing

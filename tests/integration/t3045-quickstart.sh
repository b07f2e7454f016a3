#!/bin/bash
# t3045-quickstart.sh: the README's Quick start, line by line as it is
# written there, with the mock FM: its configuration (the example, edited
# as its `editor` line says and no further) passes --check-config --fm,
# its first job gets a reservation at the FM, and that job is released
# cleanly: no FM job left, its VNI free, no --force anywhere.
#
# What stands in, since a test may not install packages or touch /etc,
# /run, /var/lib or systemd:
#   cmake/cpack, dpkg -i   the programs of this build ($FMB_BIN), as
#                          fmbroker, fmbrokerd and fmbroker-cxi in PATH
#   the fmbroker user      uid 1000 (setpriv), or root where there is none
#   /etc/fmbroker/..., /usr/share/doc/fmbroker/examples/...
#                          $T/etc/fmbroker.conf, $FMB_SRC/deploy/
#   /var/lib/fmbroker, /run/fmbroker, /run/fmbroker-cxi
#                          $T/state, $T/run, $T/cxi (state_dir and socket
#                          set by the test beside the editor's keys: the
#                          unit and the packages provide them on a host)
#   editor                 the keys its comment names, set for the mock:
#                          url (the mock FM on loopback), auth = none (the
#                          mock takes no credentials), system_nodes = 128
#   systemctl enable --now fmbrokerd as the service user, in the
#                          background, waited for until it answers
#   fmbroker status        looked at again (10 s at most) until 0: the FM
#                          session comes up just after the start
. "$(dirname "$0")/lib.sh"
start_mockfm
readme="$FMB_SRC/README.md"
# The Quick start's code block, as lines.
awk '/^## Quick start/ {q=1} q && /^```sh/ {c=1; next} c && /^```/ {exit} c' "$readme" >qs.lines
test -s qs.lines || bail_out "no Quick start code block in README.md"

svc=$(getent passwd 1000 | cut -d: -f1)
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null || svc=
svc=${svc:-$(id -un)}
svc_uid=$(id -u "$svc")
chmod 755 "$T"
mkdir -p bin etc cxi
conf="$T/etc/fmbroker.conf"
printf '#!/bin/sh\nexec "%s" -c "%s" "$@"\n' "$FMB_BIN/fmbroker" "$conf" >bin/fmbroker
printf '#!/bin/sh\nexec "%s" -c "%s" --state-dir "%s" "$@"\n' "$FMB_BIN/fmbroker-cxi" "$conf" "$T/cxi" >bin/fmbroker-cxi
# --check-config run as root checks as the service user (--user)
printf '#!/bin/sh\nexec "%s" -c "%s" "$@" %s\n' "$FMB_BIN/fmbrokerd" "$conf" \
    "$([ "$(id -u)" = 0 ] && echo "--user $svc")" >bin/fmbrokerd
chmod 755 bin/*
PATH="$T/bin:$PATH"

# set_key SECTION KEY VALUE: the key's line in that section of $conf
# (commented out in the example) set to VALUE.
set_key () {
    python3 - "$conf" "$1" "$2" "$3" <<'PY'
import re, sys
path, sec, key, val = sys.argv[1:]
s = open(path).read()
i = s.index("[" + sec + "]\n")
j = s.find("\n[", i + 1)
j = len(s) if j < 0 else j
part = re.sub(r"^#?" + key + r" =.*$", key + " = " + val, s[i:j], count=1, flags=re.M)
if part == s[i:j]:
    sys.exit(f"[{sec}] {key}: no such key in the example")
open(path, "w").write(s[:i] + part + s[j:])
PY
}
# The value this test gives each key an editor line may name.
value_of () {
    case "$1 $2" in
    "broker cluster_name") echo qs ;;
    "fabric_manager url") echo "$fm_url" ;;
    "fabric_manager auth") echo none ;;
    "hwcoll system_nodes") echo 128 ;;
    "vni pool") echo 1024-65535 ;;
    "api rm_users") echo root ;;
    *) return 1 ;;
    esac
}
# editor FILE # [SEC] KEY and KEY, [SEC] KEY, ...: set those keys, only.
edit () {
    echo "$1" | sed 's/^[^#]*# *//' | tr ',' '\n' | sed 's/ and / /g' >keys.named &&
    while read -r sec keys; do
        sec=${sec#[}; sec=${sec%]}
        for k in $keys; do
            v=$(value_of "$sec" "$k") || { echo "the editor line names [$sec] $k: no value for it here"; return 1; }
            set_key "$sec" "$k" "$v" || return 1
        done
    done <keys.named &&
    # the host's paths, which the unit and the packages give (see above)
    mkdir -m 700 state && mkdir run && chown "$svc:" state run &&
    set_key broker state_dir "$T/state" && set_key api socket "$T/run/fmbroker.sock"
}
broker_pid=
stop_qs_broker () { [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null; }
on_exit stop_qs_broker
# run LINE: one Quick start line, as written or through its stand-in.
run () {
    case "$1" in
    "cmake "* | "dpkg "*) echo "# stand-in: this build's programs" ;;
    "cp "*)
        set -- $1
        cp "$FMB_SRC/deploy/${2##*/}" "$conf" && test "$3" = /etc/fmbroker/fmbroker.conf ;;
    "editor "*) edit "$1" ;;
    "systemctl enable --now fmbrokerd"*)
        # (setpriv in the background itself, so $! is the broker)
        setpriv --reuid="$svc_uid" --regid="$(id -g "$svc")" --clear-groups \
            "$FMB_BIN/fmbrokerd" -c "$conf" 2>>"$T/broker.err" &
        broker_pid=$!
        wait_for 100 0.05 test -S "$T/run/fmbroker.sock" ;;
    "fmbroker status"*) wait_for 100 0.1 eval "$1" ;;
    fmbroker* | fmbrokerd*) eval "$1" ;;
    *) echo "a Quick start line this test has no stand-in for: $1"; return 1 ;;
    esac
}
# step PATTERN: the Quick start lines up to the first matching PATTERN
# (each run once), which must all succeed.
done_lines=0
step () {
    n=$(awk -v p="$1" 'index($0, p) {print NR; exit}' qs.lines)
    [ -n "$n" ] || { echo "no Quick start line with '$1'"; return 1; }
    while [ "$done_lines" -lt "$n" ]; do
        done_lines=$((done_lines + 1))
        line=$(sed -n "${done_lines}p" qs.lines)
        echo "\$ $line"
        run "$line" || { echo "failed: $line"; return 1; }
    done
}

expect_ok 'the example configuration, edited as the editor line says, passes --check-config --fm' '
    step "fmbrokerd --check-config" >out 2>&1; rc=$?; cat out; test $rc = 0 &&
    grep -q "configuration OK" out && grep -q "GET /fabric/collectives/jobs/ answered" out
'
expect_ok 'the broker starts and status exits 0' '
    step "fmbroker status" >out 2>&1; rc=$?; cat out; test $rc = 0 &&
    grep -q "^fabric manager: up" out
'
expect_ok 'the first job gets its VNI and a reservation at the FM' '
    step "fmbroker run-job 42" >out 2>&1; rc=$?; cat out; test $rc = 0 &&
    grep -q "^export FI_CXI_COLL_JOB_ID=qs-42$" out &&
    mockfm_has_job qs-42 &&
    fmbroker --json job show 42 | jq -e ".hwcoll.state == \"reserved\" and (.vnis | length) == 1" &&
    step "fmbroker job show 42" >out 2>&1 && cat out && grep -q "^hwcoll: reserved (FM job qs-42" out
'
expect_ok 'its CLEANUP and the nodes'"'"' reports release it cleanly: no FM job, its VNI free, no --force' '
    vni=$(fmbroker --json job show 42 | jq -e ".vnis[0]") &&
    step "fmbroker vni list" >out 2>&1; rc=$?; cat out; test $rc = 0 &&
    ! grep -q -- "--force" qs.lines &&
    test "$done_lines" = "$(wc -l <qs.lines)" &&
    wait_for 100 0.1 mockfm_lacks_job qs-42 &&
    fmbroker --json job show 42 | jq -e ".state == \"released\" and .hwcoll.state == \"released\"" &&
    fmbroker --json vni list | jq -e --argjson v "$vni" "[.vnis[] | select(.vni == \$v)] == []" &&
    ! grep -Eq "^[0-9]+ +42 " out
'
done_testing

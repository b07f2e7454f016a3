#!/bin/bash
# bench/ha-takeover.sh [--runs N] [--token MS] [--fencing-delay S] [--no-traffic]
#
# Issue 53's take-over benchmark under a real Pacemaker: the live test
# cluster of t3620 (tests/integration/halive: two broker hosts in network
# namespaces running Debian's corosync and Pacemaker, the CIB of
# deploy/ha/fmbroker-cib.xml, the state on a loop device, the clients in a
# third namespace), then N rounds (default 3) of
#   kill   fmbrokerd SIGKILLed on the active host (Pacemaker's monitor
#          finds it, recovers it in place); fail counts cleared after
#   fence  the active host hangs (every process stopped); the other
#          detects it, fences it, takes the group; the host is booted again
#   move   crm_resource --move to the other host, then --clear
# each timed from the failure (or the move) to the first RUN answered by
# the new broker (curl every 50 ms over TLS to the floating address),
# while the RM and two nodes' agents keep running jobs (--no-traffic: not).
# Prints a Markdown table of every run, with what each step took
# (halive/steps.py says how each is read from the logs), and the median
# per kind.
#   --token MS          corosync's totem token (default: corosync's, 3000)
#   --fencing-delay S   the CIB's priority-fencing-delay (default: the CIB's)
# Environment: BUILD (the build directory, default build).  Needs root,
# ip netns, unshare, a loop device, Debian's pacemaker, corosync,
# resource-agents, kmod (scripts/install-deps.sh).  Removes what it made,
# also on failure and Ctrl-C.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
runs=3 traffic=true
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=${2:?--runs N} && shift ;;
    --token) export HA_TOTEM_EXTRA="	token: ${2:?--token MS}" && shift ;;
    --fencing-delay) export HA_FENCING_DELAY=${2:?--fencing-delay S} && shift ;;
    --no-traffic) traffic=false ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) echo "ha-takeover.sh: unknown argument '$1' (--help)" >&2 && exit 2 ;;
    esac
    shift
done
b=${BUILD:-build}
if [ -d "$b/bin" ]; then build=$(cd "$b" && pwd)
elif [ -d "$src/$b/bin" ]; then build=$(cd "$src/$b" && pwd)
else echo "ha-takeover.sh: no build directory '$b' (set BUILD)" >&2 && exit 2
fi
export FMB_BIN=$build/bin FMB_SRC=$src
. "$src/tests/integration/lib.sh"
. "$src/tests/integration/halive/cluster.sh"
why=$(ha_missing)
[ -z "$why" ] || { echo "ha-takeover.sh: $why" >&2; exit 2; }
on_exit ha_cleanup
trap 'exit 130' INT TERM
die () { echo "ha-takeover.sh: $*" >&2; ha_diag >&2; exit 1; }
other () { if [ "$1" = fm1 ]; then echo fm2; else echo fm1; fi; }

echo "# fmbroker take-over under Pacemaker, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%d GiB", $2 / 1048576}' /proc/meminfo), kernel $(uname -r); $(corosync -v | head -n 1); $(pacemakerd --version | head -n 1)"
t_setup=$(ha_now)
ha_setup >"$T/setup.out" 2>&1 || die "no cluster: $(cat "$T/setup.out")"
wait_for 300 0.2 ha_is_at fm1 || die "the group did not start"
ha_node_tokens n1 n2 || die "no node tokens"
mon=$(python3 -c 'import sys, xml.etree.ElementTree as ET
print([o.get("interval") for o in ET.parse(sys.argv[1]).iter("op") if o.get("id") == "fmbrokerd-mon"][0])' "$ha_dir/cib.xml")
delay=$(python3 -c 'import sys, xml.etree.ElementTree as ET
print([n.get("value") for n in ET.parse(sys.argv[1]).iter("nvpair") if n.get("name") == "priority-fencing-delay"][0])' "$ha_dir/cib.xml")
token=$(ha_in fm1 corosync-cmapctl -g runtime.config.totem.token 2>/dev/null | sed 's/.*= //')
consensus=$(ha_in fm1 corosync-cmapctl -g runtime.config.totem.consensus 2>/dev/null | sed 's/.*= //')
echo "# cluster up in $(($(ha_now) - t_setup)) ms; fmbrokerd monitor every $mon, priority-fencing-delay $delay, corosync token $token ms (consensus $consensus ms); traffic: $traffic"

rows=()
record () { # KIND T0 ANSWERED OLD NEW
    local s
    s=$(ha_steps "$@") || die "no steps for $1"
    rows+=("$s")
    echo "$s" | jq -r '"# \(.kind) \(.old) -> \(.new): \(.total) ms"' >&2
}
for r in $(seq 1 "$runs"); do
    $traffic && ha_traffic_start "r$r"
    sleep 2
    # kill: in place
    h=$(ha_where)
    pid=$(ha_broker_pid "$h") || die "no broker on $h"
    t0=$(ha_now) && kill -9 "$pid"
    at=$(ha_probe "$t0" "r$r-kill" "$h") || die "no RUN after the kill"
    record kill "$t0" "$at" "$h" "$h"
    sleep 1 && ha_in "$h" crm_resource --cleanup -r fmbrokerd >/dev/null 2>&1
    wait_for 100 0.1 ha_is_at "$h" || die "the group is not back on $h"
    sleep 2
    # fence: the active host hangs
    h=$(ha_where) o=$(other "$h")
    t0=$(ha_now) && ha_event "hang $h" && ha_freeze "$h"
    at=$(ha_probe "$t0" "r$r-fence" "$o") || die "no RUN after $h hung"
    record fence "$t0" "$at" "$h" "$o"
    ha_boot "$h" && wait_for 600 0.2 ha_online "$o" fm1 fm2 && wait_for 600 0.2 ha_online "$h" fm1 fm2 ||
        die "$h did not come back"
    sleep 3
    # move: by hand, back to the host that came back
    t0=$(ha_now) && ha_event "move to $h" && ha_in "$o" crm_resource --move -r fm-group -N "$h" >/dev/null 2>&1
    at=$(ha_probe "$t0" "r$r-move" "$h") || die "no RUN after the move"
    record move "$t0" "$at" "$o" "$h"
    wait_for 100 0.2 ha_is_at "$h" && ha_in "$h" crm_resource --clear -r fm-group >/dev/null 2>&1
    if $traffic; then
        ha_traffic_stop >"$T/stop.out" 2>&1 || die "the clients: $(cat "$T/stop.out")"
        ha_check >"$T/check.out" || die "after round $r: $(cat "$T/check.out")"
        echo "# round $r checked: $(head -n 1 "$T/check.out")" >&2
    fi
done

echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | kind | detection | fencing (agent) | stop | mount | address | broker start | first RUN | other | **total** |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
n=0
for s in "${rows[@]}"; do
    n=$((n + 1))
    echo "$s" | jq -r --arg n "$(((n + 2) / 3))" '
        def v(k): if .[k] == null then "-" else (.[k] | tostring) end;
        "| \($n) | \(.kind) \(.old)->\(.new) | \(v("detection")) | \(if .fencing == null then "-" else "\(.fencing) (\(v("fence_agent")))" end) | \(v("stop")) | \(v("mount")) | \(v("address")) | \(v("broker")) | \(v("first_run")) | \(v("other")) | **\(.total)** |"'
done
echo
echo "Median per kind (ms), from the failure (kill, fence) or crm_resource --move to the first RUN answered by the new broker:"
echo
printf '%s\n' "${rows[@]}" | jq -rs '
    def med: sort | .[(length - 1) / 2 | floor];
    def m(k): [.[] | .[k] | select(. != null)] | if length == 0 then "-" else (med | tostring) end;
    group_by(.kind) | .[] | "- \(.[0].kind): \(m("total")) (detection \(m("detection")), fencing \(m("fencing")), mount \(m("mount")), address \(m("address")), broker \(m("broker")), first RUN \(m("first_run"))), \(length) runs"'

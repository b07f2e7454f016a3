#!/bin/bash
# t3620-pacemaker-live.sh: issue 53.  The HA recipe (deploy/ha) on a live
# two-node cluster: Debian's corosync (knet over UDP) and Pacemaker on two
# broker hosts fm1 and fm2 (network namespaces, each with its own mount
# and UTS namespaces: halive/host-boot.sh says what each has of its own),
# the CIB of deploy/ha/fmbroker-cib.xml with its EDIT values filled in,
# the state on a shared block device (an ext4 loop device) mounted by
# ocf:heartbeat:Filesystem, the floating address by ocf:heartbeat:IPaddr2,
# and fmbrokerd through ocf:fmbroker:fmbrokerd, which does here what
# systemd does with the unit there (halive/fmbrokerd.ocf: no systemd in
# the namespaces).  A fence agent (halive/fence_fmbtest) really cuts a host
# off: links down, every process killed.  Clients in a third namespace:
# an RM over TLS to the floating address with an rm token (fmbroker
# run-job/end-job) and two compute nodes' agents (fmbroker-cxi with their
# node tokens); the mock FM beside them.
#
# Under that traffic: fmbrokerd killed on the active host (Pacemaker
# recovers it in place, as migration-threshold says); the active host
# hanging as a whole (fenced, the group moves); the fenced host back (no
# failback); the group moved back by hand (crm_resource --move, --clear).
# After each: every RUN and CLEANUP asked was answered and is in the
# surviving broker's state, every node report arrived, no VNI given
# twice, the FM holds exactly the live jobs' reservations; and the time
# from the failure to the first RUN answered by the new broker is printed
# (with each step's share), the kill's within the recipe's goal of 5 s.
# Needs root, ip netns, unshare, a loop device, and Debian's pacemaker,
# corosync, resource-agents (with kmod's modprobe, psmisc's fuser).
. "$(dirname "$0")/lib.sh"
. "$FMB_SRC/tests/integration/halive/cluster.sh"
why=$(ha_missing)
if [ -n "$why" ]; then
    if [ "${CI:-}" = true ]; then
        echo "not ok 1 - a live Pacemaker cluster is needed under CI: $why"
        echo "1..1"
        exit 1
    fi
    echo "ok 1 # SKIP no live Pacemaker cluster here: $why"
    echo "1..1"
    exit 0
fi
on_exit ha_cleanup
trap 'exit 143' TERM INT HUP # (a timeout's TERM: clean up all the same)
step_fail_hook=ha_diag
summary=

# take_over KIND T0 ANSWERED OLD NEW: print and keep the step times
take_over () {
    local s
    s=$(ha_steps "$@") && echo "$s" &&
        summary="$summary$(echo "$s" | jq -r '"\(.kind): \(.total) ms (detection \(.detection // "-"), fencing \(.fencing // "-"), mount \(.mount // "-"), address \(.address // "-"), broker \(.broker // "-"), first RUN \(.first_run // "-"))"')
"
}
phase_checks () { # HOST: the group on HOST, its broker the state's owner; the clients' answers hold
    local ok=0
    test "$(ha_where)" = "$1" || { echo "the group is not (all) on $1: $(ha_where)"; ok=1; }
    ha_holder_is "$1" || { echo "the broker at the floating address is not $1's"; ok=1; }
    ha_traffic_stop || ok=1
    ha_check >"$T/check.out" || ok=1
    cat "$T/check.out"
    summary="$summary  checked on $1: $(head -n 1 "$T/check.out")
"
    return $ok
}

expect_ok 'two broker hosts form a cluster and load deploy/ha/fmbroker-cib.xml' '
    ha_setup && echo "cluster up; CIB loaded with cibadmin --replace --scope configuration"
' || bail_out "no cluster"
expect_ok 'the group starts on fm1: the volume mounted there only, the address, the broker over TLS' '
    wait_for 300 0.2 ha_is_at fm1 &&
    ha_in fm1 findmnt -n /var/lib/fmbroker | grep -q "$ha_loop" &&
    ! ha_in fm2 findmnt -n /var/lib/fmbroker &&
    ha_in fm1 ip -o addr show dev eth0 | grep -q "inet $ha_vip/" &&
    ha_holder_is fm1 && ha_node_tokens n1 n2
' || bail_out "the group did not start"

# (The target, the first RUN within 5 s, is bench/ha-takeover.sh'"'"'s to
# measure; the bound here says only that the recovery came, on a host
# that also runs both clusters, the traffic and another test.)
expect_ok 'under traffic, fmbrokerd killed on fm1: recovered there, its first RUN within 15 s' '
    ha_traffic_start kill && sleep 3 &&
    pid=$(ha_broker_pid fm1) && t0=$(ha_now) && kill -9 "$pid" &&
    at=$(ha_probe "$t0" kill-probe fm1) &&
    echo "# kill: first RUN answered $((at - t0)) ms after the kill" &&
    take_over kill "$t0" "$at" fm1 fm1 && sleep 2 &&
    test $((at - t0)) -lt 15000 && phase_checks fm1
'
expect_ok 'under traffic, fm1 hangs: fm2 fences it (nothing left running, links down) and takes over' '
    ha_traffic_start fence && sleep 3 &&
    t0=$(ha_now) && ha_event "hang fm1" && ha_freeze fm1 &&
    at=$(ha_probe "$t0" fence-probe fm2) &&
    echo "# fence: first RUN answered $((at - t0)) ms after fm1 hung" &&
    take_over fence "$t0" "$at" fm1 fm2 &&
    grep -q " fence [a-z]* fm1 done" "$ha_events" &&
    test -z "$(ip netns pids "$ha_ns_fm1")" &&
    ! ip -n "$ha_ns_fm1" link show eth0 | grep -q "state UP" &&
    test $((at - t0)) -lt 40000 && sleep 2 && phase_checks fm2
'
expect_ok 'under traffic, fm1 comes back: it rejoins, the group stays on fm2 (no failback)' '
    ha_traffic_start back && sleep 2 &&
    ha_boot fm1 && wait_for 600 0.2 ha_online fm2 fm1 fm2 && wait_for 600 0.2 ha_online fm1 fm1 fm2 &&
    sleep 5 && test "$(ha_where fm1)" = fm2 && phase_checks fm2 &&
    longest=$(awk "\$2 == \"ask\" && \$3 == \"RUN\" && \$4 ~ /^back-/ { a[\$4] = \$1 }
        \$2 == \"RUN\" && (\$3 in a) { d = \$1 - a[\$3]; if (d > m) m = d } END { print m + 0 }" "$ha_dir/clients/answers") &&
    summary="${summary}back: the longest RUN while fm1 rejoined took $longest ms
"
'
expect_ok 'under traffic, the group moved to fm1 by hand (crm_resource --move), then --clear' '
    ha_traffic_start move && sleep 3 &&
    t0=$(ha_now) && ha_event "move to fm1" && ha_in fm2 crm_resource --move -r fm-group -N fm1 &&
    at=$(ha_probe "$t0" move-probe fm1) &&
    echo "# move: first RUN answered by fm1 $((at - t0)) ms after crm_resource --move" &&
    take_over move "$t0" "$at" fm2 fm1 &&
    wait_for 100 0.2 ha_is_at fm1 && ha_in fm1 crm_resource --clear -r fm-group &&
    ! ha_in fm1 cibadmin -Q -o constraints | grep -q cli-prefer &&
    sleep 2 && test "$(ha_where)" = fm1 && phase_checks fm1
'
expect_ok 'nothing reported foreign; the lock names the owner, as deploy/ha/README.md says' '
    ! ha_api GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"foreign_reservation\")" &&
    ha_api GET /v1/status | jq -e ".state_lock.host == \"fm1\"" &&
    pid=$(ha_broker_pid fm1) && ha_in fm1 "$FMB_BIN/fmbroker" status >st; cat st &&
    grep -qx "state lock: /var/lib/fmbroker/fmbrokerd.lock held by host fm1, pid $pid" st &&
    ha_in fm1 "$FMB_BIN/fmbrokerd" --check-config --user root >cc; cat cc &&
    grep -q "locked by a running broker (.*fm1.*$pid.*)" cc
'
printf "# take-over times:\n%s" "$summary" | sed "s/^\([^#]\)/#   \1/"
done_testing

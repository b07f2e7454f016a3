#!/bin/bash
# t3610-pacemaker.sh: the shipped Pacemaker configuration (deploy/ha) is
# valid and does what doc/high-availability.md says, checked offline with Debian's
# pacemaker-cli-utils (no cluster, no corosync): crm_verify accepts it,
# and crm_simulate shows the broker's group starting on fm1, moving to
# fm2 after fencing fm1 when fm1 fails, restarting in place after a
# failed monitor, and moving by hand with crm_resource --move.
. "$(dirname "$0")/lib.sh"
if ! command -v crm_simulate >/dev/null || ! command -v crm_verify >/dev/null; then
    echo "1..0 # SKIP needs pacemaker-cli-utils (scripts/install-deps.sh)"
    exit 0
fi
ha="$FMB_SRC/deploy/ha"
# node_of RESOURCE CIB: the node the resource runs on in a saved CIB
node_of () { CIB_file="$2" crm_mon -1 --output-as=xml | python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.stdin).getroot().find(".//resource[@id=\"%s\"]" % sys.argv[1])
print(r.find("node").get("name") if r is not None and r.get("role") in ("Started", "Promoted") else "stopped")' "$1"; }

expect_ok 'the shipped CIB parses, fences, and brings the group up on fm1' '
    crm_simulate -x "$ha/fmbroker-cib.xml" -S -u fm1 -u fm2 -O up.xml >sim.out && cat sim.out &&
    grep -Eq "Start +fm-fs +\( +fm1 \)" sim.out &&
    grep -Eq "Start +fmbrokerd +\( +fm1 \)" sim.out &&
    crm_verify -x up.xml &&
    test "$(node_of fmbrokerd up.xml)" = fm1 && test "$(node_of fm-fs up.xml)" = fm1 &&
    test "$(node_of fm-ip up.xml)" = fm1
'
expect_ok 'fencing is on and every node has a fence device kept off itself' '
    grep -q "name=\"stonith-enabled\" value=\"true\"" "$ha/fmbroker-cib.xml" &&
    test "$(node_of fence-fm1 up.xml)" = fm2 && test "$(node_of fence-fm2 up.xml)" = fm1
'
# A state disk that stops taking writes must fail the group over: the
# broker only turns "degraded", and a mounted-only check never fails.
expect_ok 'the state volume'"'"'s monitor writes to it (OCF_CHECK_LEVEL 20), in both CIBs' '
    for cib in fmbroker-cib.xml fmbroker-drbd-cib.xml; do
        python3 - "$ha/$cib" <<-PY || return 1
	import sys, xml.etree.ElementTree as ET
	fs = [p for p in ET.parse(sys.argv[1]).iter("primitive") if p.get("type") == "Filesystem"]
	ops = [o for p in fs for o in p.iter("op") if o.get("name") == "monitor"]
	levels = [n.get("value") for o in ops for n in o.iter("nvpair") if n.get("name") == "OCF_CHECK_LEVEL"]
	sys.exit(0 if len(fs) == 1 and ops and levels == ["20"] * len(ops) else 1)
	PY
    done
'
expect_ok 'without fencing, crm_verify refuses the configuration' '
    python3 - "$ha/fmbroker-cib.xml" <<-PY &&
	import sys, xml.etree.ElementTree as ET
	t = ET.parse(sys.argv[1])
	for parent in (t.find("configuration/resources"), t.find("configuration/constraints")):
	    for e in list(parent):
	        if e.get("class") == "stonith" or e.get("rsc", "").startswith("fence-"):
	            parent.remove(e)
	t.write("nofence.xml")
	PY
    crm_simulate -x nofence.xml -S -u fm1 -u fm2 -O nofence-up.xml >/dev/null 2>&1;
    { crm_verify -x nofence-up.xml -V 2>err; test $? = 78; } && grep -qi "STONITH" err
'
expect_ok 'fm1 fails: it is fenced, then the group moves to fm2 in order' '
    crm_simulate -x up.xml -S -f fm1 -O failed.xml >sim.out && cat sim.out &&
    grep -q "Fence (reboot) fm1" sim.out &&
    for r in fm-fs fm-ip fmbrokerd; do grep -Eq "Move +$r +\( fm1 -> fm2 \)" sim.out || return 1; done &&
    a=$(grep -n "fm-fs  *start on fm2" sim.out | cut -d: -f1) &&
    b=$(grep -n "fm-ip  *start on fm2" sim.out | cut -d: -f1) &&
    c=$(grep -n "fmbrokerd  *start on fm2" sim.out | cut -d: -f1) &&
    test "$a" -lt "$b" && test "$b" -lt "$c" &&
    for r in fm-fs fm-ip fmbrokerd; do test "$(node_of $r failed.xml)" = fm2 || return 1; done
'
expect_ok 'fm1 comes back: the group stays on fm2 (no failback)' '
    crm_simulate -x failed.xml -S -u fm1 -O back.xml >sim.out &&
    ! grep -Eq "Move +fmbrokerd" sim.out && test "$(node_of fmbrokerd back.xml)" = fm2
'
expect_ok 'a failed monitor of fmbrokerd recovers it, the group kept together' '
    crm_simulate -x up.xml -S -i fmbrokerd_monitor_2000@fm1=7 -O recovered.xml >sim.out && cat sim.out &&
    grep -Eq "Recover +fmbrokerd " sim.out &&
    n=$(node_of fmbrokerd recovered.xml) && test "$n" != stopped &&
    test "$(node_of fm-fs recovered.xml)" = "$n" && test "$(node_of fm-ip recovered.xml)" = "$n"
'
expect_ok 'a manual failover (crm_resource --move) moves the group, in order' '
    cp up.xml moved.xml &&
    CIB_file=moved.xml crm_resource --move -r fm-group -N fm2 >/dev/null 2>&1 &&
    crm_simulate -x moved.xml -S -O after-move.xml >sim.out &&
    for r in fm-fs fm-ip fmbrokerd; do grep -Eq "Move +$r +\( fm1 -> fm2 \)" sim.out || return 1; done &&
    test "$(node_of fmbrokerd after-move.xml)" = fm2
'
# The simulator never runs the DRBD agent, so it never sets promotion
# scores: the test gives them (fm1 preferred), as a running cluster's agent would.
expect_ok 'DRBD variant: promoted on fm1 with the group; fm1 fails, fm2 is promoted and takes it' '
    sed "s|    <constraints>|    <constraints><rsc_location id=\"t-p1\" rsc=\"fm-drbd-clone\" role=\"Promoted\" node=\"fm1\" score=\"10\"/><rsc_location id=\"t-p2\" rsc=\"fm-drbd-clone\" role=\"Promoted\" node=\"fm2\" score=\"5\"/>|" \
        "$ha/fmbroker-drbd-cib.xml" >drbd.xml &&
    crm_simulate -x drbd.xml -S -u fm1 -u fm2 -O dup.xml >sim.out && cat sim.out &&
    grep -q "Promote .*fm-drbd:0 .*Stopped -> Promoted fm1" sim.out &&
    crm_verify -x dup.xml && test "$(node_of fmbrokerd dup.xml)" = fm1 &&
    crm_simulate -x dup.xml -S -f fm1 -O dfail.xml >sim.out && cat sim.out &&
    grep -q "Fence (reboot) fm1" sim.out &&
    grep -q "Promote .*Unpromoted -> Promoted fm2" sim.out &&
    test "$(node_of fmbrokerd dfail.xml)" = fm2 && test "$(node_of fm-fs dfail.xml)" = fm2
'
done_testing

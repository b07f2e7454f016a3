#!/bin/bash
# t2010-agent.sh: fmbroker-cxi against the libcxi double: the service
# recipe byte for byte, env, list, and every driver answer that matters.
. "$(dirname "$0")/lib.sh"
export MOCKCXI_SYSTEM_SVC=1
facts="--uid 1000 --vnis 1024 --ncores 4"

expect_ok 'no libcxi and no NIC: prolog and epilog succeed with nothing to do' '
    FMBROKER_CXI_SYSFS=$T/no-sysfs libcxi=libcxi.so.1 agent n0 prolog --job 1 $facts 2>err &&
    grep -q "no libcxi (libcxi.so.1: cannot load: .*): no Slingshot NICs to manage, nothing to do" err &&
    FMBROKER_CXI_SYSFS=$T/no-sysfs libcxi=libcxi.so.1 agent n0 epilog --job 1 --no-report 2>err
'
# Isolation must not turn off while saying "nothing to do": a libcxi
# someone chose that does not load, or NICs the kernel shows without one.
expect_ok 'a chosen libcxi that does not load, or NICs without libcxi: prolog and epilog fail, saying why' '
    { libcxi=/nonexistent/libcxi.so.1 agent n0 prolog --job 1 $facts 2>err; test $? = 1; } &&
    grep -q "/nonexistent/libcxi.so.1: cannot load: .*the libcxi chosen (--libcxi or \[cxi\] libcxi) cannot be used" err &&
    { libcxi=/nonexistent/libcxi.so.1 agent n0 epilog --job 1 --no-report 2>err; test $? = 1; } &&
    mkdir -p "$T/sysfs/cxi0" &&
    { FMBROKER_CXI_SYSFS=$T/sysfs libcxi=libcxi.so.1 agent n0 prolog --job 1 $facts 2>err; test $? = 1; } &&
    grep -q "but this node has Slingshot NICs (cxi0): install libcxi or set \[cxi\] libcxi" err
'
expect_ok 'no NICs: prolog and epilog succeed with nothing to do' '
    MOCKCXI_DEVICES=0 agent n0 prolog --job 1 $facts 2>err && grep -q "no Slingshot NICs" err &&
    MOCKCXI_DEVICES=0 agent n0 epilog --job 1 --no-report
'
# The env a job with VNI 1024 on N NICs (service 3 on each) must get.
want_env () {
    printf "export SLINGSHOT_VNIS='1024'\n"
    printf "export SLINGSHOT_DEVICES='%s'\n" "$(seq -s, -f "cxi%g" 0 $(($1 - 1)))"
    printf "export SLINGSHOT_SVC_IDS='%s'\n" "$(yes 3 | head -n "$1" | paste -sd,)"
    printf "export SLINGSHOT_TCS='0xa'\n"
}
for n in 1 4; do
expect_ok "$n NIC(s): prolog creates one service per NIC with the right descriptor" '
    MOCKCXI_DEVICES=$n agent n$n prolog --job 1 $facts --no-report &&
    for d in $(seq 0 $((n - 1))); do
        cxi_services n$n $d | jq -c "select(.id >= 3)" >svc.json && test -s svc.json &&
        jq -e ".flags == 31 and .vnis == [1024] and .member0 == {type: 1, id: 1000} and .tcs_bits == 10" svc.json &&
        jq -e ".limits.ptes.res == 24 and .limits.txqs.res == 8 and .limits.les.res == 64 and .limits.acs.res == 8" svc.json &&
        jq -e ".limits.tles == {max: 8, res: 8} and .limits.les.max == 16384 and .limits.txqs.max == 1024" svc.json &&
        jq -e "(.desc | .[0:2]) == \"1f\" and (.desc | .[32:48]) == \"e803000001000000\"" svc.json || return 1
    done
'
expect_ok "$n NIC(s): env prints exactly the job's variables, from the prolog's record" '
    test "$(stat -c "%u %a" "$T/n$n.rec/1.env")" = "1000 400" &&
    test "$(stat -c %a "$T/n$n.rec")" = 755 &&
    libcxi=/nonexistent/libcxi.so.1 agent n$n env --job 1 >env.sh && want_env $n >want.sh && diff -u want.sh env.sh &&
    agent n$n env --job 1 --format json --lnx >env.json &&
    jq -e ".SLINGSHOT_SVC_IDS == \"$(yes 3 | head -n $n | paste -sd,)\"" env.json &&
    jq -e ".FI_LNX_PROV_LINKS | startswith(\"shm+cxi:cxi0\")" env.json
'
expect_ok "$n NIC(s): list shows every NIC and merges identical services" '
    agent n$n list >list.txt && test "$(grep -Ec "^cxi[0-9]+ +0x" list.txt)" = $n &&
    grep -q " 3  *1000  *1024 " list.txt && test "$(grep -c " 3  *1000  *1024 " list.txt)" = 1 &&
    agent n$n list --json | jq -e "length == $n and all(.[]; any(.services[]; .uid == 1000 and .vnis == [1024]))"
'
expect_ok "$n NIC(s): epilog leaves none of the job's services" '
    agent n$n epilog --job 1 --no-report &&
    for d in $(seq 0 $((n - 1))); do cxi_services n$n $d | jq -se "all(.[]; .id < 3)" || return 1; done &&
    test ! -e "$T/n$n.rec/1.json" && test ! -e "$T/n$n.rec/1.env"
'
done
expect_ok 'a system service and the default service are never touched' '
    cxi_services n4 0 | jq -se "any(.[]; .id == 1) and any(.[]; .id == 2 and .flags >= 32)"
'
expect_ok 'ENOSPC with some LEs free: the reservation is scaled back, with a warning' '
    MOCKCXI_MAX=les=1000 agent s1 prolog --job 2 --uid 1000 --vnis 1100 --ncores 1000 --no-report 2>err &&
    grep -q "only 936 LEs free of 1000 requested: reserving 936" err &&
    cxi_services s1 0 | jq -se "any(.[]; .id == 3 and .limits.les.res == 936)"
'
expect_ok 'no TLE pool left: created without reserved TLEs, with a warning' '
    for j in 11 12; do agent s1 prolog --job $j --uid 1000 --vnis 11$j --no-report || return 1; done &&
    agent s1 prolog --job 13 --uid 1000 --vnis 1113 --no-report 2>err &&
    grep -q "no TLE pool free" err &&
    cxi_services s1 0 | jq -se "any(.[]; .vnis == [1113] and .limits.tles == {max: 0, res: 0})"
'
expect_ok 'when even the minimum does not fit, the NICs done already are cleaned' '
    MOCKCXI_DEVICES=4 agent s4 list >/dev/null &&
    cxi_set s4 ".fail.cxil_alloc_svc = {errno: 28, count: 100, skip: 2}" &&
    { agent s4 prolog --job 3 $facts --no-report 2>err; test $? = 1; } &&
    grep -q "cxi2: not enough NIC resources even at the minimum" err &&
    grep -q "removing the 2 service(s) created" err &&
    for d in 0 1 2 3; do cxi_services s4 $d | jq -se "all(.[]; .id < 3)" || return 1; done
'
expect_ok 'a VNI already in another service is EEXIST, reported clearly' '
    agent e1 prolog --job 4 --uid 1000 --vnis 1200 --no-report &&
    { agent e1 prolog --job 5 --uid 2000 --vnis 1200 --no-report 2>err; test $? = 1; } &&
    grep -q "cxil_alloc_svc: EEXIST (a VNI is already in another service)" err
'
expect_ok 'EBUSY twice, then success inside the retry window' '
    cxi_set e1 "(.devices[0].services[] | select(.vnis == [1200]) | .busy) = 2" &&
    agent e1 epilog --job 4 --retry-busy 10 --no-report 2>err &&
    test "$(grep -c "busy, retrying" err)" = 2
'
expect_ok 'EBUSY beyond the window: exit 1, the node must be drained' '
    agent e1 prolog --job 6 --uid 1000 --vnis 1201 --no-report &&
    cxi_set e1 "(.devices[0].services[] | select(.vnis == [1201]) | .busy) = 100" &&
    { agent e1 epilog --job 6 --retry-busy 1 --no-report 2>err; test $? = 1; } &&
    grep -q "EBUSY past the 1 s retry window" err &&
    test -e "$T/e1.rec/6.json"
'
expect_ok 'EPERM (not root, or the driver says so) is named' '
    { MOCKCXI_FORCE_EPERM=1 agent p1 prolog --job 7 $facts --no-report 2>err; test $? = 1; } &&
    grep -q "EPERM (not root?)" err
'
expect_ok '--dry-run prints the descriptors and changes nothing' '
    agent d1 list >/dev/null && cp "$T/d1.cxi.json" before.json &&
    agent d1 prolog --job 8 $facts --dry-run >out && grep -q "^cxi0: service (to create): members uid=1000, vnis=1024, tcs=0xa" out &&
    cmp before.json "$T/d1.cxi.json"
'
expect_ok 'the older libcxi (SHS <= 13.0, no cxil_svc_enable) works the same' '
    libcxi=$FMB_BIN/../mockcxi/old/libcxi.so.1 agent o1 prolog --job 9 $facts --no-report &&
    cxi_services o1 0 | jq -se "any(.[]; .vnis == [1024] and .flags == 31)" &&
    libcxi=$FMB_BIN/../mockcxi/old/libcxi.so.1 agent o1 epilog --job 9 --no-report
'
expect_ok 'bad usage is exit 2' '
    { agent x prolog 2>/dev/null; test $? = 2; } && { agent x bogus 2>/dev/null; test $? = 2; } &&
    { agent x prolog --job 1 --uid 5 2>/dev/null; test $? = 2; }
'
# The agent starts in every job's prolog: libsystemd (and the six
# libraries it brings) is loaded only when stderr is the journal
# (src/common/log.c).  tests/faultinject/fakejournal.c stands in for
# libsystemd.so.0: this host has no journald to receive the records.
expect_ok 'the agent does not link libsystemd; under systemd its records reach the journal with their fields' '
    ! readelf -d "$FMB_BIN/fmbroker-cxi" | grep -q "NEEDED.*libsystemd" &&
    : >err && js=$(stat -c "%d:%i" err) &&
    { MOCKCXI_FORCE_EPERM=1 JOURNAL_STREAM=$js FAKEJOURNAL_FILE=$T/journal \
        LD_LIBRARY_PATH=$FMB_BIN/../fakejournal agent j1 prolog --job 10 $facts --no-report 2>>err; test $? = 1; } &&
    grep -q "^MESSAGE=.*EPERM (not root?)" journal && grep -qx "PRIORITY=3" journal &&
    grep -qx "SYSLOG_IDENTIFIER=fmbroker-cxi" journal && ! grep -q "EPERM" err
'
expect_ok 'under systemd without a journal to take them, the records go to stderr' '
    : >err && js=$(stat -c "%d:%i" err) &&
    { MOCKCXI_FORCE_EPERM=1 JOURNAL_STREAM=$js LD_LIBRARY_PATH=$FMB_BIN/../fakejournal \
        agent j2 prolog --job 11 $facts --no-report 2>>err; test $? = 1; } &&
    grep -q "fmbroker-cxi: error: .*EPERM (not root?)" err
'
done_testing

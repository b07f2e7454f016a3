#!/bin/bash
# t1630-client-failover.sh: clients follow the active broker.  [api]
# broker_url (or --broker-url) takes an ordered list; the CLI and the node
# agent move to the next broker when one cannot be reached -- refused, or a
# host that never answers -- within their usual timeout, over TLS with the
# agent token, as compute nodes run.
. "$(dirname "$0")/lib.sh"
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null
rm_tok=rm-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
agent_tok=agent-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
printf "rm %s\nagent %s\n" "$rm_tok" "$agent_tok" >"$T/tokens" && chmod 600 "$T/tokens"
printf "%s\n" "$agent_tok" >"$T/agent.token" && chmod 600 "$T/agent.token"
shared_agent_token=1 # its nodes share one agent token (the opt-in)
start_mockfm
node_conf () { # BROKER_URL: a compute node's configuration
    printf "[api]\nsocket = %s\nbroker_url = %s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$1" "$T/agent.token" "$T/certs/ca.pem" >"$T/node.conf"
}
node_agent () { # NODE ARGS...
    n=$1
    shift
    MOCKCXI_STATE="$T/$n.cxi.json" MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" \
        --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" --state-dir "$T/$n.rec" --node "$n" "$@"
}
broker_on () { # PORT: the broker's TLS listener on PORT
    write_broker_conf "[api]" "tcp = 127.0.0.1:$1" "tls_cert = $T/certs/server.pem" \
        "tls_key = $T/certs/server.key" "tokens_file = $T/tokens" && start_broker
}
# A host that accepts and then says nothing (a dead broker's address that
# still takes connections, a hung host): only a timeout gets past it.
start_silent () { # PORT
    python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); open(sys.argv[2], "w").close()
conns=[]
t=time.time()
while time.time() - t < 120:
    c,_=s.accept(); conns.append(c)' "$1" "$T/silent.up" &
    silent_pid=$!
    wait_for 100 0.05 test -e "$T/silent.up"
}
stop_silent () { [ -n "${silent_pid:-}" ] && kill "$silent_pid" 2>/dev/null && wait "$silent_pid" 2>/dev/null; silent_pid=; }
on_exit stop_silent

expect_ok 'a broker on the second address of the list' '
    p=$(free_ports 3) && first=$p && second=$((p + 1)) && third=$((p + 2)) &&
    broker_on "$second" &&
    rm_call PUT /v1/jobs/1 "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" | jq -e ".hwcoll.state == \"reserved\""
'
expect_ok 'the list is checked and normalised like one URL' '
    node_conf "https://127.0.0.1:$first/ ,  https://127.0.0.1:$second" &&
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --json job show 1 >/dev/null &&
    node_conf "https://127.0.0.1:$first,http://127.0.0.1:$second" &&
    { "$FMB_BIN/fmbroker" -c "$T/node.conf" status 2>err; test $? = 3; } &&
    grep -q "broker_url.*http://127.0.0.1:$second.*not an https URL" err &&
    node_conf "https://127.0.0.1:$first,,https://127.0.0.1:$second" &&
    { "$FMB_BIN/fmbroker" -c "$T/node.conf" status 2>err; test $? = 3; } &&
    grep -q "broker_url.*an empty URL in the list" err
'
expect_ok 'the first refuses: the CLI and the agent use the second' '
    node_conf "https://127.0.0.1:$first,https://127.0.0.1:$second" &&
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --json job show 1 | jq -e ".id == \"1\"" &&
    node_agent a prolog --job 1 &&
    jq -e "[.devices[].services[] | select(.id >= 2)] | length == 2" "$T/a.cxi.json" &&
    rm_call GET /v1/jobs/1 | jq -e "[.node_reports[] | select(.node == \"a\" and .cxi == \"created\")] | length == 1"
'
expect_ok 'the first accepts and never answers: both still get through in their timeout' '
    start_silent "$first" &&
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --timeout 6 --json job show 1 | jq -e ".id == \"1\"" &&
    node_agent b prolog --job 1 &&
    rm_call GET /v1/jobs/1 | jq -e "[.node_reports[] | select(.cxi == \"created\")] | length == 2"
'
expect_ok '--broker-url replaces [api] broker_url, in the CLI and the agent' '
    node_conf "https://127.0.0.1:$third" &&
    { "$FMB_BIN/fmbroker" -c "$T/node.conf" --timeout 2 job show 1 2>err; test $? = 75; } &&
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --timeout 6 --broker-url "https://127.0.0.1:$third,https://127.0.0.1:$second" \
        --json job show 1 | jq -e ".id == \"1\"" &&
    rm_call DELETE /v1/jobs/1 >/dev/null &&
    node_agent a epilog --job 1 --broker-url "https://127.0.0.1:$third,https://127.0.0.1:$second" &&
    rm_call GET /v1/jobs/1 | jq -e "[.node_reports[] | select(.node == \"a\" and .cxi == \"destroyed\")] | length == 1"
'
expect_ok 'nobody answers: the error names every broker tried, exit 75 (a hook retries it)' '
    stop_silent && stop_broker &&
    node_conf "https://127.0.0.1:$first,https://127.0.0.1:$second" &&
    { "$FMB_BIN/fmbroker" -c "$T/node.conf" --timeout 3 job show 1 2>err; test $? = 75; } && cat err &&
    grep -q "127.0.0.1:$first: .*127.0.0.1:$second: " err
'
expect_ok 'the standby takes over on the first address: the same list follows it' '
    broker_on "$first" &&
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --json job show 1 | jq -e ".state == \"releasing\" or .state == \"released\"" &&
    node_agent b epilog --job 1 &&
    rm_call GET /v1/jobs/1 | jq -e "[.node_reports[] | select(.cxi == \"destroyed\")] | length == 2"
'
# EpilogSlurmctld in a failover gap: no broker answers its CLEANUP.  Slurm
# is not held (the hook returns at once), and a detached copy tries again
# until the standby answers: the job is released, not left active at the
# broker with its VNIs and FM reservation for good.
expect_ok 'a CLEANUP that finds no broker (a failover gap) is retried until one answers' '
    printf "%s\n" "$rm_tok" >"$T/rm.token" && chmod 600 "$T/rm.token" &&
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s,https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$first" "$second" "$T/rm.token" "$T/certs/ca.pem" >"$T/ctl.conf" &&
    rm_call PUT /v1/jobs/gap "{\"uid\":1000,\"node_count\":2}" | jq -e ".state == \"active\"" &&
    stop_broker && start=$(date +%s) &&
    SLURM_JOB_ID=gap FMBROKER_CONF=$T/ctl.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=1 \
        FMBROKER_CLEANUP_RETRY_S=60 FMBROKER_HOOK_LOG=$T/hooks.log "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" &&
    test $(($(date +%s) - start)) -le 5 && cat "$T/hooks.log" &&
    grep -q "job gap: end-job failed: .*; retrying for up to 60 s" "$T/hooks.log" &&
    sleep 3 && broker_on "$second" &&
    wait_for 300 0.1 grep -q "job gap: end-job done after [0-9]* s of retries" "$T/hooks.log" &&
    rm_call GET /v1/jobs/gap | jq -e ".state == \"releasing\" or .state == \"released\""
'
# PrologSlurmctld in a failover gap: the job waits for a broker (within
# FMBROKER_RUN_RETRY_S) rather than start without its VNIs.
expect_ok 'a RUN that finds no broker (a failover gap) waits for one' '
    stop_broker && start=$(date +%s) &&
    { SLURM_JOB_ID=gap2 SLURM_JOB_UID=1000 SLURM_JOB_USER=nobody SLURM_JOB_NODELIST="n[1-2]" \
        SLURM_JOB_CPUS_PER_NODE=4 FMBROKER_CONF=$T/ctl.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=1 \
        FMBROKER_RUN_RETRY_S=60 FMBROKER_HOOK_LOG=$T/hooks.log "$FMB_SRC/deploy/slurm/prolog_slurmctld.sh" & } &&
    hook=$! && sleep 3 && broker_on "$second" && wait $hook &&
    echo "# the RUN waited $(($(date +%s) - start)) s" && cat "$T/hooks.log" &&
    grep -q "job gap2: run-job done after [0-9]* s of retries" "$T/hooks.log" &&
    rm_call GET /v1/jobs/gap2 | jq -e ".state == \"active\" and .nodes == [\"n1\",\"n2\"]"
'
# The job is requeued (same id) while its CLEANUP still waits for a
# broker: the CLEANUP must not arrive after the next run's RUN found the
# record, or it would end that run.  (A stub squeue says PENDING, with the
# job's id, as -o '%A %T' asks.)
expect_ok 'a CLEANUP still waiting when the job is requeued is left to the next run' '
    rm_call PUT /v1/jobs/rq "{\"uid\":1000,\"node_count\":2}" >/dev/null &&
    mkdir -p "$T/stub" && printf "#!/bin/sh\necho rq PENDING\n" >"$T/stub/squeue" && chmod 755 "$T/stub/squeue" &&
    stop_broker &&
    PATH="$T/stub:$PATH" SLURM_JOB_ID=rq FMBROKER_CONF=$T/ctl.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=1 \
        FMBROKER_CLEANUP_RETRY_S=60 FMBROKER_HOOK_LOG=$T/hooks.log "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" &&
    wait_for 100 0.1 grep -q "job rq: requeued before its CLEANUP got through" "$T/hooks.log" &&
    broker_on "$second" && rm_call GET /v1/jobs/rq | jq -e ".state == \"active\""
'
expect_ok 'a CLEANUP the broker refuses for good is not retried' '
    SLURM_JOB_ID=nosuch FMBROKER_CONF=$T/ctl.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=1 \
        FMBROKER_HOOK_LOG=$T/hooks.log "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" &&
    grep -q "job nosuch: the broker has no such job: its RUN never reached it, so it holds nothing" "$T/hooks.log" &&
    ! grep -q "job nosuch: .*retrying" "$T/hooks.log"
'
# A host that answers, but one byte at a time (a broker's host swapping,
# a hostile peer): each read gets its byte within the timeout, so only a
# bound on the whole call gets past it.  The client library bounds the
# TLS handshake and the exchange as a whole; the hooks' CLI calls also
# bound their whole run (alarm(2), no timeout(1) around them) for what
# the library cannot: a name lookup that never returns.  The CLEANUP
# hook returns and hands the job to its detached retry.
start_trickle () { # PORT: a TLS record header for 16 KiB, then a byte each 0.15 s
    python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); open(sys.argv[2], "w").close()
s.settimeout(0.05)
t=time.time(); conns=[]
while time.time() - t < 40:
    try:
        c,_=s.accept(); c.sendall(b"\x16\x03\x03\x40\x00"); conns.append(c)
    except socket.timeout:
        pass
    for c in conns:
        try: c.send(b"\x02")
        except OSError: pass
    time.sleep(0.1)' "$1" "$T/trickle.up" &
    trickle_pid=$!
    wait_for 100 0.05 test -e "$T/trickle.up"
}
stop_trickle () { [ -n "${trickle_pid:-}" ] && kill "$trickle_pid" 2>/dev/null && wait "$trickle_pid" 2>/dev/null; trickle_pid=; }
on_exit stop_trickle
# the CLI as slurmctld starts its hooks: SIGALRM blocked (a shell passes
# the mask on to what it runs)
alrm_py='import os,signal,sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}); os.execv(sys.argv[1], sys.argv[1:])'
alrm_blocked () { python3 -c "$alrm_py" "$@"; }
expect_ok 'a broker that answers a byte at a time holds a call, and a hook, no longer than its timeout' '
    trickle=$(free_ports 1) && start_trickle "$trickle" &&
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$trickle" "$T/rm.token" "$T/certs/ca.pem" >"$T/trickle.conf" &&
    start=$(date +%s) &&
    { "$FMB_BIN/fmbroker" -c "$T/trickle.conf" --timeout 2 end-job tr 2>err; rc=$?; } &&
    took=$(($(date +%s) - start)) && echo "# exit $rc after $took s" && cat err &&
    test "$rc" = 75 && test "$took" -le 4 &&
    grep -q "^fmbroker: broker at https://127.0.0.1:$trickle: TLS handshake: Connection timed out" err &&
    start=$(date +%s) &&
    SLURM_JOB_ID=tr FMBROKER_CONF=$T/trickle.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=2 \
        FMBROKER_CLEANUP_RETRY_S=3 FMBROKER_HOOK_LOG=$T/hooks.log alrm_blocked "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" &&
    took=$(($(date +%s) - start)) && echo "# the hook returned after $took s" &&
    test "$took" -le 6 &&
    grep -q "job tr: end-job failed: fmbroker: broker at .*: TLS handshake: Connection timed out; retrying for up to 3 s" "$T/hooks.log" &&
    wait_for 300 0.1 grep -q "job tr: end-job still failing after" "$T/hooks.log" && grep "job tr:" "$T/hooks.log"
'
stop_trickle
# A name lookup that never returns: in a mount namespace of its own, the
# resolver asks a server that takes its questions and answers none
# (/etc/resolv.conf and nsswitch.conf bound over for that process only).
no_answer_dns () { # ADDR: a UDP port 53 that reads and never answers
    python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 53))
open(sys.argv[2], "w").close(); s.settimeout(0.5); t=time.time()
while time.time() - t < 30:
    try: s.recv(512)
    except socket.timeout: pass' "$1" "$T/dns.up" 2>"$T/dns.err" &
    dns_pid=$!
    wait_for 100 0.05 test -e "$T/dns.up"
}
stop_dns () { [ -n "${dns_pid:-}" ] && kill "$dns_pid" 2>/dev/null && wait "$dns_pid" 2>/dev/null; dns_pid=; }
on_exit stop_dns
with_stuck_resolver () { # CMD...: run with /etc/resolv.conf naming the silent server
    printf "nameserver 127.77.0.53\noptions timeout:30 attempts:1\n" >"$T/resolv.conf" &&
    printf "hosts: dns\n" >"$T/nsswitch.conf" &&
    unshare -m --propagation private sh -c \
        'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/nsswitch.conf && shift 2 && exec "$@"' \
        sh "$T/resolv.conf" "$T/nsswitch.conf" "$@"
}
stuck_end_job () { # plain|blocked (SIGALRM, as slurmctld starts hooks)
    if [ "$1" = blocked ]; then set -- python3 -c "$alrm_py"; else set --; fi
    with_stuck_resolver "$@" "$FMB_BIN/fmbroker" -c "$T/stuck.conf" --timeout 2 end-job tr
}
# (root, for the mount namespace and port 53: CI runs as root)
if [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
expect_ok 'a name lookup that never returns holds a hook command no longer than its timeout' '
    no_answer_dns 127.77.0.53 || { cat "$T/dns.err"; return 1; }
    printf "[api]\nsocket = %s\nbroker_url = https://broker.fmb-test:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$(free_ports 1)" "$T/rm.token" "$T/certs/ca.pem" >"$T/stuck.conf" &&
    for how in plain blocked; do
        start=$(date +%s) &&
        { stuck_end_job $how 2>err; rc=$?; } &&
        took=$(($(date +%s) - start)) && echo "# $how: exit $rc after $took s" && cat err &&
        test "$rc" = 75 && test "$took" -le 6 &&
        grep -q "^fmbroker: end-job: no answer from the broker at https://broker.fmb-test:[0-9]* within 3 s" err ||
            return 1
    done
'
else
    test_count=$((test_count + 1))
    echo "ok $test_count # SKIP a name lookup that never returns: needs root and unshare -m"
fi
stop_dns
done_testing

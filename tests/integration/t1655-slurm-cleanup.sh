#!/bin/bash
# t1655-slurm-cleanup.sh: fmbroker-slurm-cleanup, slurmctld's
# EpilogSlurmctld: as SlurmUser (an rm user, not root) with only Slurm's
# variables, it ends the job at the broker in one process that loads no
# OpenSSL; everything else (a refusal, no broker answering, a broker
# over TLS, a settings file with shell code in it, a job id slurmctld
# would not set) it hands to epilog_slurmctld.sh, which says why and
# retries as it always did (at once in the background when the program
# found no broker: no second wait); with no script to hand it to, it
# fails.
# (t4010 runs it from a real slurmctld.)
. "$(dirname "$0")/lib.sh"
skip_unless_root
chmod 755 "$T"
slurm_user=1002 plain_user=1000
start_mockfm
write_broker_conf
sed -i "s/^rm_users = root$/rm_users = root,$slurm_user/" "$T/broker.conf"
chmod 644 "$T/broker.conf"
start_broker
# The CLI the script runs, counted: the hook's own call is not the CLI.
mkdir -p "$T/bin" && cat >"$T/bin/fmbroker" <<EOF
#!/bin/sh
echo "\$*" >>"$T/cli.calls"
exec "$FMB_BIN/fmbroker" "\$@"
EOF
chmod 755 "$T/bin" "$T/bin/fmbroker"
touch "$T/cli.calls" "$T/hooks.log" && chmod 666 "$T/cli.calls" "$T/hooks.log"
# /etc/default/fmbroker as a site writes it (FMBROKER_DEFAULTS stands in:
# the host's own is left alone)
cat >"$T/default" <<EOF
# the controller, on the broker's host: the socket
FMBROKER_CONF=$T/broker.conf
FMBROKER_BINDIR=$T/bin
FMBROKER_SHAREDIR=$FMB_SRC/deploy
FMBROKER_HOOK_LOG="$T/hooks.log"
FMBROKER_CLEANUP_RETRY_S=60
FMBROKER_HOOK_TIMEOUT=3
EOF
chmod 644 "$T/default"
# hook UID JOB [DEFAULTS [VAR=VALUE...]]: as slurmctld starts it, with
# Slurm's variables and nothing else (but what is given)
hook () {
    _u=$1 _j=$2 _d=${3:-$T/default}
    shift $(($# < 3 ? $# : 3))
    as_user "$_u" env -i SLURM_JOB_ID="$_j" SLURM_SCRIPT_CONTEXT=epilog_slurmctld \
        FMBROKER_DEFAULTS="$_d" "$@" "$FMB_BIN/fmbroker-slurm-cleanup"
}
run_job () { rm_call PUT "/v1/jobs/$1" "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null; }
ended () { job_field "$1" .state | grep -Eqx "releasing|released"; }
cli_calls () { grep -c "end-job $1\$" "$T/cli.calls" || :; }

expect_ok 'as SlurmUser, the CLEANUP in one process: the job ends, its FM reservation goes' '
    run_job j1 && mockfm_has_job c1-j1 &&
    hook $slurm_user j1 && ended j1 &&
    wait_for 100 0.1 sh -c "! curl -sf $fm_url/fabric/collectives/jobs/c1-j1 >/dev/null" &&
    test "$(cli_calls j1)" = 0 && ! grep -q "job j1" "$T/hooks.log"
'
expect_ok 'the program loads no OpenSSL' '
    ldd "$FMB_BIN/fmbroker-slurm-cleanup" && ldd "$FMB_BIN/fmbroker-slurm-cleanup" | grep -q libc &&
    ! ldd "$FMB_BIN/fmbroker-slurm-cleanup" | grep -E "libssl|libcrypto"
'
expect_ok 'a CLEANUP the broker refuses goes to the script, which says why; the job stays' '
    run_job j2 && hook $plain_user j2 &&
    test "$(cli_calls j2)" = 1 && cat "$T/hooks.log" &&
    grep -q "job j2: end-job failed: fmbroker: .*403" "$T/hooks.log" &&
    job_field j2 .state | grep -qx active
'
expect_ok 'no broker answering: the hook returns at once, the script retries until one answers' '
    run_job j3 && stop_broker && start=$(date +%s) &&
    { hook $slurm_user j3; rc=$?; } && took=$(($(date +%s) - start)) && calls=$(cli_calls j3) &&
    start_broker && echo "# exit $rc after $took s, $calls CLI calls" &&
    test "$rc" = 0 && test "$took" -le 8 && test "$calls" = 0 &&
    grep -q "job j3: end-job failed: broker at $T/api.sock: .*; retrying for up to 60 s" "$T/hooks.log" &&
    wait_for 300 0.1 grep -q "job j3: end-job done after [0-9]* s of retries" "$T/hooks.log" && ended j3
'
expect_ok 'a broker over TLS ([api] broker_url) is the CLI'"'"'s to call, through the script' '
    port=$(free_ports 1) &&
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\n" \
        "$T/api.sock" "$port" "$T/none.token" >"$T/tls.conf" && chmod 644 "$T/tls.conf" &&
    sed "s|^FMBROKER_CONF=.*|FMBROKER_CONF=$T/tls.conf|; s|^FMBROKER_CLEANUP_RETRY_S=.*|FMBROKER_CLEANUP_RETRY_S=1|" \
        "$T/default" >"$T/default-tls" && chmod 644 "$T/default-tls" &&
    run_job j4 && hook $slurm_user j4 "$T/default-tls" &&
    test "$(cli_calls j4)" -ge 1 && grep "job j4" "$T/hooks.log" &&
    grep -q "job j4: end-job failed: .*client_token_file" "$T/hooks.log" &&
    job_field j4 .state | grep -qx active
'
expect_ok 'the file'"'"'s settings over the environment'"'"'s, quoted or not' '
    sed "s|^FMBROKER_CONF=.*|FMBROKER_CONF='"'"'$T/broker.conf'"'"'|" "$T/default" >"$T/default-q" &&
    chmod 644 "$T/default-q" && grep "^FMBROKER_CONF=" "$T/default-q" &&
    run_job j9 && hook $slurm_user j9 "$T/default-q" FMBROKER_CONF="$T/no-such.conf" &&
    ended j9 && test "$(cli_calls j9)" = 0
'
expect_ok 'settings with shell code in them are the script'"'"'s to read, and the job ends' '
    { cat "$T/default" && echo ": \"\$(true)\"" && echo "FMBROKER_SHAREDIR=\$(echo $T/nowhere)"; } >"$T/default-sh" &&
    chmod 644 "$T/default-sh" && cat "$T/default-sh" &&
    run_job j5 && hook $slurm_user j5 "$T/default-sh" FMBROKER_SHAREDIR="$FMB_SRC/deploy" &&
    ended j5 && test "$(cli_calls j5)" = 1
'
# A comment longer than the program reads at once (4159 bytes), last,
# whose tail would read as a setting: the shell's FMBROKER_CONF is the
# line before, a configuration with no broker, so the job stays.
expect_ok 'a line too long to read whole is the script'"'"'s too' '
    { sed "s|^FMBROKER_CONF=.*|FMBROKER_CONF=$T/no-such.conf|" "$T/default" &&
        printf "#%04158d" 0 && echo "FMBROKER_CONF=$T/broker.conf"; } >"$T/default-long" &&
    chmod 644 "$T/default-long" &&
    run_job j10 && hook $slurm_user j10 "$T/default-long" FMBROKER_SHAREDIR="$FMB_SRC/deploy" &&
    test "$(cli_calls j10)" = 1 && job_field j10 .state | grep -qx active
'
expect_ok 'a job id slurmctld would not set is the script'"'"'s, which refuses it' '
    run_job -j6 && hook $slurm_user -j6 &&
    grep -q "job -j6: end-job failed: .*not a job id" "$T/hooks.log" &&
    job_field -j6 .state | grep -qx active && test "$(grep -c "end-job -j6" "$T/cli.calls")" = 1
'
expect_ok 'with no script to hand a failure to, it fails' '
    sed "s|^FMBROKER_SHAREDIR=.*|FMBROKER_SHAREDIR=$T/nowhere|" "$T/default" >"$T/default-lost" &&
    chmod 644 "$T/default-lost" &&
    run_job j7 && { hook $plain_user j7 "$T/default-lost"; rc=$?; } && test "$rc" = 1 &&
    run_job j8 && hook $slurm_user j8 "$T/default-lost" && ended j8
'
done_testing

#!/bin/bash
# t1125-disk-full.sh: the filesystem of the state directory fills up
# under the broker (a 3 MiB tmpfs, as /var filling up would).  What
# cannot commit is answered 503 with the reason, health says the store
# cannot commit and why, the FM is never asked to reserve what the
# store could not record, and the broker goes on serving reads.  Once
# space is freed the same requests work, and a restart finds what the
# answers said.  Needs root (mount).
. "$(dirname "$0")/lib.sh"
skip () { echo "ok 1 # SKIP $1"; echo "1..1"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs"
mkdir -p "$T/state" && mount -t tmpfs -o size=3m,mode=0700 fmbtest "$T/state" 2>/dev/null ||
    skip "cannot mount a tmpfs here"
# lazily: the broker may still hold its files when the hooks run
unmount_state () { umount -l "$T/state"; }
on_exit unmount_state
body='{"uid":1000,"nodes":["n1","n2"]}'
# the FM's reservations and the broker's reserved jobs, as sorted FM ids
fm_ids () { mockfm_jobs | sort | tr "\n" " "; }
reserved_ids () {
    rm_call GET "/v1/jobs?state=active&limit=1000" |
        jq -r '.jobs[] | select(.hwcoll.state == "reserved") | .hwcoll.fm_job_id' | sort | tr "\n" " "
}
show () { df -k "$T/state" | tail -1; tail -n 8 "$T/broker.err"; }
step_fail_hook=show
start_mockfm

expect_ok 'with space on the disk, RUN reserves' '
    start_broker && rm_call PUT /v1/jobs/1 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
# Full: the first write that needs a new page fails (one that fits in
# WAL space already there may still commit, so RUNs go on until one is
# refused).
expect_ok 'with the disk full, a RUN answers 503 and says why; the FM is not asked' '
    { dd if=/dev/zero of="$T/state/filler" bs=64k 2>/dev/null || :; } &&
    [ "$(df -k --output=avail "$T/state" | tail -1 | tr -d " ")" = 0 ] && refused= &&
    for i in $(seq 50); do
        api_call PUT "/v1/jobs/f$i" "$body" >run.out && read -r code _ <run.out &&
            if [ "$code" = 503 ]; then refused=f$i; break; fi
    done &&
    echo "# $refused refused: $(cat run.out)" && [ -n "$refused" ] &&
    grep -q "could not commit this change (.*disk is full" run.out &&
    grep -q "disk is full" broker.err && mockfm_lacks_job "c1-$refused"
'
expect_ok 'health says the store cannot commit, and that the disk is full' '
    rm_call GET /v1/health | tee health.json | jq -e ".status == \"degraded\"" &&
    jq -e "any(.reasons[]; test(\"disk is full\"))" health.json
'
# (A checkpoint that completed meanwhile may have made WAL space again,
# so CLEANUP may commit; either way nothing is half-done.)
expect_ok 'CLEANUP answers 503 and changes nothing, or 202 and releases; reads are served' '
    api_call DELETE /v1/jobs/1 >cleanup.out && read -r code _ <cleanup.out && echo "# CLEANUP: $code" &&
    rm_call GET /v1/jobs/1 >job1.json &&
    if [ "$code" = 503 ]; then
        jq -e ".state == \"active\"" job1.json && mockfm_has_job c1-1
    else
        [ "$code" = 202 ] && jq -e ".state != \"active\"" job1.json
    fi
'
expect_ok 'once space is freed, the refused RUN reserves and CLEANUP releases' '
    rm -f "$T/state/filler" &&
    rm_call PUT "/v1/jobs/$refused" "$body" | jq -e ".hwcoll.state == \"reserved\"" &&
    rm_call DELETE /v1/jobs/1 >/dev/null && wait_for 100 0.1 mockfm_lacks_job c1-1 &&
    wait_for 50 0.1 sh -c "curl -sf --unix-socket \"$T/api.sock\" http://fmbroker/v1/health | jq -e \".status == \\\"ok\\\"\"" &&
    [ "$(fm_ids)" = "$(reserved_ids)" ]
'
expect_ok 'a restart finds what the answers said' '
    stop_broker && start_broker &&
    rm_call GET "/v1/jobs/$refused" | jq -e ".hwcoll.state == \"reserved\"" &&
    rm_call GET /v1/jobs/1 | jq -e ".state != \"active\"" &&
    echo "# FM: $(fm_ids)" && [ "$(fm_ids)" = "$(reserved_ids)" ]
'
done_testing

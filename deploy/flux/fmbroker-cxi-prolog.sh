#!/bin/sh
# Flux per-rank prolog (the IMP's prolog.d, root, on each of the job's
# nodes): the job's CXI services on this node and its record for the job
# shell plugin.
#
# fmbroker's jobtap plugin makes the RUN on rank 0 as a prolog action and
# posts an "fmbroker" event to the job's eventlog; this waits for it
# (FMBROKER_RUN_WAIT_S, 30 s), since Flux starts the per-rank prolog at
# the same time.  Nothing here exits non-zero for a job-level reason: a
# per-rank prolog that fails drains its node, and the job's exception
# would name only the exit code.  Instead, under the jobtap plugin's
# policy fail_closed, the job gets a fatal exception with this node's
# reason (flux job raise) and the node stays up; the job shell plugin
# refuses to start tasks on a node without the job's record in any case.
. "$(dirname "$(readlink -f "$0")")/common.sh"
# this node as Flux names it; client_token_file may say %n for it
FMBROKER_NODE=$(fmb_node)
export FMBROKER_NODE
id=$(fmb_jobid)
node=$FMBROKER_NODE
raise () { # policy reason
    if [ "$1" = fail_open ]; then
        fmb_log "job $id: no VNI isolation on $node, running without it (policy fail_open): $2"
        return 0
    fi
    fmb_log "job $id: no VNI isolation on $node: $2; the job does not start (policy fail_closed)"
    flux job raise --severity=0 --type=fmbroker "$FLUX_JOB_ID" \
        "fmbroker: no VNI isolation on $node: $2" 2>/dev/null ||
        fmb_log "job $id: flux job raise failed; the job shell refuses its tasks here"
}
# No jobtap plugin, no event to wait for: the reason now, not in 30 s.
if jobtaps=$(flux jobtap list 2>/dev/null) && ! printf '%s\n' "$jobtaps" | grep -q '^fmbroker'; then
    raise "$FMBROKER_POLICY" "$FMBROKER_NOT_LOADED"
    exit 0
fi
ev=$(flux job wait-event --timeout="${FMBROKER_RUN_WAIT_S:-30}" --format=json \
    "$FLUX_JOB_ID" fmbroker 2>&1) || {
    raise "$FMBROKER_POLICY" "no word from fmbroker's jobtap plugin in ${FMBROKER_RUN_WAIT_S:-30} s (is fmbroker.so loaded in the job-manager? flux jobtap list): $ev"
    exit 0
}
status=$(printf '%s' "$ev" | jq -r '.context.status // empty')
policy=$(printf '%s' "$ev" | jq -r '.context.policy // empty')
# The RUN failed: the jobtap plugin raised (fail_closed) or let it run
# without isolation (fail_open); there is nothing to set up here.
[ "$status" = ok ] || exit 0
out=$(timeout 60 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog \
    --job "$id" --node "$node" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out" >&2
[ $rc = 0 ] && exit 0
why=$(printf '%s\n' "$out" | tail -n 1)
[ $rc = 124 ] && why="fmbroker-cxi prolog did not finish in 60 s"
raise "${policy:-$FMBROKER_POLICY}" "$why"
exit 0

#!/bin/sh
# fmbroker-slurm-events: act on fmbrokerd's events in Slurm.  Runs on the
# controller as an [api] rm user (root or SlurmUser), under
# fmbroker-slurm-events.service; needs jq and Slurm's scontrol/scancel.
#
#   node_drain_requested  scontrol update nodename=NODE state=drain
#                         reason="fmbroker job JOB: DETAIL"
#   reservation_lost      FMBROKER_LOST_ACTION (/etc/default/fmbroker):
#                         notify (default: scontrol notify, the job's srun
#                         prints it), cancel (scancel) or requeue
#                         (scontrol requeue); each also puts the reason in
#                         the job's AdminComment (scontrol show job) and in
#                         the log, and tells the job's srun before acting
#
# The last event handled is kept in FMBROKER_EVENTS_STATE, so a restart
# neither repeats nor misses one; the first start begins at the newest.
. "$(dirname "$0")/common.sh"
state=${FMBROKER_EVENTS_STATE:-/var/lib/fmbroker-slurm/events.seq}
action=${FMBROKER_LOST_ACTION:-notify}
case "$action" in
    notify | cancel | requeue) ;;
    *) echo "FMBROKER_LOST_ACTION=$action: notify, cancel or requeue" >&2; exit 2 ;;
esac
fmb () { "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" "$@"; }
if [ -s "$state" ]; then
    after=$(cat "$state")
else
    after=$(fmb --json status | jq -r '.events.last_seq') || exit 1
fi
lost () { # JOB DETAIL: the design makes a lost reservation fatal to the job
    why="fmbroker: the job's hardware-collective reservation was lost at the fabric manager: $2"
    fmb_log "job $1: $why; FMBROKER_LOST_ACTION=$action"
    # where users and admins look (scontrol show job), whatever the action
    scontrol update jobid="$1" admincomment="$why" >/dev/null 2>&1
    case "$action" in
        notify) scontrol notify "$1" "$why" ;;
        cancel) scontrol notify "$1" "$why" >/dev/null 2>&1; scancel "$1" ;;
        requeue) scontrol notify "$1" "$why" >/dev/null 2>&1; scontrol requeue "$1" ;;
    esac
}
act () { # TYPE JOB NODE DETAIL
    case "$1" in
        node_drain_requested)
            [ -n "$3" ] || return 0
            scontrol update nodename="$3" state=drain reason="fmbroker job $2: $4" ;;
        reservation_lost)
            [ -n "$2" ] || return 0
            lost "$2" "$4" ;;
        *) return 0 ;;
    esac || fmb_log "event $1 for job $2: the Slurm command failed"
}
fmb --json events --follow --after "$after" |
    jq --unbuffered -r '[.seq, .type, (.job // ""), (.detail.node // ""),
        ((.detail.detail // .detail.reason // "") | tostring | .[0:200])]
        | map(tostring | gsub("[\u0000-\u001f\u007f]"; " ")) | join("\u001f")' |
    # Fields are split on US (0x1f), not tab: tab is IFS white space, so
    # read would merge an empty field with the next one and shift the
    # detail text into the node name.
    while IFS="$(printf '\037')" read -r seq type job node detail; do
        act "$type" "$job" "$node" "$detail"
        echo "$seq" >"$state.tmp" && mv "$state.tmp" "$state"
    done
fmb_log "events consumer: the event stream ended; exiting for a restart"
exit 1

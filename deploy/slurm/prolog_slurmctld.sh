#!/bin/sh
# PrologSlurmctld: RUN the job at fmbrokerd (VNIs, multicast reservation),
# with the user's --fmb-hwcoll / --fmb-vnis / --fmb-tcs (the SPANK plugin
# checks them at submission and hands them over as SPANK_FMB_*).  Always exits 0: when RUN fails, the reason goes to
# the log, and the job's steps fail on the nodes (no VNIs, no record) under
# the plugin's policy=fail_closed, or run without isolation (fail_open).
. "$(dirname "$0")/common.sh"
opts=
case "${SPANK_FMB_HWCOLL:-}" in
    on | off | auto) opts="--hwcoll $SPANK_FMB_HWCOLL" ;;
esac
case "${SPANK_FMB_VNIS:-}" in
    [0-4]) opts="$opts --vni-count $SPANK_FMB_VNIS" ;;
esac
case "${SPANK_FMB_TCS:-}" in # a mask, 0x1..0xf
    0x[1-9a-f]) opts="$opts --tcs $SPANK_FMB_TCS" ;;
esac
if ! out=$(timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" run-job "$SLURM_JOB_ID" --uid "$SLURM_JOB_UID" \
    --user "$SLURM_JOB_USER" --nodes "$SLURM_JOB_NODELIST" --ncores "$(fmb_ncores)" $opts --quiet 2>&1); then
    fmb_log "job $SLURM_JOB_ID: run-job failed: $(echo "$out" | tail -n 1)"
fi
exit 0

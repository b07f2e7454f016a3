# common.sh: sourced by the fmbroker Flux scripts.  Settings come from
# ../hooklib.sh (shared with Slurm) and /etc/default/fmbroker.
# (readlink: a script may be installed as a symlink in prolog.d)
. "$(dirname "$(readlink -f "$0")")/../hooklib.sh"
# A job whose CXI services cannot be set up on a node: fail_closed (the
# job does not start) or fail_open (it runs without VNI isolation).
FMBROKER_POLICY=${FMBROKER_POLICY:-fail_closed}
# Housekeeping's window for services that stay busy (seconds).
FMBROKER_HOUSEKEEPING_S=${FMBROKER_HOUSEKEEPING_S:-300}
# To the system log and to stderr (Flux keeps a script's stderr in its
# log), and to FMBROKER_HOOK_LOG too when that names a file.
fmb_log () {
    [ -n "${FMBROKER_HOOK_LOG:-}" ] &&
        printf '%s fmbroker-flux: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S')" "$*" >>"$FMBROKER_HOOK_LOG"
    logger -t fmbroker-flux -- "$*" 2>/dev/null
    echo "fmbroker-flux: $*" >&2
}
# The job's id for the broker: decimal (Flux's f58 form is not a valid
# broker job id).
fmb_jobid () { flux job id --to=dec "$FLUX_JOB_ID" 2>/dev/null || echo "$FLUX_JOB_ID"; }
# What the system instance's rc1.d script and the per-rank prolog say
# when the job-manager has no fmbroker.so (an admin's fix, in one place).
FMBROKER_NOT_LOADED="fmbroker.so is not loaded in the system instance's job-manager (flux jobtap list): is [job-manager] plugins set in another conf.d file too (system.toml)?  Flux replaces that array rather than merging it, so put { load = \"fmbroker.so\", conf = { policy = \"fail_closed\" } } in the one array, then restart the instance; until then every job fails at its start"

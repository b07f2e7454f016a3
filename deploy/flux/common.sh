# common.sh: sourced by the fmbroker Flux scripts.  Settings come from
# here and from /etc/default/fmbroker (FMBROKER_CONF, FMBROKER_BINDIR, ...).
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
[ -r /etc/default/fmbroker ] && . /etc/default/fmbroker
FMBROKER_BINDIR=${FMBROKER_BINDIR:-/usr/bin}
FMBROKER_SBINDIR=${FMBROKER_SBINDIR:-/usr/sbin}
FMBROKER_CONF=${FMBROKER_CONF:-/etc/fmbroker/fmbroker.conf}
# How long a script may wait for the broker before going on without it.
FMBROKER_HOOK_TIMEOUT=${FMBROKER_HOOK_TIMEOUT:-5}
# A job whose CXI services cannot be set up on a node: fail_closed (the
# job does not start) or fail_open (it runs without VNI isolation).
FMBROKER_POLICY=${FMBROKER_POLICY:-fail_closed}
# Extra fmbroker-cxi options (e.g. --libcxi PATH --state-dir DIR).
FMBROKER_CXI_ARGS=${FMBROKER_CXI_ARGS:-}
# Housekeeping's window for services that stay busy (seconds).
FMBROKER_HOUSEKEEPING_S=${FMBROKER_HOUSEKEEPING_S:-300}
# Where a sub-instance keeps what it inherited from its enclosing job.
FMBROKER_INHERITED=fmbroker-inherited.env
# To the system log and to stderr (Flux keeps a script's stderr in its
# log), and to FMBROKER_HOOK_LOG too when that names a file.
fmb_log () {
    [ -n "${FMBROKER_HOOK_LOG:-}" ] &&
        printf '%s fmbroker-flux: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S')" "$*" >>"$FMBROKER_HOOK_LOG"
    logger -t fmbroker-flux -- "$*" 2>/dev/null
    echo "fmbroker-flux: $*" >&2
}
# fmb_transient, fmb_detach, fmb_cleanup (CLEANUP, retried detached)
. "$(dirname "$0")/../hooklib.sh"
fmb_node () { echo "${FMBROKER_NODE:-$(hostname -s)}"; }
# The job's id for the broker: decimal (Flux's f58 form is not a valid
# broker job id).
fmb_jobid () { flux job id --to=dec "$FLUX_JOB_ID" 2>/dev/null || echo "$FLUX_JOB_ID"; }
# The job's id path (FLUX_JOB_ID_PATH): this instance's path, then the
# job's f58 id.  It is the job's FI_CXI_COLL_JOB_STEP_ID, unique within
# the system-instance job's reservation at every level.
fmb_job_path () {
    if [ -n "${FLUX_JOB_ID_PATH:-}" ]; then echo "$FLUX_JOB_ID_PATH"; return; fi
    parent=$(flux getattr jobid-path 2>/dev/null || echo /)
    f58=$(flux job id --to=f58 "$FLUX_JOB_ID" 2>/dev/null || echo "$FLUX_JOB_ID")
    echo "${parent%/}/$f58"
}
fmb_level () { flux getattr instance-level 2>/dev/null || echo 0; }
# The SLINGSHOT_*/FI_CXI_* variables inherited from the enclosing job, as
# NAME=value lines (never the step id, never a value with a control
# character): the file the sub-instance captured at start, else this
# process's own environment (a sub-instance's broker runs in the
# enclosing job's task environment).
fmb_inherited () {
    rundir=$(flux getattr rundir 2>/dev/null)
    if [ -n "$rundir" ] && [ -r "$rundir/$FMBROKER_INHERITED" ]; then
        cat "$rundir/$FMBROKER_INHERITED"
    else
        env | LC_ALL=C grep -E '^(SLINGSHOT|FI_CXI)_[A-Z0-9_]*=[^[:cntrl:]]*$' |
            grep -v '^FI_CXI_COLL_JOB_STEP_ID='
    fi
}

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
# To the system log and to stderr (Flux keeps a script's stderr in its
# log), and to FMBROKER_HOOK_LOG too when that names a file.
fmb_log () {
    [ -n "${FMBROKER_HOOK_LOG:-}" ] &&
        printf '%s fmbroker-flux: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S')" "$*" >>"$FMBROKER_HOOK_LOG"
    logger -t fmbroker-flux -- "$*" 2>/dev/null
    echo "fmbroker-flux: $*" >&2
}
# fmb_transient, fmb_detach, fmb_cleanup (CLEANUP, retried detached)
# (readlink: a script may be installed as a symlink in prolog.d)
. "$(dirname "$(readlink -f "$0")")/../hooklib.sh"
# This node as Flux names it in R (the rank's hostname attribute), which
# is what the RUN gave the broker; hostname -s may differ.
fmb_node () {
    [ -n "${FMBROKER_NODE:-}" ] && { echo "$FMBROKER_NODE"; return; }
    flux getattr hostname 2>/dev/null || hostname -s
}
# The job's id for the broker: decimal (Flux's f58 form is not a valid
# broker job id).
fmb_jobid () { flux job id --to=dec "$FLUX_JOB_ID" 2>/dev/null || echo "$FLUX_JOB_ID"; }

# common.sh: sourced by the fmbroker Slurm hooks.  Slurm gives hooks no
# PATH and none of the user's environment; settings come from here and
# from /etc/default/fmbroker (FMBROKER_CONF, FMBROKER_BINDIR, ...).
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
[ -r /etc/default/fmbroker ] && . /etc/default/fmbroker
# The site's own Slurm (squeue, scontrol) before the distribution's.
[ -n "${FMBROKER_PATH:-}" ] && PATH="$FMBROKER_PATH:$PATH"
FMBROKER_BINDIR=${FMBROKER_BINDIR:-/usr/bin}
FMBROKER_SBINDIR=${FMBROKER_SBINDIR:-/usr/sbin}
# The SPANK plugin's config= and state_dir= (plugstack.conf), when given,
# win over /etc/default/fmbroker for the node hooks it runs.
FMBROKER_CONF=${FMBROKER_SPANK_CONF:-${FMBROKER_CONF:-/etc/fmbroker/fmbroker.conf}}
[ -n "${FMBROKER_SPANK_STATE_DIR:-}" ] &&
    FMBROKER_CXI_ARGS="${FMBROKER_CXI_ARGS:-} --state-dir $FMBROKER_SPANK_STATE_DIR"
# How long a controller hook may wait for the broker.
FMBROKER_HOOK_TIMEOUT=${FMBROKER_HOOK_TIMEOUT:-5}
# Extra fmbroker-cxi options (e.g. --libcxi PATH --state-dir DIR).
FMBROKER_CXI_ARGS=${FMBROKER_CXI_ARGS:-}
# Slurm drops the controller hooks' output: their reasons go to syslog,
# and to FMBROKER_HOOK_LOG too when that names a file.
fmb_log () {
    [ -n "${FMBROKER_HOOK_LOG:-}" ] &&
        printf '%s fmbroker-slurm: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S')" "$*" >>"$FMBROKER_HOOK_LOG"
    logger -t fmbroker-slurm -p daemon.err -- "$*" 2>/dev/null || echo "fmbroker-slurm: $*" >&2
}
# fmb_transient, fmb_detach, fmb_cleanup (CLEANUP, retried detached)
case $0 in */*) fmb_dir=${0%/*} ;; *) fmb_dir=. ;; esac
. "$fmb_dir/../hooklib.sh"
# fmb_slurm_state JOB: the job's own state in Slurm.  squeue -j lists a
# heterogeneous job's components, or an array's tasks, under one id: only
# the line with the job's own id counts.  Prints nothing when slurmctld
# says it has no such job; returns 1 when squeue failed otherwise.
fmb_slurm_state () {
    _sq=$(squeue -a -h -t all -j "$1" -o '%A %T' 2>&1) ||
        case $_sq in *"Invalid job id specified"*) return 0 ;; *) return 1 ;; esac
    echo "$_sq" | awk -v id="$1" '$1 == id { print $2; exit }'
}
# The first number of SLURM_JOB_CPUS_PER_NODE ("4(x2),2" -> 4)
fmb_ncores () { echo "${SLURM_JOB_CPUS_PER_NODE:-0}" | sed 's/[^0-9].*//'; }

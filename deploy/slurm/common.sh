# common.sh: sourced by the fmbroker Slurm controller hooks and the
# sweep.  Slurm gives hooks no PATH and none of the user's environment;
# settings come from ../hooklib.sh (shared with Flux) and
# /etc/default/fmbroker.  (The nodes' side is no script: the node service
# makes each job's setup and, handed it by slurmd's Epilog=, its end.)
case $0 in */*) fmb_dir=${0%/*} ;; *) fmb_dir=. ;; esac
. "$fmb_dir/../hooklib.sh"
# Slurm drops the controller hooks' output: their reasons go to syslog,
# and to FMBROKER_HOOK_LOG too when that names a file.
fmb_log () {
    [ -n "${FMBROKER_HOOK_LOG:-}" ] &&
        printf '%s fmbroker-slurm: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S')" "$*" >>"$FMBROKER_HOOK_LOG"
    logger -t fmbroker-slurm -p daemon.err -- "$*" 2>/dev/null || echo "fmbroker-slurm: $*" >&2
}
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

# launch-phases.awk: `perf script -F pid,time,event,trace` of the
# sched_process_exec and sched_process_exit events recorded by
# bench/slurm-launch.sh, to "SETUP PHASE MS" lines, one per launch and
# phase.  A block's setup is named by the exec of .../mark/SETUP; a
# launch starts with the exec of setpriv (the bench's srun as nobody).
#   stepd   setpriv's exec to the first slurmstepd's exec: srun's start,
#           the allocation, the launch request, and the node prologs
#           slurmd waits for
#   tasks   that slurmstepd's exec to the first task's exec (/usr/bin/true)
#   end     the last task's exit to srun's exit
#   launch  setpriv's exec to srun's exit
#   prolog  each node prolog (slurmd's Prolog=: fmbroker-slurm-prolog, the
#           bench's prolog.sh or /bin/true, before the step's slurmstepd),
#           its exec to its exit
# The first field of each line is the process id (the thread group's); a
# process's end is the exit with group_dead=true (kernels that lack the
# field give no phases, and the bench says so).
function finish() {
    if (t0 && se && te && tx && sx) {
        printf "%s stepd %.1f\n", mode, (se - t0) * 1000
        printf "%s tasks %.1f\n", mode, (te - se) * 1000
        printf "%s end %.1f\n", mode, (sx - tx) * 1000
        printf "%s launch %.1f\n", mode, (sx - t0) * 1000
    }
    t0 = se = te = tx = sx = 0
    srun = ""
    split("", task)
    split("", hook)
    split("", hookfile)
}
{
    t = $2
    sub(/:$/, "", t)
    t += 0
}
$3 == "sched:sched_process_exec:" {
    file = substr($4, 10)
    if (file ~ /\/mark\/[^\/]+$/) {
        finish()
        mode = file
        sub(/.*\/mark\//, "", mode)
    } else if (file == "/usr/bin/setpriv") {
        finish()
        t0 = t
    } else if (!t0) {
        next
    } else if (file == "/usr/bin/srun") {
        srun = $1
    } else if (file == "/usr/sbin/slurmstepd") {
        if (!se)
            se = t
    } else if (file == "/usr/bin/true" && se) {
        if (!te)
            te = t
        task[$1] = 1
    } else if (!se && srun != "" && file ~ /(\/fmbroker-slurm-prolog|\/prolog\.sh|^\/bin\/true)$/) {
        # not the /bin/true a bash prolog wrapper runs
        if (file == "/bin/true")
            for (p in hook)
                if (hookfile[p] ~ /prolog\.sh$/)
                    next
        hook[$1] = t
        hookfile[$1] = file
    }
    next
}
$3 == "sched:sched_process_exit:" && /group_dead=true/ {
    if ($1 in hook) {
        printf "%s prolog %.1f\n", mode, (t - hook[$1]) * 1000
        delete hook[$1]
        delete hookfile[$1]
    } else if ($1 in task) {
        tx = t
    } else if ($1 == srun && srun != "") {
        sx = t
    }
}
END { finish() }

/* slurmvars.h: the variables of Slurm's a job's node prolog goes by
 * (slurmhook.c): what fmbroker-slurm-prolog hands the node service, and
 * all the service takes from it (serve.h).  No other header: the prolog
 * program is libc alone. */
#ifndef FMB_AGENT_SLURMVARS_H
#define FMB_AGENT_SLURMVARS_H

#define SLURM_PROLOG_VARS                                                       \
    "SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID", "SLURMD_NODENAME", "SLURM_JOB_UID", \
        "SLURM_JOB_USER", "SLURM_NODELIST", "SLURM_JOB_CPUS_PER_NODE",          \
        "SPANK_FMB_HWCOLL", "SPANK_FMB_VNIS", "SPANK_FMB_TCS"

#endif

/* slurmhook.h: fmbroker-cxi run by slurmd itself as slurm.conf's
 * Prolog= or Epilog= (no command word; Slurm's SLURM_SCRIPT_CONTEXT says
 * which).  slurmd starts the program directly, with the job's variables
 * and nothing else: no shell, no hook script, and no SPANK job prolog,
 * whose slurmstepd cost every launch more than the agent itself.
 *
 * The command line is built from Slurm's variables and the options
 * given (a test or a site wrapper may give -c, --state-dir, ...), then
 * parsed like any other: the job id and node name are checked there.
 *   prolog_slurmd  prolog --job $SLURM_JOB_ID --node $SLURMD_NODENAME
 *                  --report-later; with [api] node_run = true in this
 *                  node's configuration (the launch setup, no
 *                  PrologSlurmctld) the RUN request too (slurm_hook_run):
 *                  the node decides, not the job's environment
 *   epilog_slurmd  epilog --job ... --node ... --retry-busy 30 (0 in the
 *                  node service, which does not wait: serve.h)
 * What the prolog prints reaches nobody (slurmd keeps no hook output):
 * the agent logs to syslog too, and a failed prolog leaves its reason in
 * the job's record, where the plugin's step tells the user. */
#ifndef FMB_AGENT_SLURMHOOK_H
#define FMB_AGENT_SLURMHOOK_H

#include <stdbool.h>

#include "agent.h"
#include "args.h"
#include "error.h"

#define SLURM_HOOK_EXTRA_ARGS 12

struct slurm_hook {
    bool active; /* run by slurmd as Prolog=/Epilog= */
    bool prolog;
    const char *job; /* $SLURM_JOB_ID, when it is a valid job id */
    int argc;
    char **argv; /* the built command line (owned) */
    char *run;   /* the RUN request (owned), or NULL */
    /* Slurm's variables: NULL the process's own, else NAME=VALUE strings
     * (the node service's request, serve.c); not owned */
    char *const *env;
};

/* Is this a run by slurmd as its Prolog=/Epilog=?  When it is (h->active,
 * and logging goes to syslog too), h->argv is argv with the command and
 * the job's options added.  0, or -1 with a message (Slurm's variables
 * missing): slurm_hook_finish still says what slurmd gets.  'env': Slurm's
 * variables as NAME=VALUE strings, or NULL for the process's own. */
int slurm_hook_args (
    int argc, char **argv, char *const *env, struct slurm_hook *h, struct fmb_error *e);

/* One of Slurm's variables, or NULL. */
const char *slurm_hook_var (const struct slurm_hook *h, const char *name);

/* The prolog's RUN request from Slurm's variables, into h->run; -1 with a
 * message when they do not make one. */
int slurm_hook_run (struct slurm_hook *h, struct fmb_error *e);

/* The exit status slurmd gets for the command's rc.  A prolog never
 * fails to slurmd (that drains the node for a job's problem): the job's
 * record says why instead, and its steps fail (fail_closed) or run
 * without isolation (fail_open).  An epilog that left services behind
 * exits 1: slurmd drains the node. */
int slurm_hook_finish (struct agent *ag, const struct slurm_hook *h, int rc);

void slurm_hook_clear (struct slurm_hook *h);

/* The job's RUN request from Slurm's variables: uid, user, nodes and the
 * submitter's options (SPANK_FMB_*, checked here again, by runopts.h:
 * they come from the user's srun).  NULL with a message when the node
 * list is missing or a value is bad (EINVAL, naming the variable). */
char *slurm_run_request (unsigned long uid,
                         const char *user,
                         const char *nodelist,
                         const char *cpus_per_node,
                         const char *hwcoll,
                         const char *vnis,
                         const char *tcs,
                         struct fmb_error *e);

#endif

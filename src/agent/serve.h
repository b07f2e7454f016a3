/* serve.h: the node service, `fmbroker-cxi serve`.
 *
 * Why: a node prolog that starts fmbroker-cxi pays, for every job on
 * every node, the program's start (some 40 shared objects), OpenSSL's
 * set-up and a TLS handshake with the broker, and its report's second
 * process and connection: 35 ms of CPU per node on a 2-core host, the
 * larger part of a Slurm launch's cost (issue 36, bench/RESULTS.md).
 * The service does that set-up once: it stays up on the node (systemd's
 * fmbroker-cxi.service), keeps one connection to the broker open from
 * job to job, and makes each job's setup on the node (its prolog) and,
 * when slurmd's Epilog= hands it over, the job's end there.  Any
 * Prolog= at all costs a launch some 20 ms of slurmd's own, so in
 * Slurm's launch setup the job's first slurmstepd on the node (the SPANK
 * plugin) asks the service for the job's setup and reads the answer
 * before the tasks (nodeservice.h); a Prolog= beside it
 * (fmbroker-slurm-prolog, slurmprolog.c) hands the job over and returns
 * at once, and the step's request then finds the job made or waits.
 *
 * It listens at STATE_DIR/service.sock (jobrecord.h), where the Prolog=
 * program and the plugin find it beside the job records.  The socket is
 * root's alone (0600, and the caller's uid checked): whoever may ask it
 * makes CXI services for any uid.  One request at a time (a prolog is a
 * few broker calls of 5 s at most each; a broker that gave no answer at
 * all is taken as away for 2 s, apiclient.h; a prolog whose caller gave
 * up waiting is not made).  On SIGTERM those in line are served, then
 * the socket goes (later prologs run fmbroker-cxi themselves): a wait
 * for a prolog taken here is answered here.
 * Five requests come here, served in order:
 *   - a step's setup of its job (FMB_SETUP and Slurm's variables,
 *     slurmhook.h, from the plugin in the job's first slurmstepd on the
 *     node): made unless the job's record is there, answered once made;
 *   - the job's prolog on this node (Slurm's variables, from Prolog=):
 *     answered once read, then made;
 *   - a wait (FMB_WAIT, SLURM_JOB_ID, from the epilog): answered when
 *     its turn comes, that is once every prolog taken before it is made;
 *   - a step's end (FMB_STEP and SLURM_JOB_ID, from the SPANK plugin in
 *     node 0's slurmstepd, which does not wait for the answer): the
 *     broker's DELETE of the step's trees;
 *   - the job's epilog on this node (Slurm's variables, from Epilog=
 *     fmbroker-slurm-prolog): made and answered with its exit status for
 *     slurmd.  Why here: the epilog starts as the job's last step ends,
 *     on the cores srun's exit and the next job's steps use, and
 *     fmbroker-cxi's start and TLS handshake took 28 ms of CPU on each
 *     node for every job.  A service the job still holds is not waited
 *     for (the line behind would wait): the answer NODE_SERVICE_BUSY
 *     sends the caller to fmbroker-cxi, whose epilog tries for 30 s.
 *     The job's step ends still deferred are dropped (its end deletes
 *     its trees).
 * What the broker only needs to know (the 'created' report, the steps'
 * ends) waits until no caller came for 50 ms, at most a second, and goes
 * on the same connection: it does not take the CPU that the job's tasks
 * start on, and srun waits for none of it.
 *
 * The protocol, one request per connection: NAME=VALUE lines, then an
 * empty line; the answer is one line, an exit status (0: taken, done),
 * a tab, and why when it is not 0.  A prolog's own outcome is the job's
 * record: its services, or its reason. */
#ifndef FMB_AGENT_SERVE_H
#define FMB_AGENT_SERVE_H

#include "agent.h"
#include "jobrecord.h"

/* One job's prolog or epilog for the service: 'run' a fresh context with the
 * service's setup (its arguments, the kept connection), 'env' Slurm's
 * variables (NAME=VALUE, NULL-terminated); the exit status for slurmd. */
typedef int (*serve_run_fn) (struct agent *run,
                             const struct agent *service,
                             char *const *env);

/* Serve until SIGTERM or SIGINT; the exit status. */
int cmd_serve (struct agent *ag, serve_run_fn run_hook);

#endif

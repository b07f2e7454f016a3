/* serve.h: the node service, `fmbroker-cxi serve`: the node engine
 * (engine.h) behind a Unix socket.
 *
 * Why: a node prolog that starts fmbroker-cxi pays, for every job on
 * every node, the program's start (some 40 shared objects), OpenSSL's
 * set-up and a TLS handshake with the broker, and its report's second
 * process and connection: 35 ms of CPU per node on a 2-core host, the
 * larger part of a Slurm launch's cost (issue 36, bench/RESULTS.md).
 * The service does that set-up once: it stays up on the node (systemd's
 * fmbroker-cxi.service), reads its configuration once (again on SIGHUP),
 * keeps its connections to the broker open from job to job, and makes
 * each job's setup and end on the node for whichever resource manager
 * asks (nodeproto.h: a request names no resource manager).  Its callers:
 *   - Slurm: the SPANK plugin in the job's first slurmstepd on the node
 *     (the job's setup, read before the tasks; a step's end), and
 *     fmbroker-slurm-prolog as slurmd's Prolog= (the setup, answered at
 *     once) and Epilog= (the job's end);
 *   - Flux: the job shell plugin, as the job's user (the job's setup,
 *     for its own job only), and the per-rank epilog (the job's end).
 *
 * It listens at STATE_DIR/service.sock (jobrecord.h), where the callers
 * find it beside the job records.  The socket is 0666 and every caller's
 * uid is checked (SO_PEERCRED): root may ask anything; any other user
 * only the setup of a job the broker says is that user's, with no RUN
 * and no core count of its own, a few requests at a time, and never for
 * a job that has ended here.
 *
 * Each caller is served on a thread of its own (at most SERVE_WORKERS at
 * once), so one job's slow setup (a RUN waiting for an FM reservation)
 * never holds another job's.  One job's requests are served one at a
 * time (not strictly in arrival order): a step's setup, an epilog or
 * a wait that comes while the job's setup is in the making is answered
 * after it.  A request whose caller has gone by its turn is not made.
 * On SIGTERM those already connected are served, then the socket goes
 * (later callers run fmbroker-cxi themselves, or fail closed).
 *
 * What the broker only needs to know (the 'created' report, the steps'
 * ends) waits until no caller came for 50 ms, at most a second, and goes
 * on a kept connection from a thread of its own: it does not take the
 * CPU that the job's tasks start on, and no launch waits for it.  Kept
 * reports are tried again after 1 s, doubling to 30 s, with jitter. */
#ifndef FMB_AGENT_SERVE_H
#define FMB_AGENT_SERVE_H

#include "agent.h"

/* Serve until SIGTERM or SIGINT ('ag': the service's own run, its
 * configuration read); the exit status. */
int cmd_serve (struct agent *ag);

#endif

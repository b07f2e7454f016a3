/* nodeservice.h: a request to the node service (fmbroker-cxi serve,
 * src/agent/serve.h) from the other root processes on a compute node:
 * the SPANK plugin in slurmstepd and the node epilog.
 *
 * Why here: the service takes a job's prolog from slurmd's Prolog= and
 * answers at once, before the job's CXI services are made, so that
 * slurmd goes on to start the step while the service works.  Whoever
 * needs the services made (the step, before its tasks; the epilog,
 * before it destroys them) asks the service to wait: it serves one
 * request at a time, in order, so its answer to a wait comes after every
 * prolog handed to it before.  libc alone (fmbroker-slurm-prolog builds
 * it in). */
#ifndef FMB_COMMON_NODESERVICE_H
#define FMB_COMMON_NODESERVICE_H

#include "error.h"

#include <stdbool.h>
#include <stddef.h>

/* A socket connected to the node service at 'path', or -1 with errno
 * (ENOENT, ECONNREFUSED: none listens there). */
int node_service_connect (const char *path, bool nonblock);

/* All of 'buf' written to 'fd' (a request); -1 with errno. */
int node_service_send (int fd, const char *buf, size_t len);

/* The service's answer line ("STATUS\tWHY") into 'line', its newline
 * dropped; -1 with errno ETIMEDOUT when none came in timeout_ms, or
 * ECONNRESET when the service closed first (it died, or was killed). */
int node_service_answer (int fd, int timeout_ms, char *line, size_t len);

/* How long a step or an epilog waits for the service: a prolog is a few
 * broker calls of 5 s at most each, and others may be in line first. */
#define NODE_SERVICE_WAIT_MS (60 * 1000)

/* Wait until the node service at STATE_DIR/service.sock has finished
 * every prolog handed to it so far ('job', the one the caller needs,
 * goes in the request).  1: it answered (any answer: a service older
 * than the wait made its prologs before answering them); 0: no service
 * listens there (none, or one that died: nothing of it is in the
 * making); -1 with 'e' saying why (its line is full, no answer in
 * timeout_ms, or it went away mid-request: a prolog it took may be
 * lost). */
int node_service_wait (const char *state_dir,
                       const char *job,
                       int timeout_ms,
                       struct fmb_error *e);

/* The most a request may hold (Slurm's variables: a compressed node
 * list, the user's options). */
#define NODE_SERVICE_REQUEST_MAX 16384

/* The job's setup on this node made by the node service, for the first
 * step of a job whose node has no Prolog= (the launch setup, doc/slurm.md):
 * 'vars' (NAME=VALUE, NULL-terminated) are the variables slurmd gives a
 * prolog (slurmvars.h) and FMB_SETUP=1.  The service makes the job's
 * prolog unless its record is there already (a prolog handed over, or
 * another step, made it first), and answers once it is made: the
 * outcome is the job's record.  1: answered; 0: no service listens
 * there; -1 with 'e' as node_service_wait. */
int node_service_setup (const char *state_dir,
                        char *const *vars,
                        int timeout_ms,
                        struct fmb_error *e);

/* A step's end handed to the node service, which makes the broker's call
 * later: a Unix socket write instead of a libcurl process and a TLS
 * handshake on srun's way out.  No wait for the answer.  0 when the
 * request was written; -1 with 'e' saying why (no service on this node,
 * or its line is full: the caller makes the call itself). */
int node_service_step_end (const char *state_dir,
                           const char *job,
                           const char *step,
                           struct fmb_error *e);

#endif

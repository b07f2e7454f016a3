/* nodeservice.h: calling the node service (fmbroker-cxi serve,
 * src/agent/serve.h) from the other processes on a compute node: the
 * SPANK plugin in slurmstepd, Prolog=/Epilog= (fmbroker-slurm-prolog),
 * the node epilog, the Flux job shell.  The request is nodeproto.h's.
 *
 * Why: the job's first step on a node asks the service for the job's
 * setup (no Prolog=: slurmd runs nothing before the step), or the
 * service took the job from slurmd's Prolog= and answered at once,
 * before the job's CXI services were made.  Whoever needs the services
 * made (the step, before its tasks; the epilog, before it destroys them)
 * asks the service: it serves each job's requests one at a time (other
 * jobs' meanwhile), and a setup handed to it holds the job's turn before
 * it is answered, so the answer to a later request of that job comes
 * after the setup is made.  libc alone (fmbroker-slurm-prolog
 * builds it in). */
#ifndef FMB_NODEPROTO_NODESERVICE_H
#define FMB_NODEPROTO_NODESERVICE_H

#include "error.h"
#include "nodeproto.h"

#include <limits.h>
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
 * broker calls of 5 s at most each (a busy broker's retried within 12
 * s: agent.c), and others may be in line first. */
#define NODE_SERVICE_WAIT_MS (60 * 1000)

/* Wait until the node service at STATE_DIR/service.sock has finished
 * what it was handed for 'job' so far.  1: it answered (any answer: a service older
 * than the wait made its prologs before answering them); 0: no service
 * listens there (none, or one that died: nothing of it is in the
 * making); -1 with 'e' saying why (its line is full, no answer in
 * timeout_ms, or it went away mid-request: a prolog it took may be
 * lost). */
int node_service_wait (const char *state_dir,
                       const char *job,
                       int timeout_ms,
                       struct fmb_error *e);

/* The service's answer to an epilog whose job's CXI services are still
 * in use (a task not yet gone): nothing reported, the job's facts kept;
 * the caller runs fmbroker-cxi, whose epilog waits for them (EX_TEMPFAIL). */
#define NODE_SERVICE_BUSY 75

/* The most a request may hold (Slurm's variables: a compressed node
 * list, the user's options). */
#define NODE_SERVICE_REQUEST_MAX 16384

/* One request in flight: sent by node_service_call_start, its answer
 * read by node_service_call_finish (the caller may do other work in
 * between: the SPANK plugin sends a job's setup in slurm_spank_init and
 * reads the answer in slurm_spank_user_init, while slurmstepd sets up
 * the step's I/O and the service makes the setup). */
struct node_service_call {
    int fd;
    char path[PATH_MAX]; /* the socket, for the messages */
};

/* Connect to STATE_DIR/service.sock and send 'req': 1 sent, 0 no
 * service listens there (none, or one that died), -1 with 'e' (its line
 * of callers is full, the socket failed, a request that cannot be
 * sent). */
int node_service_call_start (struct node_service_call *c,
                             const char *state_dir,
                             const struct node_request *req,
                             struct fmb_error *e);

/* The answer line of a call started, into 'line'; the call closed.  -1
 * with 'e' naming the socket when none came in timeout_ms or the service
 * closed the connection first (it died, or was killed: what it took may
 * be lost). */
int node_service_call_finish (struct node_service_call *c,
                              int timeout_ms,
                              char *line,
                              size_t len,
                              struct fmb_error *e);

/* A step's end handed to the node service, which makes the broker's call
 * later: a Unix socket write instead of loading a TLS stack and a TLS
 * handshake on srun's way out.  No wait for the answer.  0 when the
 * request was written; -1 with 'e' saying why (no service on this node,
 * or its line is full: the caller makes the call itself). */
int node_service_step_end (const char *state_dir,
                           const char *job,
                           const char *step,
                           struct fmb_error *e);

#endif

/* servestate.h: the node service's state, shared by its two files:
 * serve.c (the socket, the callers and their requests) and servebg.c
 * (the broker's bookkeeping on a thread of its own).  Private to the
 * service: nothing else includes it. */
#ifndef FMB_AGENT_SERVESTATE_H
#define FMB_AGENT_SERVESTATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine.h"
#include "nodeproto.h"

#define REQUEST_WAIT_S 2 /* a caller that sends nothing is dropped */
/* Callers served at once: each is a thread (a job's setup, mostly
 * waiting for the broker).  More wait in the socket's backlog. */
#define SERVE_WORKERS 32
/* A user (not root) may have this many requests in the service at once,
 * and all users together half the workers: root's callers (slurmd's
 * hooks, slurmstepd) always find a worker. */
#define USER_CALLS_MAX   4
#define USER_WORKERS_MAX (SERVE_WORKERS / 2)
#define USERS_TRACKED    USER_WORKERS_MAX
#define ENDED_REMEMBERED 256 /* jobs ended here: no user sets them up again */
/* A user's requests over its share wait, in arrival order, for one of its
 * own to end (a Flux user's burst of jobs on one node); this many at most
 * wait, the rest are refused. */
#define USER_QUEUE_MAX 256
/* The broker's bookkeeping (the nodes' reports, the steps' ends) waits
 * until no caller came for IDLE_MS, or at most DEFER_MAX_MS: it does not
 * take the CPU the job's tasks start on. */
#define IDLE_MS      50
#define DEFER_MAX_MS 1000
#define STEPS_MAX    256
/* Kept reports the broker could not take are tried again within
 * seconds, not at the next timer: 1 s, doubling to 30 s, each wait
 * drawn within +-50% so that the nodes of a job that all missed (a
 * broker restarting) do not come back in step. */
#define REPORT_RETRY_FIRST_MS 1000
#define REPORT_RETRY_MAX_MS   30000
/* The kept connection to the broker is opened at start and again after
 * the broker closed it (a restart, a fail-over), each node at a moment
 * of its own within this window: the next job's launch then costs no
 * node a TLS handshake, and a whole machine's handshakes are spread
 * over the window rather than all at the next launch. */
#define WARM_SPREAD_MS 30000

/* The broker's bookkeeping, done by the background thread. */
struct deferred {
    bool reports;               /* kept reports to deliver */
    char steps[STEPS_MAX][300]; /* DELETE paths of steps that ended */
    unsigned nsteps;
    int64_t since_ms;       /* when the oldest was deferred; 0: none */
    int64_t retry_at_ms;    /* kept reports tried again then; 0: none kept */
    int64_t retry_delay_ms; /* the last wait, doubled at each miss */
    int64_t warm_at_ms;     /* the connection to the broker opened then; 0: open */
    bool local_broker;      /* on its Unix socket: nothing to keep warm */
};

/* One job's turn: its requests are served one at a time. */
struct job_turn {
    char job[NODE_PROTO_JOB_MAX];
    unsigned users; /* requests holding or waiting for the turn */
    bool busy;
};

struct user_calls {
    uid_t uid;
    unsigned n;
};

struct service {
    struct engine *eng;
    const char *state_dir;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t changed;
    struct job_turn turns[SERVE_WORKERS];
    unsigned nworkers, nuser_workers;
    struct user_calls users[USERS_TRACKED];
    char ended[ENDED_REMEMBERED][NODE_PROTO_JOB_MAX];
    unsigned next_ended;
    /* jobs whose end was made and reported (or kept) here: a second end
     * (housekeeping after the epilog) has nothing left to do */
    char made[ENDED_REMEMBERED][NODE_PROTO_JOB_MAX];
    unsigned next_made;
    struct caller *user_queue[USER_QUEUE_MAX];
    unsigned nqueued;
    struct deferred d;
    int64_t last_caller_ms;
    bool stopping;
    int wake[2]; /* the background thread's */
};

struct caller {
    struct service *svc;
    int fd;
    uid_t uid;
    pid_t pid;
};

/* Wake the background thread (something was deferred, or the service
 * stops). */
void serve_wake_background (struct service *svc);

/* Something deferred for the broker (a report kept, a step's end): the
 * background thread's clock starts.  Under svc->mu. */
void serve_defer_locked (struct service *svc);

/* A request's report kept for the background thread ('kept' false:
 * nothing). */
void serve_report_kept (struct service *svc, bool kept);

/* Kept reports left: tried again after a back-off; none: reset.  Under
 * svc->mu. */
void serve_schedule_retry (struct deferred *d, bool left);

/* Is anything kept in the report spool of state_dir? */
bool serve_reports_kept (const char *state_dir);

/* The background thread (pthread_create's start): until the service
 * stops and nothing is deferred. */
void *serve_background (void *arg);

#endif

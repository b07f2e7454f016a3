/* broker.h: fmbrokerd's context, a set of pointers to its sub-contexts,
 * and what its files share.  It includes none of the sub-contexts'
 * headers: each file includes those it uses.  src/broker/README is the
 * map: each file's one job, and where a change of each common kind goes.
 *
 * Everything runs on the loop's one thread.  The store is the truth; what
 * is in memory here (FM calls in flight, waiting requests) is rebuilt or
 * abandoned safely after a crash.
 */
#ifndef FMB_BROKER_H
#define FMB_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "config.h"
#include "error.h"
#include "statelock.h"

struct events;
struct fmc;
struct fmsession;
struct http;
struct http_problem;
struct http_req;
struct metrics;
struct outbox;
struct pass;
struct ratelimit;
struct reconciler;
struct reservations;
struct roles;
struct store;
struct timer;
struct timers;

#define EVENT_WAIT_MAX_S 60
#define STEP_WAIT_MAX_S  60
/* Background work (retention, reconciliation) runs in slices of about
 * this much time, one a pass, each put off while its pass holds answers
 * to requests (pass_defer_background, at most 25 ms in a row), so that a
 * request never waits long behind it: a slice's pass also commits what
 * it wrote, and under the disk traffic of a backlog that commit took
 * 5-20 ms (bench 5). */
#define BACKGROUND_SLICE_US 2000
/* Between slices of a reconciliation: requests get the loop, and the
 * listing is still matched at about a third of the loop's time. */
#define BACKGROUND_PAUSE_MS 3
struct broker {
    struct fmb_config cfg;
    struct statelock lock; /* held for the broker's whole life */
    struct store *st;
    struct fmc *fmc; /* NULL: VNI-only */
    struct http *http;
    struct pass *pass; /* the loop pass: its transaction and what waits on it */
    struct timers *timers;
    struct fmsession *fms;    /* the FM session: state, probes, back-off */
    struct outbox *outbox;    /* FM changes owed, and their step waiters */
    struct reservations *rsv; /* FM reservations in flight */
    struct reconciler *rc;    /* matching the FM's listing with the store */
    struct roles *roles;      /* who may do what */
    struct events *events;    /* the event log's readers, damage reports */
    /* the timers of jobs.c (timer.h) */
    struct timer *t_expire, *t_prune;
    int64_t started_ms;
    bool stopping;

    unsigned long prune_round[2]; /* jobs, events deleted in this round */
    int64_t prune_waits_since;    /* pass_defer_background */

    struct metrics *metrics;      /* the counters (metrics.h) */
    struct ratelimit *step_limit; /* step cleanups per job ([api] step_cleanup_*) */
};

/* ---- broker.c ------------------------------------------------------ */

/* Is 'token' the session token of 'job' ('arg': the broker)?  The
 * dispatcher's check (http_deps.job_token_ok). */
bool broker_job_token_matches (void *arg, const char *job, const char *token);
/* Append an event (events_append) inside the caller's transaction;
 * 'detail' is stolen. */
int broker_event (struct broker *b,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error);
void broker_log_store_error (struct broker *b,
                             const char *what,
                             const struct fmb_error *e);
/* "cluster-job" for a job id. */
void broker_fm_id (struct broker *b, const char *job, char *out, size_t len);

/* ---- jobs.c -------------------------------------------------------- */

/* A RUN request body, validated (borrowed pointers into the body). */
struct run_request {
    json_int_t uid;
    const char *user;
    json_t *nodes;
    json_int_t node_count;
    json_int_t ncores;
    const char *hwcoll; /* auto | on | off */
    json_int_t vni_count;
    unsigned tcs; /* FMB_TC_* mask within [cxi] allowed_tcs; 0: not asked */
};

/* Validate a RUN body strictly (unknown keys, types, ranges); -1 with
 * the reason in 'why'.  Pure: fuzzed and unit-tested on its own. */
int jobs_parse_run (const struct fmb_config *cfg,
                    json_t *body,
                    struct run_request *rr,
                    char *why,
                    size_t len);

int jobs_run (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_cleanup (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_get (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_list (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_step_cleanup (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_node_report (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_node_get (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_vni_list (struct broker *b, struct http_req *req, struct http_problem *p);
/* Free quarantined VNIs whose time came; log, event. */
void jobs_expire_quarantine (struct broker *b);
/* The jobs' timers (quarantine expiry, history retention), and the hooks
 * by which the outbox and reconciliation report what they observe: a
 * reservation's delete finished, a reservation lost. */
void jobs_start (struct broker *b);

/* The local job id of one of our FM job ids, or NULL if it is not ours. */
const char *broker_local_job (struct broker *b, const char *fm_job_id);
/* Monotonic and wall clocks.  now_recorded: the wall clock of the times
 * the store records (broker_wall_clock, its clock) and of those compared
 * with them; it never goes back (broker.c). */
int64_t now_mono (void);
int64_t now_wall (void);
int64_t now_recorded (void);
int64_t broker_wall_clock (void *unused);

#endif

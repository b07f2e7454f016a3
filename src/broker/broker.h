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

struct cleanups;
struct events;
struct fmc;
struct fmsession;
struct http;
struct metrics;
struct outbox;
struct pass;
struct reconciler;
struct reservations;
struct retention;
struct roles;
struct store;
struct timers;

#define EVENT_WAIT_MAX_S 60
#define STEP_WAIT_MAX_S  60

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
    /* the jobs' contexts (jobs.h) */
    struct cleanups *cleanups;   /* step cleanups' rate (jobs_cleanup.c) */
    struct runmemo *runmemo;     /* RUN bodies already taken (jobs_run.c) */
    struct retention *retention; /* quarantine expiry, retention (retention.c) */
    int64_t started_ms;
    bool stopping;
    /* why the last reload failed ("": it did not, or a later one or the
     * start succeeded): health is degraded while it is set, since a
     * restart would fail on the same file */
    char reload_error[256];

    struct metrics *metrics; /* the counters (metrics.h) */
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

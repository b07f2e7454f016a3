/* broker.h: fmbrokerd's context, a set of pointers to its sub-contexts,
 * and what its files share.  src/broker/README is the map: each file's
 * one job, and where a change of each common kind goes.
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
#include "svccheck.h"
#include "fmclient.h"
#include "events.h"
#include "fmsession.h"
#include "http.h"
#include "jobs.h"
#include "metrics.h"
#include "outbox.h"
#include "pass.h"
#include "ratelimit.h"
#include "reconcile.h"
#include "reservations.h"
#include "roles.h"
#include "statelock.h"
#include "timer.h"
#include "store.h"

#define EVENT_WAIT_MAX_S 60
#define STEP_WAIT_MAX_S  60
#define STALL_WINDOW_MS  60000 /* the stall metric covers 1-2 windows */

#define FM_OPS       FMC_OP_COUNT           /* fmclient.h: FMC_OPS */
#define FM_RESULTS   (FMC_UNAUTHORIZED + 1) /* the statuses an FM answer has */
#define LAT_BUCKETS  12
#define PASS_BUCKETS 9 /* the loop pass histogram's bounds, metrics.c */

struct metrics {
    unsigned long fm_calls[FM_OPS][FM_RESULTS];
    unsigned long fm_latency[FM_OPS][LAT_BUCKETS + 1]; /* cumulative-ready counts */
    double fm_latency_sum[FM_OPS];
    unsigned long http_by_class[6]; /* 1xx..5xx */
    unsigned long reconcile_runs;
    unsigned long orphans_released;
    unsigned long foreign_reservations; /* at the last reconciliation */
    unsigned long auth_failures;        /* TCP credentials refused */
    unsigned long auth_delayed;         /* ...of those, answered late (tarpit) */
    unsigned long tcp_refused;          /* TCP connections closed at accept */
    unsigned long foreign_reaped;
    unsigned long reservations_lost;
    unsigned long pruned_jobs; /* [broker] retain_days */
    unsigned long pruned_events;
    unsigned long prune_slices;     /* loop passes that pruned something */
    unsigned long reconcile_slices; /* loop passes that matched a listing */
    /* The longest loop pass (time spent not waiting for input), in this
     * window and the one before, and the time its commits took. */
    int64_t stall_us[2];
    int64_t stall_commit_us[2];
    int64_t stall_window; /* monotonic ms when the current window began */
    /* every pass's time (since start): how often the loop is held, not
     * only its longest hold */
    unsigned long pass_busy[PASS_BUCKETS + 1];
    double pass_busy_sum;
};

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
    struct retention *retention; /* quarantine expiry, retention (retention.c) */
    int64_t started_ms;
    bool stopping;

    struct metrics metrics;
};

/* ---- broker.c ------------------------------------------------------ */

bool broker_job_token_matches (struct broker *b, const char *job, const char *token);
void broker_count_request (struct broker *b, int status);
/* A request is going away: out of whichever wait queue holds it. */
void broker_forget_request (struct broker *b, struct waiter *w);
void broker_log_store_error (struct broker *b,
                             const char *what,
                             const struct fmb_error *e);
/* "cluster-job" for a job id. */
void broker_fm_id (struct broker *b, const char *job, char *out, size_t len);

/* ---- config_apply.c ----------------------------------------------- */

/* What start needs beyond a parsed configuration (FM credentials, CA and
 * client certificates, the TCP listener's files), checked without side
 * effects: start and --check-config both call it. */
int broker_check_config (const struct fmb_config *cfg, struct fmb_error *error);
/* The same checks, every problem reported (not only the first), with the
 * state directory and the socket's directory as this process's user;
 * returns how many there were. */
int broker_check_all (const struct fmb_config *cfg,
                      svccheck_report_f report,
                      void *arg);
/* Reload: take 'next' (loaded and checked) as the running configuration.
 * Keys that need a restart keep their old values (logged); returns how
 * many of those changed, or -1 (nothing changed) if a file it re-reads
 * (the tokens file) is bad. */
int broker_apply_config (struct broker *b,
                         struct fmb_config *next,
                         struct fmb_error *error);

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

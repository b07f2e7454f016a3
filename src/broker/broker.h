/* broker.h: fmbrokerd's context and what its files share.
 *
 *   main.c     start-up, the loop, signals, shutdown
 *   http.c     the REST transport (routes dispatch into routes.c)
 *   routes.c   the route table; status, health, metrics, events, reconcile
 *   jobs.c     RUN, CLEANUP, steps, node reports, job views and env
 *   fmwork.c   the FM session, the outbox runner, reconciliation, recovery
 *   broker.c   roles, events and their long-poll readers, metrics
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
#include "fmclient.h"
#include "http.h"
#include "pass.h"
#include "ratelimit.h"
#include "statelock.h"
#include "store.h"

#define OUTBOX_PARALLEL         64   /* FM operations from the outbox at once */
#define OUTBOX_BACKOFF_MS       1000 /* first retry; doubles per attempt */
#define OUTBOX_BACKOFF_MAX_MS   (5 * 60 * 1000)
#define OUTBOX_ALERT_ATTEMPTS   5 /* then a release_failed event */
#define FM_PROBE_BACKOFF_MAX_MS 60000
#define EVENT_WAIT_MAX_S        60
#define STEP_WAIT_MAX_S         60
#define MAX_ROLE_IDS            64
/* Background work (retention, reconciliation) runs in slices of about
 * this much time, one per loop pass, so that a request never waits long
 * behind it. */
#define BACKGROUND_SLICE_US 4000
#define STALL_WINDOW_MS     60000 /* the stall metric covers 1-2 windows */

/* Outbox kinds. */
#define OUTBOX_FM_DELETE_JOB  "fm_delete_job"  /* target: FM job id */
#define OUTBOX_FM_DELETE_STEP "fm_delete_step" /* target: FM job id, arg: step */

enum fm_state {
    FM_DISABLED,   /* no [fabric_manager] url: VNI-only */
    FM_CONNECTING, /* first contact not made yet */
    FM_UP,
    FM_DOWN, /* unreachable: FM work waits, reconnect is retried */
};

#define FM_OPS      7 /* get create patch delete list token login */
#define FM_RESULTS  (FMC_UNAUTHORIZED + 1) /* the statuses an FM answer has */
#define LAT_BUCKETS 12

struct metrics {
    unsigned long fm_calls[FM_OPS][FM_RESULTS];
    unsigned long fm_latency[FM_OPS][LAT_BUCKETS + 1]; /* cumulative-ready counts */
    double fm_latency_sum[FM_OPS];
    unsigned long http_by_class[6]; /* 1xx..5xx */
    unsigned long reconcile_runs;
    unsigned long orphans_released;
    unsigned long foreign_reservations; /* at the last reconciliation */
    unsigned long foreign_reaped;
    unsigned long reservations_lost;
    unsigned long pruned_jobs; /* [broker] retain_days */
    unsigned long pruned_events;
    unsigned long prune_slices;     /* loop passes that pruned something */
    unsigned long reconcile_slices; /* loop passes that matched a listing */
    /* The longest loop pass (time spent not waiting for input), in this
     * window and the one before. */
    int64_t stall_us[2];
    int64_t stall_window; /* monotonic ms when the current window began */
};

struct reservation; /* a reserve call in flight (jobs.c) */
struct reconcile;   /* a listing being matched (fmwork.c) */

struct broker {
    struct fmb_config cfg;
    struct statelock lock; /* held for the broker's whole life */
    struct store *st;
    struct fmc *fmc; /* NULL: VNI-only */
    struct http *http;
    struct pass *pass; /* the loop pass: its transaction and what waits on it */
    int64_t started_ms;
    bool stopping;

    uid_t rm_uids[MAX_ROLE_IDS];
    int n_rm;
    uid_t admin_uids[MAX_ROLE_IDS];
    int n_admin;
    gid_t admin_gids[MAX_ROLE_IDS];
    int n_admin_gids;

    enum fm_state fm_state;
    int64_t fm_since_ms; /* wall clock of the last state change */
    char fm_error[256];  /* why it is down */
    unsigned fm_backoff_ms;
    int64_t fm_next_probe; /* monotonic */
    bool fm_probe_inflight;

    int64_t next_reconcile;      /* monotonic */
    struct reconcile *reconcile; /* a listing being matched, in slices */
    bool reconcile_inflight;
    bool reconcile_wanted;
    bool reap_foreign_wanted; /* an admin asked: the next listing reaps them */
    json_t *foreign_seen;     /* FM ids reported foreign at the last pass */

    int64_t outbox_due; /* wall clock ms of the earliest entry, INT64_MAX: none */
    int64_t outbox_inflight[OUTBOX_PARALLEL];
    int n_outbox_inflight;

    struct reservation *reservations;
    struct waitq event_waiters;   /* long-poll readers of /v1/events */
    struct waitq step_waiters;    /* step cleanups with ?wait */
    int64_t next_expire;          /* monotonic: next quarantine expiry pass */
    int64_t next_prune;           /* monotonic: next retention slice */
    bool background_more;         /* a slice left work: come back soon */
    unsigned long prune_round[2]; /* jobs, events deleted in this round */

    struct metrics metrics;
    struct ratelimit *step_limit; /* step cleanups per job ([api] step_cleanup_*) */

    /* Jobs whose stored token did not decrypt: logged at once, an event
     * in the next pass; 'seen' keeps a listing from repeating them. */
    char damaged_new[16][STORE_JOB_ID_MAX + 1];
    int n_damaged_new;
    int n_damaged_reporting; /* the first ones, written in this pass */
    char damaged_seen[64][STORE_JOB_ID_MAX + 1];
    unsigned n_damaged_seen;
};

/* ---- broker.c ------------------------------------------------------ */

int broker_resolve_roles (struct broker *b);
unsigned broker_roles_of (struct broker *b, uid_t uid, gid_t gid);
bool broker_job_token_matches (struct broker *b, const char *job, const char *token);
void broker_count_request (struct broker *b, int status);
/* A request is going away: make sure no waiter list still holds it. */
void broker_forget_request (struct broker *b, struct http_req *req);
/* Append an event inside the caller's transaction; 'detail' is stolen. */
int broker_event (struct broker *b,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error);
/* Answer long-poll readers that have news, and those whose wait ran out. */
void broker_events_wake (struct broker *b, bool all);
/* The fabric's observer: every FM call, counted by call and result. */
void broker_observe_fm (const struct fmc_result *res, void *arg);
/* The loop spent 'us' in one pass: the stall metric. */
void broker_note_stall (struct broker *b, int64_t us);
char *broker_metrics_text (struct broker *b);
json_t *broker_status (struct broker *b);
/* store damage hook (store_set_damage_hook), and its events' pass */
void broker_token_damaged (void *arg, const char *job, const char *why);
void broker_report_damage (struct broker *b);
void broker_log_store_error (struct broker *b,
                             const char *what,
                             const struct fmb_error *e);

/* ---- config_apply.c ----------------------------------------------- */

/* What start needs beyond a parsed configuration (FM credentials, CA and
 * client certificates, the TCP listener's files), checked without side
 * effects: start and --check-config both call it. */
int broker_check_config (const struct fmb_config *cfg, struct fmb_error *error);
/* Reload: take 'next' (loaded and checked) as the running configuration.
 * Keys that need a restart keep their old values (logged); returns how
 * many of those changed, or -1 (nothing changed) if a file it re-reads
 * (the tokens file) is bad. */
int broker_apply_config (struct broker *b,
                         struct fmb_config *next,
                         struct fmb_error *error);

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
int jobs_vni_list (struct broker *b, struct http_req *req, struct http_problem *p);
/* Does a reserve call for this job run right now? */
bool jobs_reserving (struct broker *b, const char *job);
/* Resolve reservations left 'reserving' by a crash (at start). */
void jobs_recover (struct broker *b);
/* Answer requests waiting on a reservation that is being abandoned. */
void jobs_shutdown (struct broker *b);
/* Free what jobs_shutdown left, once no FM callback can come. */
void jobs_free (struct broker *b);
/* Does hwcoll state 's' stand for a reservation (made or being made),
 * which CLEANUP turns into 'released'?  The other states keep their
 * reason in the job's history. */
bool jobs_hwcoll_held (enum store_hwcoll_state s);
/* "cluster-job" for a job id. */
void jobs_fm_id (struct broker *b, const char *job, char *out, size_t len);
/* Free quarantined VNIs whose time came; log, event. */
void jobs_expire_quarantine (struct broker *b);
/* Delete history older than [broker] retain_days, one batch per call;
 * returns when the next call is due (monotonic ms). */
int64_t jobs_prune_history (struct broker *b, int64_t mono);

/* ---- fmwork.c ------------------------------------------------------ */

void fm_start (struct broker *b);
/* Every loop pass: probe when down, run due outbox entries, reconcile. */
void fm_tick (struct broker *b);
/* Something was added to the outbox: run it as soon as possible. */
void fm_outbox_changed (struct broker *b);
/* 'reap_foreign': that pass also deletes reservations with our prefix
 * that this broker has no record of (normally only reported). */
void fm_reconcile_now (struct broker *b, bool reap_foreign);
/* A call came back without an HTTP answer (or with one): session state. */
void fm_note_result (struct broker *b, const struct fmc_result *res);
/* Answer step-cleanup waiters of outbox entry 'id' (or whose wait ran out). */
void fm_steps_wake (struct broker *b, int64_t id, bool all);
/* A pass_on_abort hook: the step waiter 'arg' (a struct waiter) waited
 * on an outbox entry that did not commit: 503. */
void fm_steps_uncommitted (void *arg);
const char *fm_state_name (enum fm_state s);
/* Free what a reconciliation in progress holds (at exit). */
void fm_free (struct broker *b);

/* Monotonic and wall clocks. */
int64_t now_mono (void);
int64_t now_wall (void);

#endif

/* outbox.c: FM changes that must happen, from the store's outbox
 * (outbox.h).
 *
 * Due entries run concurrently (at most OUTBOX_PARALLEL, and at most
 * OUTBOX_RATE a second, so a backlog does not hold the loop); success or 404
 * removes the entry and records the outcome in the same transaction;
 * anything else reschedules it with exponential back-off and jitter, and
 * after OUTBOX_ALERT_ATTEMPTS a release_failed event says so.  A job's
 * delete waits while its reservation call is still in flight, so the two
 * can never cross at the FM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "fmsession.h"
#include "httpreq.h"
#include "pass.h"
#include "store.h"
#include "timer.h"
#include "waitq.h"
#include "fmids.h"
#include "log.h"
#include "outbox.h"

#define OUTBOX_BATCH 256

/* The kinds of entry; the store keeps them as text. */
#define OUTBOX_FM_DELETE_JOB  "fm_delete_job"  /* target: FM job id */
#define OUTBOX_FM_DELETE_STEP "fm_delete_step" /* target: FM job id, arg: step */

struct outbox {
    const struct fmb_config *cfg;
    struct store *st;
    struct fmc *fmc; /* NULL: VNI-only, nothing runs */
    struct pass *pass;
    struct timers *timers;
    struct fmsession *fms;
    const bool *stopping; /* the broker is shutting down */
    /* The calls out, owned here: fmc_destroy abandons a call still out at
     * shutdown without its callback. */
    struct outbox_call *inflight[OUTBOX_PARALLEL];
    int n_inflight;
    struct waitq step_waiters; /* step cleanups with ?wait */
    uint64_t abort_hooked;     /* the pass whose abort hook is registered */
    struct timer *timer, *steps_timer;
    struct outbox_hooks hooks;
    void *hooks_arg;
    /* the rate: calls that may start now (OUTBOX_RATE a second, at most
     * OUTBOX_PARALLEL), as of tokens_at (monotonic ms) */
    double tokens;
    int64_t tokens_at;
    int64_t waits_since; /* pass_background_waits */
};

void outbox_set_hooks (struct outbox *o, const struct outbox_hooks *hooks, void *arg)
{
    o->hooks = *hooks;
    o->hooks_arg = arg;
}

static const char *local_job (struct outbox *o, const char *fm_job_id)
{
    return fmids_local_job (o->cfg->cluster_name, fm_job_id);
}

struct outbox_call {
    struct outbox *o;
    int64_t id;
    bool step;
    unsigned attempts;
    char target[STORE_FM_JOB_ID_MAX + 1];
    char arg[STEP_ID_MAX + 1];
};

static void inflight_remove (struct outbox *o, const struct outbox_call *c)
{
    for (int i = 0; i < o->n_inflight; i++)
        if (o->inflight[i] == c) {
            o->inflight[i] = o->inflight[--o->n_inflight];
            return;
        }
}

static bool inflight_has (struct outbox *o, int64_t id)
{
    for (int i = 0; i < o->n_inflight; i++)
        if (o->inflight[i]->id == id)
            return true;
    return false;
}

struct steps_wake {
    int64_t id; /* the outbox entry that finished, or 0 */
    bool all;
    int64_t now;
};

/* A step cleanup's waiter: 200 "cleaned" when its entry finished, else
 * 202 "cleaning" when its wait ran out (or all are answered). */
static void step_reply (struct waiter *w, void *arg)
{
    struct steps_wake *sw = arg;
    bool mine = sw->id && w->key == sw->id;
    if (!mine && !sw->all && sw->now < w->deadline_ms)
        return;
    waitq_remove (w);
    size_t len;
    const char *step = http_step (w->req, &len);
    http_reply (w->req,
                mine ? 200 : 202,
                json_pack ("{s:s, s:s, s:s}",
                           "job",
                           http_job (w->req),
                           "step",
                           step,
                           "state",
                           mine ? "cleaned" : "cleaning"));
}

static void steps_wake (struct outbox *o, int64_t id, bool all)
{
    struct steps_wake sw = {id, all, now_mono ()};
    waitq_each (&o->step_waiters, step_reply, &sw);
}

void outbox_steps_answer_all (struct outbox *o)
{
    if (o)
        steps_wake (o, 0, true);
}

/* Waiters on entries the pass that did not commit had queued: 503. */
static void step_uncommitted (struct waiter *w, void *arg)
{
    const char *why;
    if (w->pass != pass_count (arg))
        return;
    bool failing = pass_commits_failing (arg, &why);
    waitq_remove (w);
    http_reply_uncommitted (w->req, failing ? why : NULL);
}

static void steps_abort (void *arg)
{
    struct outbox *o = arg;
    waitq_each (&o->step_waiters, step_uncommitted, o->pass);
}

static int64_t backoff_ms (unsigned attempts)
{
    int64_t d = OUTBOX_BACKOFF_MS;
    for (unsigned i = 0; i < attempts && d < OUTBOX_BACKOFF_MAX_MS; i++)
        d *= 2;
    if (d > OUTBOX_BACKOFF_MAX_MS)
        d = OUTBOX_BACKOFF_MAX_MS;
    /* +-50% jitter so that many entries failing together do not retry
     * together. */
    return d / 2 + (int64_t)(random () % (d + 1));
}

/* A finished entry: gone from the outbox, and what it did recorded (a
 * step cleaned; a releasing job released). */
static int record_finished (struct outbox_call *c, struct fmb_error *e)
{
    struct outbox *o = c->o;
    const char *job = local_job (o, c->target);
    if (store_outbox_done (o->st, c->id, e) < 0 && errno != ENOENT)
        return -1;
    if (job && c->step)
        return store_step_put (o->st, job, c->arg, STORE_STEP_CLEANED, NULL, e) < 0 &&
                       errno != ENOENT
                   ? -1
                   : 0;
    return job && o->hooks.job_deleted ? o->hooks.job_deleted (o->hooks_arg, job, e)
                                       : 0;
}

/* A failed entry: due again after a back-off; after OUTBOX_ALERT_ATTEMPTS
 * an error and a release_failed event say so. */
static int record_failed (struct outbox_call *c,
                          const struct fmc_result *res,
                          struct fmb_error *e)
{
    struct outbox *o = c->o;
    if (store_outbox_retry (
            o->st, c->id, now_wall () + backoff_ms (c->attempts), res->error, e) < 0 &&
        errno != ENOENT)
        return -1;
    if (c->attempts + 1 != OUTBOX_ALERT_ATTEMPTS)
        return 0;
    fmb_logf (LOG_ERR,
              &(struct fmb_log_fields){.step = c->step ? c->arg : NULL,
                                       .fm_call = c->step ? "patch" : "delete"},
              "%s %s%s%s: still failing after %u attempts: %s",
              c->step ? "step cleanup" : "release",
              c->target,
              c->step ? " step " : "",
              c->step ? c->arg : "",
              OUTBOX_ALERT_ATTEMPTS,
              res->error);
    json_t *d = json_pack ("{s:s, s:s, s:i}",
                           "fm_job_id",
                           c->target,
                           "error",
                           res->error,
                           "attempts",
                           OUTBOX_ALERT_ATTEMPTS);
    if (c->step)
        json_object_set_new (d, "step", json_string (c->arg));
    if (!o->hooks.event) {
        json_decref (d);
        return 0;
    }
    return o->hooks.event (
        o->hooks_arg, "release_failed", local_job (o, c->target), d, e);
}

struct outbox_result {
    struct outbox_call *c;
    const struct fmc_result *res;
};

static int write_result (void *arg, struct fmb_error *e)
{
    struct outbox_result *r = arg;
    if (r->res->status == FMC_OK || r->res->status == FMC_NOT_FOUND)
        return record_finished (r->c, e);
    return record_failed (r->c, r->res, e);
}

static void outbox_done (const struct fmc_result *res, void *arg)
{
    struct outbox_call *c = arg;
    struct outbox *o = c->o;
    struct fmb_error e;
    fmsession_note (o->fms, res);
    inflight_remove (c->o, c);
    if (res->status == FMC_NOT_SENT) {
        /* The pass that queued it did not commit: the entry is as it was
         * before (due again, or gone with the pass). */
        outbox_changed (c->o);
        free (c);
        return;
    }
    bool finished = res->status == FMC_OK || res->status == FMC_NOT_FOUND;
    struct outbox_result r = {c, res};
    if (pass_write (o->pass, write_result, &r, &e) < 0) {
        /* What it did cannot be recorded (the job unreadable, say): the
         * entry is due again after a back-off, like a failed call, rather
         * than sent again at once for as long as the error lasts; its
         * attempts count towards release_failed. */
        char why[FMB_ERROR_TEXT_MAX + 64];
        snprintf (why, sizeof (why), "its result cannot be recorded: %s", e.text);
        struct fmc_result unrecorded = *res;
        unrecorded.status = FMC_RETRYABLE;
        unrecorded.error = why;
        r.res = &unrecorded;
        broker_log_store_error (NULL, c->target, &e);
        if (pass_write (o->pass, write_result, &r, &e) < 0)
            broker_log_store_error (NULL, c->target, &e);
    }
    if (finished && c->step)
        steps_wake (c->o, c->id, false);
    outbox_changed (c->o);
    free (c);
}

/* A call fmclient refused at once: its entry as after a failed call. */
static void refused_at_once (struct outbox_call *c, const char *why)
{
    struct fmb_error e;
    struct fmc_result res = {.status = FMC_RETRYABLE, .error = why, .mcast_limit = -1};
    struct outbox_result r = {c, &res};
    inflight_remove (c->o, c);
    if (pass_write (c->o->pass, write_result, &r, &e) < 0)
        broker_log_store_error (NULL, c->target, &e);
    free (c);
}

struct due {
    struct outbox_call calls[OUTBOX_BATCH];
    int n;
};

static int collect_due (const struct store_outbox_entry *en, void *arg)
{
    struct due *d = arg;
    struct outbox_call *c = &d->calls[d->n];
    bool step = strcmp (en->kind, OUTBOX_FM_DELETE_STEP) == 0;
    if (!step && strcmp (en->kind, OUTBOX_FM_DELETE_JOB) != 0)
        return 0; /* a kind from a newer broker: leave it */
    c->id = en->id;
    c->step = step;
    c->attempts = en->attempts;
    snprintf (c->target, sizeof (c->target), "%s", en->target);
    snprintf (c->arg, sizeof (c->arg), "%s", en->arg);
    d->n++;
    return 0;
}

/* How many calls may start now; 0 with the ms until enough may that it
 * is worth a look at the store (OUTBOX_STEP, or every free slot). */
static int outbox_allowance (struct outbox *o, int64_t *wait_ms)
{
    int64_t mono = now_mono ();
    o->tokens += (double)(mono - o->tokens_at) * OUTBOX_RATE / 1000.0;
    o->tokens_at = mono;
    if (o->tokens > OUTBOX_PARALLEL)
        o->tokens = OUTBOX_PARALLEL;
    int room = OUTBOX_PARALLEL - o->n_inflight;
    int worth = room < OUTBOX_STEP ? room : OUTBOX_STEP;
    if (o->tokens >= worth)
        return (int)o->tokens < room ? (int)o->tokens : room;
    *wait_ms = (int64_t)((worth - o->tokens) * 1000.0 / OUTBOX_RATE) + 1;
    return 0;
}

/* Send one due entry's FM call: 1 if it left, 0 if fmclient refused it
 * at once, -1 out of memory. */
static int start_call (struct outbox *o, const struct outbox_call *src)
{
    struct fmb_error e;
    struct outbox_call *c = malloc (sizeof (*c));
    if (!c)
        return -1;
    *c = *src;
    c->o = o;
    o->inflight[o->n_inflight++] = c;
    o->tokens--;
    int rc = c->step
                 ? fmc_job_delete_step (o->fmc, c->target, c->arg, outbox_done, c, &e)
                 : fmc_job_delete (o->fmc, c->target, outbox_done, c, &e);
    if (rc < 0) {
        /* refused before it left (an id fmclient will not send, no
         * memory): retried after a back-off like a failed call, so
         * that it neither spends the rate nor holds up the entries
         * behind it at every run */
        fmb_log (LOG_ERR, "outbox %s: %s", c->target, e.text);
        o->tokens++;
        refused_at_once (c, e.text);
        return 0;
    }
    return 1;
}

/* Run the due entries; returns when to run again (ms). */
static int64_t outbox_run (struct outbox *o)
{
    struct fmb_error e;
    int64_t now = now_wall ();
    bool deferred = false;
    int64_t wait_ms = 0;
    int allowed = outbox_allowance (o, &wait_ms);
    if (o->n_inflight == OUTBOX_PARALLEL)
        return TIMER_IDLE; /* a call that ends wakes it */
    if (allowed == 0)
        return wait_ms;
    struct due *d = malloc (sizeof (*d)); /* ~100 KiB: no memset per pass */
    if (!d)
        return 200;
    d->n = 0;
    if (store_outbox_due (o->st, now, OUTBOX_BATCH, collect_due, d, &e) < 0)
        broker_log_store_error (NULL, "outbox", &e);
    int started = 0;
    for (int i = 0; i < d->n && started < allowed; i++) {
        struct outbox_call *src = &d->calls[i];
        if (inflight_has (o, src->id))
            continue;
        const char *job = local_job (o, src->target);
        if (!src->step && job && o->hooks.reserving &&
            o->hooks.reserving (o->hooks_arg, job)) {
            deferred = true; /* never cross a reservation still in flight */
            continue;
        }
        int sent = start_call (o, src);
        if (sent < 0)
            break;
        started += sent;
        if (fmsession_state (o->fms) != FM_UP)
            break; /* a call failed at once and took the session down */
    }
    free (d);
    /* Next run: when the earliest entry is due, but not in a busy loop
     * over entries that are in flight or deferred. */
    int64_t next;
    if (store_outbox_next_ms (o->st, &next, &e) < 0) { /* INT64_MAX: empty */
        broker_log_store_error (NULL, "outbox", &e);
        next = now + 1000; /* not idle: nothing else would wake it */
    }
    if (started == allowed && next <= now)
        next = now + OUTBOX_STEP * 1000 / OUTBOX_RATE; /* a backlog */
    else if (next <= now || deferred)
        next = now + 200;
    /* (anything queued during this run woke the timer: it wins) */
    return next == INT64_MAX ? TIMER_IDLE : next - now;
}

static int64_t outbox_timer (void *arg, int64_t now)
{
    struct outbox *o = arg;
    (void)now;
    if (!o->fmc || *o->stopping || fmsession_state (o->fms) != FM_UP)
        return TIMER_IDLE; /* the session coming up wakes it */
    /* Releases start once the RUNs at the FM are answered and the pass
     * holds no answers (pass_serving), or PASS_BACKGROUND_DEFER_MAX_MS
     * later: their answers would be handled in the passes those RUNs wait
     * on.  The rate's tokens build up meanwhile, so what waited leaves at
     * once (up to ~30 calls).  A RUN every 20 ms while 99,000 orphans are
     * released: p99 5.6 ms with this, 6.6-7.1 without (bench 5 at 1M, 2
     * runs each).  A step cleanup waiting on its release may wait that
     * much longer. */
    if (pass_background_waits (&o->waits_since, pass_serving (o->pass), now_mono ()))
        return 1;
    return outbox_run (o);
}

void outbox_changed (struct outbox *o)
{
    if (o)
        timer_wake (o->timer, 0);
}

static int64_t steps_timer (void *arg, int64_t now)
{
    struct outbox *o = arg;
    steps_wake (o, 0, false); /* waits that ran out */
    return waitq_next_deadline_ms (&o->step_waiters, now);
}

void outbox_steps_wait (struct outbox *o,
                        struct http_req *req,
                        int64_t id,
                        unsigned wait_s)
{
    struct waiter *w = http_wait (req);
    uint64_t pass = pass_count (o->pass);
    w->key = id;
    w->deadline_ms = now_mono () + (int64_t)wait_s * 1000;
    w->pass = pass;
    waitq_add (&o->step_waiters, w);
    /* its outbox entry is this pass's: if that does not commit, 503 */
    if (o->abort_hooked != pass && pass_on_abort (o->pass, steps_abort, o) == 0)
        o->abort_hooked = pass;
    timer_wake (o->steps_timer, (int64_t)wait_s * 1000);
    http_suspend (req);
}

struct outbox *outbox_create (const struct fmb_config *cfg,
                              struct store *st,
                              struct fmc *fmc,
                              struct pass *pass,
                              struct timers *timers,
                              struct fmsession *fms,
                              const bool *stopping)
{
    struct outbox *o = calloc (1, sizeof (*o));
    if (!o)
        return NULL;
    o->cfg = cfg;
    o->st = st;
    o->fmc = fmc;
    o->pass = pass;
    o->timers = timers;
    o->fms = fms;
    o->stopping = stopping;
    o->steps_timer = timer_add (timers, "step waits", TIMER_IDLE, steps_timer, o);
    o->timer = timer_add (timers, "outbox", 0, outbox_timer, o);
    return o;
}

void outbox_destroy (struct outbox *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n_inflight; i++)
        free (o->inflight[i]);
    free (o);
}

struct timer *outbox_timer_of (struct outbox *o)
{
    return o->timer;
}

int outbox_queue_job_delete (struct outbox *o,
                             const char *fm_job_id,
                             int64_t due_ms,
                             struct fmb_error *error)
{
    return store_outbox_put (
        o->st, OUTBOX_FM_DELETE_JOB, fm_job_id, NULL, due_ms, NULL, error);
}

int outbox_fm_job_queued (struct outbox *o,
                          const char *fm_job_id,
                          struct fmb_error *error)
{
    bool job = false, step = false;
    if (store_outbox_has (o->st, OUTBOX_FM_DELETE_JOB, fm_job_id, &job, error) < 0 ||
        (!job &&
         store_outbox_has (o->st, OUTBOX_FM_DELETE_STEP, fm_job_id, &step, error) < 0))
        return -1;
    return job || step;
}

int outbox_queue_step_delete (struct outbox *o,
                              const char *fm_job_id,
                              const char *step,
                              int64_t *id,
                              struct fmb_error *error)
{
    return store_outbox_put (
        o->st, OUTBOX_FM_DELETE_STEP, fm_job_id, step, now_wall (), id, error);
}

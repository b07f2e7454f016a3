/* fmwork.c: the FM session, the outbox runner and reconciliation.
 *
 * Session: connecting -> up; any call that gets no HTTP answer at all
 * (refused, timed out, TLS or token failure) makes it down.  While down,
 * the outbox waits and RUN answers "unavailable" at once; a probe (the
 * jobs listing) is retried with exponential back-off, and when it
 * answers the session is up again and that listing reconciles.
 *
 * Outbox: due entries run concurrently (at most OUTBOX_PARALLEL); success
 * or 404 removes the entry and records the outcome in the same
 * transaction; anything else reschedules it with exponential back-off and
 * jitter, and after OUTBOX_ALERT_ATTEMPTS a release_failed event says so.
 * A job's delete waits while its reservation call is still in flight, so
 * the two can never cross at the FM.
 *
 * Reconciliation (at start, after every reconnect, every
 * reconcile_interval_s, and on request): every FM job with our
 * "{cluster}-" prefix that is not a live reservation here is deleted; a
 * live reservation that the FM no longer lists becomes "lost".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "log.h"
#include "monotime.h"

#define OUTBOX_BATCH 256

const char *fm_state_name (enum fm_state s)
{
    switch (s) {
    case FM_DISABLED:
        return "disabled";
    case FM_CONNECTING:
        return "connecting";
    case FM_UP:
        return "up";
    case FM_DOWN:
        return "down";
    }
    return "?";
}

static void set_state (struct broker *b, enum fm_state s, const char *why)
{
    struct fmb_error e;
    enum fm_state old = b->fm_state;
    if (s == FM_DOWN) {
        snprintf (b->fm_error, sizeof (b->fm_error), "%s", why ? why : "");
        /* Back off per failed probe, not per failed call: many calls
         * failing together are one outage. */
        if (old != FM_DOWN)
            b->fm_backoff_ms = 1000;
        else if (b->fm_next_probe == 0) /* a probe failed */
            b->fm_backoff_ms = b->fm_backoff_ms * 2 > FM_PROBE_BACKOFF_MAX_MS
                                   ? FM_PROBE_BACKOFF_MAX_MS
                                   : b->fm_backoff_ms * 2;
        else
            return;
        b->fm_next_probe = now_mono () + b->fm_backoff_ms;
    }
    if (old == s)
        return;
    b->fm_state = s;
    b->fm_since_ms = now_wall ();
    if (s == FM_UP) {
        b->fm_backoff_ms = 0;
        b->reconcile_wanted = true;
        b->outbox_due = 0;
        fmb_log (LOG_NOTICE, "fabric manager %s: session up", b->cfg.fm_url);
        if (old == FM_DOWN && broker_event (b,
                                            "fm_reconnected",
                                            NULL,
                                            json_pack ("{s:s}", "url", b->cfg.fm_url),
                                            &e) < 0)
            broker_log_store_error (b, "event", &e);
    } else if (s == FM_DOWN) {
        fmb_log (
            LOG_WARNING,
            "fabric manager %s: unreachable (%s); FM work waits, retrying in %u ms",
            b->cfg.fm_url,
            b->fm_error,
            b->fm_backoff_ms);
        if (broker_event (
                b,
                "fm_disconnected",
                NULL,
                json_pack ("{s:s, s:s}", "url", b->cfg.fm_url, "error", b->fm_error),
                &e) < 0)
            broker_log_store_error (b, "event", &e);
    }
}

void fm_note_result (struct broker *b, const struct fmc_result *res)
{
    if (res->status == FMC_NOT_SENT)
        return; /* says nothing about the FM */
    /* counted in metrics by the fabric's observer, call by call */
    if (res->status != FMC_OK && res->http_status == 0)
        set_state (b, FM_DOWN, res->error);
    else if (b->fm_state != FM_UP)
        set_state (b, FM_UP, NULL);
}

/* ---- outbox -------------------------------------------------------- */

struct outbox_call {
    struct broker *b;
    int64_t id;
    bool step;
    unsigned attempts;
    char target[STORE_FM_JOB_ID_MAX + 1];
    char arg[STEP_ID_MAX + 1];
};

/* The local job id of one of our FM job ids, or NULL if it is not ours. */
static const char *local_job (struct broker *b, const char *fmid)
{
    size_t n = strlen (b->cfg.cluster_name);
    if (strncmp (fmid, b->cfg.cluster_name, n) != 0 || fmid[n] != '-')
        return NULL;
    return fmid + n + 1;
}

static void inflight_remove (struct broker *b, int64_t id)
{
    for (int i = 0; i < b->n_outbox_inflight; i++)
        if (b->outbox_inflight[i] == id) {
            b->outbox_inflight[i] = b->outbox_inflight[--b->n_outbox_inflight];
            return;
        }
}

static bool inflight_has (struct broker *b, int64_t id)
{
    for (int i = 0; i < b->n_outbox_inflight; i++)
        if (b->outbox_inflight[i] == id)
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

void fm_steps_wake (struct broker *b, int64_t id, bool all)
{
    struct steps_wake sw = {id, all, now_mono ()};
    waitq_each (&b->step_waiters, step_reply, &sw);
}

void fm_steps_uncommitted (void *arg)
{
    struct waiter *w = arg;
    if (!w->queue)
        return; /* answered already */
    waitq_remove (w);
    http_reply_uncommitted (w->req);
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
    struct broker *b = c->b;
    const char *job = local_job (b, c->target);
    if (store_outbox_done (b->st, c->id, e) < 0 && errno != ENOENT)
        return -1;
    if (job && c->step)
        return store_step_put (b->st, job, c->arg, STORE_STEP_CLEANED, NULL, e) < 0 &&
                       errno != ENOENT
                   ? -1
                   : 0;
    struct store_job *j;
    if (!job || store_job_get (b->st, job, &j, e) < 0)
        return 0;
    int rc = 0;
    if (j->state == STORE_JOB_RELEASING)
        rc = store_job_set_state (b->st, job, STORE_JOB_RELEASED, e);
    /* Only a reservation becomes 'released': 'unavailable', 'lost' and
     * 'not_eligible' keep their reason in the job's history. */
    if (rc == 0 && j->state != STORE_JOB_ACTIVE && j->state != STORE_JOB_LOST &&
        jobs_hwcoll_held (j->hwcoll))
        rc = store_job_set_hwcoll (
            b->st, job, STORE_HWCOLL_RELEASED, NULL, j->mcast_limit, NULL, e);
    store_job_free (j);
    return rc;
}

/* A failed entry: due again after a back-off; after OUTBOX_ALERT_ATTEMPTS
 * an error and a release_failed event say so. */
static int record_failed (struct outbox_call *c,
                          const struct fmc_result *res,
                          struct fmb_error *e)
{
    struct broker *b = c->b;
    if (store_outbox_retry (
            b->st, c->id, now_wall () + backoff_ms (c->attempts), res->error, e) < 0 &&
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
    return broker_event (b, "release_failed", local_job (b, c->target), d, e);
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
    struct broker *b = c->b;
    struct fmb_error e;
    fm_note_result (b, res);
    inflight_remove (b, c->id);
    if (res->status == FMC_NOT_SENT) {
        /* The pass that queued it did not commit: the entry is as it was
         * before (due again, or gone with the pass). */
        free (c);
        return;
    }
    bool finished = res->status == FMC_OK || res->status == FMC_NOT_FOUND;
    struct outbox_result r = {c, res};
    if (pass_write (b->pass, write_result, &r, &e) < 0)
        broker_log_store_error (b, c->target, &e);
    if (finished && c->step)
        fm_steps_wake (b, c->id, false);
    fm_outbox_changed (b);
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

static void outbox_run (struct broker *b)
{
    struct due *d = malloc (sizeof (*d)); /* ~100 KiB: no memset per pass */
    struct fmb_error e;
    int64_t now = now_wall ();
    bool deferred = false;
    if (!d)
        return;
    d->n = 0;
    /* Anything that changes the outbox during this run puts 0 back. */
    b->outbox_due = INT64_MAX;
    if (store_outbox_due (b->st, now, OUTBOX_BATCH, collect_due, d, &e) < 0)
        broker_log_store_error (b, "outbox", &e);
    for (int i = 0; i < d->n && b->n_outbox_inflight < OUTBOX_PARALLEL; i++) {
        struct outbox_call *src = &d->calls[i];
        if (inflight_has (b, src->id))
            continue;
        const char *job = local_job (b, src->target);
        if (!src->step && job && jobs_reserving (b, job)) {
            deferred = true; /* never cross a reservation still in flight */
            continue;
        }
        struct outbox_call *c = malloc (sizeof (*c));
        if (!c)
            break;
        *c = *src;
        c->b = b;
        b->outbox_inflight[b->n_outbox_inflight++] = c->id;
        int rc = c->step ? fmc_job_delete_step (
                               b->fmc, c->target, c->arg, outbox_done, c, &e)
                         : fmc_job_delete (b->fmc, c->target, outbox_done, c, &e);
        if (rc < 0) {
            inflight_remove (b, c->id);
            fmb_log (LOG_ERR, "outbox %s: %s", c->target, e.text);
            free (c);
        }
        if (b->fm_state != FM_UP)
            break; /* a call failed at once and took the session down */
    }
    free (d);
    /* Next run: when the earliest entry is due, but not in a busy loop
     * over entries that are in flight or deferred. */
    int64_t next;
    if (store_outbox_next_ms (b->st, &next, &e) < 0)
        next = INT64_MAX;
    if (next <= now || deferred)
        next = now + 200;
    if (b->outbox_due != 0) /* unless something new came meanwhile */
        b->outbox_due = next;
    else
        b->outbox_due = now + 1; /* next pass, not a spin on this one */
}

void fm_outbox_changed (struct broker *b)
{
    b->outbox_due = 0;
}

/* ---- reconciliation ------------------------------------------------ */

/* A reconciliation in progress: the FM's listing, matched against the
 * store a slice at a time (BACKGROUND_SLICE_US each, one per loop pass),
 * so that 100,000 FM entries never hold the loop.  The store may change
 * between slices: whatever the scan at the start did not see as live is
 * read again before anything is done to it. */
struct reconcile {
    int64_t listed_at;
    char **fm_ids; /* the listing, copied */
    size_t n, pos;
    json_t *holding; /* FM ids of jobs that held or were making a reservation */
    json_t *judged;  /* job id -> FM id: reserved before the listing was asked for */
    json_t *listed;  /* set of the FM ids listed (filled by the first phase) */
    void *judge_at;  /* second phase: position in 'judged' */
    bool reap_foreign;
    json_t *foreign_now; /* set of FM ids left as foreign */
    unsigned orphans, foreign, reaped, lost;
    bool done; /* matched to the end (or abandoned) in the current slice */
    /* Where the current slice began: a slice whose pass does not commit
     * is rolled back, and so is the progress it made here. */
    struct {
        size_t pos;
        void *judge_at;
        unsigned orphans, foreign, reaped, lost;
    } slice;
    int64_t resume_at; /* monotonic: after a rewind, not before this */
};

static void reconcile_free (struct reconcile *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free (r->fm_ids[i]);
    free (r->fm_ids);
    json_decref (r->holding);
    json_decref (r->judged);
    json_decref (r->listed);
    json_decref (r->foreign_now);
    free (r);
}

static int scan_unreleased (const struct store_job_brief *j, void *arg)
{
    struct reconcile *r = arg;
    if (j->hwcoll == STORE_HWCOLL_RESERVED || j->hwcoll == STORE_HWCOLL_RESERVING)
        json_object_set_new (r->holding, j->fm_job_id, json_true ());
    /* Only reservations recorded before the listing was asked for can be
     * judged by it. */
    if (j->state == STORE_JOB_ACTIVE && j->hwcoll == STORE_HWCOLL_RESERVED &&
        j->updated_ms < r->listed_at)
        json_object_set_new (r->judged, j->id, json_string (j->fm_job_id));
    return 0;
}

/* Start matching a listing: copy it and take the store's unreleased jobs
 * in brief (one indexed query; the store keeps few of them). */
static struct reconcile *reconcile_begin (struct broker *b,
                                          const struct fmc_result *res,
                                          int64_t listed_at,
                                          bool reap_foreign)
{
    struct fmb_error e;
    struct reconcile *r = calloc (1, sizeof (*r));
    if (!r)
        return NULL;
    r->listed_at = listed_at;
    r->holding = json_object ();
    r->judged = json_object ();
    r->listed = json_object ();
    r->foreign_now = json_object ();
    r->reap_foreign = reap_foreign || b->cfg.reap_foreign;
    r->fm_ids = calloc (res->njob_ids ? res->njob_ids : 1, sizeof (*r->fm_ids));
    if (!r->holding || !r->judged || !r->listed || !r->foreign_now || !r->fm_ids)
        goto nomem;
    for (; r->n < res->njob_ids; r->n++)
        if (!(r->fm_ids[r->n] = strdup (res->job_ids[r->n])))
            goto nomem;
    if (store_job_list_unreleased (b->st, scan_unreleased, r, &e) < 0) {
        broker_log_store_error (b, "reconcile", &e);
        reconcile_free (r);
        return NULL;
    }
    return r;
nomem:
    fmb_log (LOG_ERR, "reconcile: out of memory for %zu FM entries", res->njob_ids);
    reconcile_free (r);
    return NULL;
}

/* Does job 'job' hold (or make) the reservation 'fmid' now?  For entries
 * the scan did not see as live: a RUN may have come since. */
static bool live_now (struct broker *b, const char *job, const char *fmid)
{
    struct store_job *j;
    struct fmb_error e;
    if (jobs_reserving (b, job))
        return true;
    if (store_job_get (b->st, job, &j, &e) < 0)
        return errno != ENOENT; /* unsure: leave it to the next round */
    bool live =
        (j->state == STORE_JOB_ACTIVE || j->state == STORE_JOB_LOST) &&
        (j->hwcoll == STORE_HWCOLL_RESERVED || j->hwcoll == STORE_HWCOLL_RESERVING) &&
        strcmp (j->fm_job_id, fmid) == 0;
    store_job_free (j);
    return live;
}

/* An FM reservation with our prefix that this broker never reserved: a
 * broker with the same cluster_name and other state made it, or this is a
 * standby started on empty state.  Deleting it could end another
 * broker's job's collectives, so it is reported (once per broker run
 * while it stays listed) and left for an admin (promise 9). */
static int report_foreign (struct broker *b, const char *fmid, struct fmb_error *e)
{
    fmb_log (LOG_WARNING,
             "reconcile: FM reservation %s has this cluster's prefix but this broker "
             "has no record of it; left alone (another broker with cluster_name "
             "'%s'?). fmbroker reconcile --reap-foreign deletes it",
             fmid,
             b->cfg.cluster_name);
    return broker_event (
        b,
        "foreign_reservation",
        NULL,
        json_pack ("{s:s, s:s}",
                   "fm_job_id",
                   fmid,
                   "reason",
                   "this cluster's prefix, but no record of it in this broker's state"),
        e);
}

/* First phase, one entry: an FM job of ours that no live job holds is
 * released through the outbox; one this broker has no record of is
 * foreign (left alone unless reaping). */
static int match_entry (struct broker *b,
                        struct reconcile *r,
                        const char *fmid,
                        struct fmb_error *e)
{
    const char *job = local_job (b, fmid);
    json_object_set_new (r->listed, fmid, json_true ());
    if (!job)
        return 0; /* another cluster's: never ours to touch */
    if (json_object_get (r->holding, fmid) || live_now (b, job, fmid))
        return 0;
    bool known;
    if (store_job_known (b->st, job, fmid, &known, e) < 0)
        return -1;
    if (!known) {
        r->foreign++;
        if (!r->reap_foreign) {
            json_object_set_new (r->foreign_now, fmid, json_true ());
            if (!json_object_get (b->foreign_seen, fmid))
                return report_foreign (b, fmid, e);
            return 0;
        }
        fmb_log (LOG_NOTICE,
                 "reconcile: deleting FM reservation %s, which this broker has no "
                 "record of (reap_foreign)",
                 fmid);
        r->reaped++;
    }
    if (store_outbox_put (
            b->st, OUTBOX_FM_DELETE_JOB, fmid, NULL, now_wall (), NULL, e) < 0)
        return -1;
    r->orphans++;
    return 0;
}

/* Second phase, one job: reserved before the listing was asked for, not
 * listed, and still so now -- the FM lost it. */
static int judge_job (struct broker *b,
                      struct reconcile *r,
                      const char *job,
                      const char *fmid,
                      struct fmb_error *e)
{
    struct store_job *j;
    if (json_object_get (r->listed, fmid))
        return 0;
    if (store_job_get (b->st, job, &j, e) < 0)
        return errno == ENOENT ? 0 : -1;
    bool still = j->state == STORE_JOB_ACTIVE && j->hwcoll == STORE_HWCOLL_RESERVED &&
                 j->updated_ms < r->listed_at;
    store_job_free (j);
    if (!still)
        return 0;
    static const char why[] = "the fabric manager no longer holds the reservation";
    fmb_logf (LOG_ERR,
              &(struct fmb_log_fields){.job = job},
              "job %s: the fabric manager lost its multicast reservation",
              job);
    if (store_job_set_state (b->st, job, STORE_JOB_LOST, e) < 0 ||
        store_job_set_hwcoll (b->st, job, STORE_HWCOLL_LOST, why, 0, NULL, e) < 0 ||
        broker_event (
            b, "reservation_lost", job, json_pack ("{s:s}", "reason", why), e) < 0)
        return -1;
    r->lost++;
    return 0;
}

/* One slice of matching: true when the listing is matched to the end. */
static int match_slice (struct broker *b, struct reconcile *r, struct fmb_error *e)
{
    int64_t end = fmb_monotime_us () + BACKGROUND_SLICE_US;
    unsigned k = 0;
    if (!r->judge_at && r->pos < r->n) {
        while (r->pos < r->n) {
            if (match_entry (b, r, r->fm_ids[r->pos], e) < 0)
                return -1;
            r->pos++;
            if (++k % 32 == 0 && fmb_monotime_us () >= end)
                return 0;
        }
    }
    if (!r->judge_at)
        r->judge_at = json_object_iter (r->judged);
    while (r->judge_at) {
        if (judge_job (b,
                       r,
                       json_object_iter_key (r->judge_at),
                       json_string_value (json_object_iter_value (r->judge_at)),
                       e) < 0)
            return -1;
        r->judge_at = json_object_iter_next (r->judged, r->judge_at);
        if (++k % 32 == 0 && fmb_monotime_us () >= end && r->judge_at)
            return 0;
    }
    r->done = true;
    return 0;
}

static int write_slice (void *arg, struct fmb_error *e)
{
    struct broker *b = arg;
    return match_slice (b, b->reconcile, e);
}

/* The whole listing is matched and committed: metrics, log, and the
 * foreign ids to stay quiet about until they change. */
static void reconcile_finish (struct broker *b, struct reconcile *r)
{
    b->metrics.reconcile_runs++;
    b->metrics.orphans_released += r->orphans;
    b->metrics.foreign_reservations = r->foreign - r->reaped;
    b->metrics.foreign_reaped += r->reaped;
    json_decref (b->foreign_seen);
    b->foreign_seen = json_incref (r->foreign_now);
    if (r->orphans)
        fmb_log (LOG_NOTICE,
                 "reconcile: %u FM reservations belong to no live job; releasing",
                 r->orphans);
}

/* The slice's pass ended.  Not committed: what it matched is rolled back,
 * so it is matched again (after a second, not in a loop against a store
 * that cannot commit) -- foreign reservations are reported once they are
 * durable, not counted as reported when they are not. */
static void slice_end (void *arg, bool committed)
{
    struct broker *b = arg;
    struct reconcile *r = b->reconcile;
    if (!committed) {
        r->pos = r->slice.pos;
        r->judge_at = r->slice.judge_at;
        r->orphans = r->slice.orphans;
        r->foreign = r->slice.foreign;
        r->reaped = r->slice.reaped;
        r->lost = r->slice.lost;
        r->done = false;
        r->resume_at = now_mono () + 1000;
        return;
    }
    b->metrics.reservations_lost += r->lost - r->slice.lost;
    fm_outbox_changed (b); /* the orphans found so far go now */
    if (!r->done) {
        b->background_more = true;
        return;
    }
    reconcile_finish (b, r);
    reconcile_free (r);
    b->reconcile = NULL;
}

/* Run the next slice of a reconciliation, if one is in progress.  A store
 * error abandons it (the next listing starts afresh). */
static void reconcile_step (struct broker *b)
{
    struct reconcile *r = b->reconcile;
    struct fmb_error e;
    if (!r || now_mono () < r->resume_at)
        return;
    b->metrics.reconcile_slices++;
    r->slice.pos = r->pos;
    r->slice.judge_at = r->judge_at;
    r->slice.orphans = r->orphans;
    r->slice.foreign = r->foreign;
    r->slice.reaped = r->reaped;
    r->slice.lost = r->lost;
    if (pass_write (b->pass, write_slice, b, &e) < 0) {
        broker_log_store_error (b, "reconcile", &e);
        reconcile_free (r);
        b->reconcile = NULL;
        return;
    }
    if (!pass_open (b->pass) || pass_on_end (b->pass, slice_end, b) < 0)
        slice_end (b, true); /* no pass to wait for: committed already */
}

void fm_free (struct broker *b)
{
    reconcile_free (b->reconcile);
    b->reconcile = NULL;
}

struct listing {
    struct broker *b;
    int64_t started;
    bool probe;
    bool reap_foreign;
};

static void listing_done (const struct fmc_result *res, void *arg)
{
    struct listing *l = arg;
    struct broker *b = l->b;
    if (l->probe)
        b->fm_probe_inflight = false;
    else
        b->reconcile_inflight = false;
    fm_note_result (b, res);
    if (res->status == FMC_OK) {
        /* While one still runs, this listing is not used: ask for a new
         * one when that is done (and keep an admin's request to reap). */
        bool busy = b->reconcile != NULL;
        if (!busy)
            b->reconcile = reconcile_begin (b, res, l->started, l->reap_foreign);
        else
            b->reap_foreign_wanted = b->reap_foreign_wanted || l->reap_foreign;
        b->reconcile_wanted = busy;
        b->next_reconcile =
            b->cfg.reconcile_interval_s
                ? now_mono () + (int64_t)b->cfg.reconcile_interval_s * 1000
                : INT64_MAX;
    } else {
        /* Try again later, not in a loop against an FM that answers errors;
         * an admin's request to reap stays for the next listing. */
        b->reconcile_wanted = false;
        b->reap_foreign_wanted = b->reap_foreign_wanted || l->reap_foreign;
        b->next_reconcile = now_mono () + 5000;
        if (res->http_status != 0)
            fmb_log (LOG_ERR, "reconcile: %s", res->error);
    }
    free (l);
}

static void start_listing (struct broker *b, bool probe)
{
    struct fmb_error e;
    struct listing *l = calloc (1, sizeof (*l));
    if (!l)
        return;
    l->b = b;
    l->probe = probe;
    l->started = now_wall ();
    l->reap_foreign = b->reap_foreign_wanted; /* asked before this listing */
    b->reap_foreign_wanted = false;
    if (probe)
        b->fm_probe_inflight = true;
    else
        b->reconcile_inflight = true;
    if (fmc_job_list (b->fmc, listing_done, l, &e) < 0) {
        struct fmc_result res = {
            .status = FMC_RETRYABLE, .op = "list", .error = e.text};
        listing_done (&res, l);
    }
}

void fm_reconcile_now (struct broker *b, bool reap_foreign)
{
    b->reconcile_wanted = true;
    if (reap_foreign)
        b->reap_foreign_wanted = true;
}

void fm_start (struct broker *b)
{
    b->outbox_due = 0;
    b->next_expire = 0;
    if (!b->fmc) {
        b->fm_state = FM_DISABLED;
        b->fm_since_ms = now_wall ();
        return;
    }
    b->fm_state = FM_CONNECTING;
    b->fm_since_ms = now_wall ();
    start_listing (b, true); /* the first contact is the first reconcile */
}

void fm_tick (struct broker *b)
{
    int64_t mono = now_mono ();
    broker_report_damage (b);
    b->background_more = false; /* each slice says again if it left work */
    if (mono >= b->next_expire) {
        jobs_expire_quarantine (b);
        b->next_expire = mono + 1000;
    }
    if (mono >= b->next_prune)
        b->next_prune = jobs_prune_history (b, mono);
    fm_steps_wake (b, 0, false); /* waits that ran out */
    broker_events_wake (b, false);
    if (!b->fmc || b->stopping)
        return;
    /* Matching goes on while the session is down: it only writes the
     * store (the outbox waits for the FM). */
    reconcile_step (b);
    if (b->fm_state == FM_DOWN && !b->fm_probe_inflight && mono >= b->fm_next_probe) {
        b->fm_next_probe = 0;
        start_listing (b, true);
        return;
    }
    if (b->fm_state != FM_UP)
        return;
    if (!b->reconcile_inflight && !b->fm_probe_inflight && !b->reconcile &&
        (b->reconcile_wanted || mono >= b->next_reconcile))
        start_listing (b, false);
    if (now_wall () >= b->outbox_due)
        outbox_run (b);
}

/* reconcile.c: reconciliation with the FM's listing (reconcile.h).
 *
 * At start, after every reconnect, every reconcile_interval_s, and on
 * request: every FM job with our "{cluster}-" prefix that is not a live
 * reservation here is deleted (through the outbox); a live reservation
 * that the FM no longer lists becomes "lost"; one with our prefix that
 * this broker has no record of is reported as foreign and left alone
 * (unless reaping).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "background.h"
#include "broker.h"
#include "fmclient.h"
#include "fmsession.h"
#include "metrics.h"
#include "pass.h"
#include "reservations.h"
#include "store.h"
#include "timer.h"
#include "fmids.h"
#include "log.h"
#include "monotime.h"
#include "offloop.h"
#include "outbox.h"
#include "reconcile.h"

/* A listing asked of the FM. */
struct listing {
    struct reconciler *rc;
    int64_t started;
    bool probe;
    bool reap_foreign;
};

struct reconciler {
    const struct fmb_config *cfg;
    struct store *st;
    struct fmc *fmc; /* NULL: VNI-only, no listings */
    struct pass *pass;
    struct timers *timers;
    struct fmsession *fms;
    struct outbox *outbox; /* where orphans' deletes go */
    struct metrics *metrics;
    const bool *stopping;   /* the broker is shutting down */
    struct reconcile *cur;  /* a listing being matched, in slices */
    bool inflight;          /* a listing (not a probe) was asked for */
    bool reap_wanted;       /* an admin asked: the next listing reaps them */
    bool retrying;          /* the last listing failed: its retry is set */
    json_t *foreign_seen;   /* FM ids reported foreign at the last pass */
    struct offloop *reaper; /* frees finished listings off the loop thread */
    struct timer *listing_timer;
    struct background *slices; /* the listing being matched */
    struct reconcile_hooks hooks;
    void *hooks_arg;
    /* The listings out: [0] the periodic one (at most one: inflight), [1]
     * the session's probe (at most one: fmsession_probe_inflight).  Held
     * here rather than allocated per call, since fmc_destroy abandons a
     * call still out at shutdown without its callback. */
    struct listing listings[2];
};

void reconcile_set_hooks (struct reconciler *rc,
                          const struct reconcile_hooks *hooks,
                          void *arg)
{
    rc->hooks = *hooks;
    rc->hooks_arg = arg;
}

/* A reconciliation in progress: the store's unreleased jobs read, then
 * the FM's listing matched against them, a slice at a time
 * (BACKGROUND_SLICE_US each, at most one per loop pass, put off while the
 * pass holds answers: pass_defer_background), so that neither 100,000 FM
 * entries nor the active jobs hold the loop.  (Reading the active jobs in
 * one go took 22-42 ms of the loop at 16,000.  The three tables the scan
 * fills still grow by rehashing, inside one page: not measured past
 * 16,000.)  A slice that does not commit leaves what it added to them:
 * the same again when the scan reads it again, and an entry of 'holding'
 * only ever spares a reservation for a round.  The store may
 * change between slices: whatever the scan did not see as live is read
 * again before anything is done to it, and a job the scan missed is
 * judged lost at the next listing, not this one. */
struct reconcile {
    int64_t listed_at;
    /* The scan: the next page is of jobs in 'scan_state' after
     * 'scan_after'; active ones, then lost ones. */
    enum store_job_state scan_state;
    char scan_after[STORE_JOB_ID_MAX + 1];
    bool scanned;
    const char **fm_ids; /* the listing, taken from fmclient (one allocation) */
    size_t n, pos;
    json_t *holding; /* FM ids of jobs that held or were making a reservation */
    json_t *judged;  /* job id -> FM id: reserved before the listing was asked for */
    /* The FM ids in 'judged' -> whether the first phase saw them listed.
     * (A set of all 100,000 listed ids cost two 10-15 ms slices as it
     * grew, rehashing.) */
    json_t *judged_listed;
    void *judge_at; /* second phase: position in 'judged' */
    bool reap_foreign;
    json_t *foreign_now; /* set of FM ids left as foreign */
    unsigned orphans, foreign, reaped, lost;
    bool done; /* matched to the end (or abandoned) in the current slice */
    /* Where the current slice began: a slice whose pass does not commit
     * is rolled back, and so is the progress it made here. */
    struct {
        enum store_job_state scan_state;
        char scan_after[STORE_JOB_ID_MAX + 1];
        bool scanned;
        size_t pos;
        void *judge_at;
        unsigned orphans, foreign, reaped, lost;
    } slice;
    int64_t resume_at; /* monotonic: after a rewind, not before this */
};

/* On the reaper thread: what was built of the listing (100,000 entries
 * take tens of ms to free).  'foreign_now' may be shared
 * with foreign_seen, so the loop drops it (reconcile_free). */
static void reconcile_free_now (void *arg)
{
    struct reconcile *r = arg;
    free (r->fm_ids);
    json_decref (r->holding);
    json_decref (r->judged);
    json_decref (r->judged_listed);
    free (r);
}

static void reconcile_free (struct reconciler *rc, struct reconcile *r)
{
    if (!r)
        return;
    json_decref (r->foreign_now);
    offloop_free_later (rc->reaper, reconcile_free_now, r);
}

static int scan_unreleased (const struct store_job_brief *j, void *arg)
{
    struct reconcile *r = arg;
    snprintf (r->scan_after, sizeof (r->scan_after), "%s", j->id);
    if (j->hwcoll == STORE_HWCOLL_RESERVED || j->hwcoll == STORE_HWCOLL_RESERVING)
        json_object_set_new (r->holding, j->fm_job_id, json_true ());
    /* Only reservations recorded before the listing was asked for can be
     * judged by it. */
    if (j->state == STORE_JOB_ACTIVE && j->hwcoll == STORE_HWCOLL_RESERVED &&
        j->updated_ms < r->listed_at) {
        json_object_set_new (r->judged, j->id, json_string (j->fm_job_id));
        json_object_set_new (r->judged_listed, j->fm_job_id, json_false ());
    }
    return 0;
}

/* Start a reconciliation with a listing: take its ids.  The store's
 * unreleased jobs are read in the slices, before matching. */
static struct reconcile *reconcile_begin (struct reconciler *rc,
                                          const struct fmc_result *res,
                                          int64_t listed_at,
                                          bool reap_foreign)
{
    struct reconcile *r = calloc (1, sizeof (*r));
    if (!r)
        return NULL;
    r->listed_at = listed_at;
    r->holding = json_object ();
    r->judged = json_object ();
    r->judged_listed = json_object ();
    r->foreign_now = json_object ();
    r->reap_foreign = reap_foreign || rc->cfg->reap_foreign;
    r->fm_ids = fmc_take_job_ids (res);
    r->n = res->njob_ids;
    r->scan_state = store_job_state_next_unreleased (-1);
    if (!r->holding || !r->judged || !r->judged_listed || !r->foreign_now || !r->fm_ids)
        goto nomem;
    return r;
nomem:
    fmb_log (LOG_ERR, "reconcile: out of memory for %zu FM entries", res->njob_ids);
    reconcile_free (rc, r);
    return NULL;
}

/* Does job 'job' hold (or make) the reservation 'fmid' now?  For entries
 * the scan did not see as live: a RUN may have come since. */
static bool live_now (struct reconciler *rc, const char *job, const char *fmid)
{
    struct store_job *j;
    struct fmb_error e;
    if (rc->hooks.reserving && rc->hooks.reserving (rc->hooks_arg, job))
        return true;
    if (store_job_get_brief (rc->st, job, &j, &e) < 0)
        return errno != ENOENT; /* unsure: leave it to the next round */
    bool live =
        store_job_state_unreleased (j->state) &&
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
static int report_foreign (struct reconciler *rc, const char *fmid, struct fmb_error *e)
{
    fmb_log (LOG_WARNING,
             "reconcile: FM reservation %s has this cluster's prefix but this broker "
             "has no record of it; left alone (another broker with cluster_name "
             "'%s'?). fmbroker reconcile --reap-foreign deletes it",
             fmid,
             rc->cfg->cluster_name);
    if (!rc->hooks.event)
        return 0;
    return rc->hooks.event (
        rc->hooks_arg,
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
static int match_entry (struct reconciler *rc,
                        struct reconcile *r,
                        const char *fmid,
                        struct fmb_error *e)
{
    const char *job = fmids_local_job (rc->cfg->cluster_name, fmid);
    if (json_object_get (r->judged_listed, fmid))
        json_object_set_new (r->judged_listed, fmid, json_true ());
    if (!job)
        return 0; /* another cluster's: never ours to touch */
    if (json_object_get (r->holding, fmid) || live_now (rc, job, fmid))
        return 0;
    bool known;
    if (store_job_known (rc->st, job, fmid, &known, e) < 0)
        return -1;
    if (!known) {
        r->foreign++;
        if (!r->reap_foreign) {
            json_object_set_new (r->foreign_now, fmid, json_true ());
            if (!json_object_get (rc->foreign_seen, fmid))
                return report_foreign (rc, fmid, e);
            return 0;
        }
        fmb_log (LOG_NOTICE,
                 "reconcile: deleting FM reservation %s, which this broker has no "
                 "record of (reap_foreign)",
                 fmid);
        r->reaped++;
    }
    if (outbox_queue_job_delete (rc->outbox, fmid, now_wall (), e) < 0)
        return -1;
    r->orphans++;
    return 0;
}

/* Second phase, one job: reserved before the listing was asked for, not
 * listed, and still so now -- the FM lost it. */
static int judge_job (struct reconciler *rc,
                      struct reconcile *r,
                      const char *job,
                      const char *fmid,
                      struct fmb_error *e)
{
    if (json_is_true (json_object_get (r->judged_listed, fmid)))
        return 0;
    if (!rc->hooks.lost)
        return 0;
    int marked = rc->hooks.lost (rc->hooks_arg, job, r->listed_at, e);
    if (marked > 0)
        r->lost++;
    return marked < 0 ? -1 : 0;
}

/* Jobs a page of the scan reads: a few hundred microseconds. */
#define SCAN_PAGE 256

/* The scan's share of a slice, until r->scanned or the slice's end.
 * Matching waits for the whole scan: a job it had not read yet would be
 * judged lost. */
static int scan_slice (struct reconciler *rc,
                       struct reconcile *r,
                       int64_t end,
                       struct fmb_error *e)
{
    while (!r->scanned) {
        int n = store_job_list_unreleased (
            rc->st, r->scan_state, r->scan_after, SCAN_PAGE, scan_unreleased, r, e);
        if (n < 0)
            return -1;
        if (n < SCAN_PAGE) { /* that state's last page */
            int next = store_job_state_next_unreleased (r->scan_state);
            r->scanned = next < 0;
            if (next >= 0)
                r->scan_state = next;
            r->scan_after[0] = '\0';
        }
        if (fmb_monotime_us () >= end)
            break;
    }
    return 0;
}

/* One slice: the scan, then matching; r->done when the listing is matched
 * to the end. */
static int match_slice (struct reconciler *rc, struct reconcile *r, struct fmb_error *e)
{
    int64_t end = fmb_monotime_us () + BACKGROUND_SLICE_US;
    if (scan_slice (rc, r, end, e) < 0)
        return -1;
    if (!r->scanned || fmb_monotime_us () >= end)
        return 0;
    if (!r->judge_at && r->pos < r->n) {
        while (r->pos < r->n) {
            if (match_entry (rc, r, r->fm_ids[r->pos], e) < 0)
                return -1;
            r->pos++;
            if (fmb_monotime_us () >= end) /* an entry may read a cold page */
                return 0;
        }
    }
    if (!r->judge_at)
        r->judge_at = json_object_iter (r->judged);
    while (r->judge_at) {
        if (judge_job (rc,
                       r,
                       json_object_iter_key (r->judge_at),
                       json_string_value (json_object_iter_value (r->judge_at)),
                       e) < 0)
            return -1;
        r->judge_at = json_object_iter_next (r->judged, r->judge_at);
        if (r->judge_at && fmb_monotime_us () >= end)
            return 0;
    }
    r->done = true;
    return 0;
}

static int write_slice (void *arg, struct fmb_error *e)
{
    struct reconciler *rc = arg;
    return match_slice (rc, rc->cur, e);
}

/* The whole listing is matched and committed: metrics, log, and the
 * foreign ids to stay quiet about until they change. */
static void reconcile_finish (struct reconciler *rc, struct reconcile *r)
{
    metrics_add (rc->metrics, METRIC_RECONCILE_RUNS, 1);
    metrics_add (rc->metrics, METRIC_ORPHANS_RELEASED, r->orphans);
    metrics_set (rc->metrics, METRIC_FOREIGN_RESERVATIONS, r->foreign - r->reaped);
    metrics_add (rc->metrics, METRIC_FOREIGN_REAPED, r->reaped);
    json_decref (rc->foreign_seen);
    rc->foreign_seen = json_incref (r->foreign_now);
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
    struct reconciler *rc = arg;
    struct reconcile *r = rc->cur;
    if (!committed) {
        r->scan_state = r->slice.scan_state;
        memcpy (r->scan_after, r->slice.scan_after, sizeof (r->scan_after));
        r->scanned = r->slice.scanned;
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
    metrics_add (rc->metrics, METRIC_RESERVATIONS_LOST, r->lost - r->slice.lost);
    outbox_changed (rc->outbox); /* the orphans found so far go now */
    if (!r->done)
        return;
    reconcile_finish (rc, r);
    reconcile_free (rc, r);
    rc->cur = NULL;
}

/* Run the next slice of a reconciliation, if one is in progress.  A store
 * error abandons it (the next listing starts afresh). */
static void reconcile_step (struct reconciler *rc)
{
    struct reconcile *r = rc->cur;
    struct fmb_error e;
    if (!r || now_mono () < r->resume_at)
        return;
    metrics_add (rc->metrics, METRIC_RECONCILE_SLICES, 1);
    r->slice.scan_state = r->scan_state;
    memcpy (r->slice.scan_after, r->scan_after, sizeof (r->scan_after));
    r->slice.scanned = r->scanned;
    r->slice.pos = r->pos;
    r->slice.judge_at = r->judge_at;
    r->slice.orphans = r->orphans;
    r->slice.foreign = r->foreign;
    r->slice.reaped = r->reaped;
    r->slice.lost = r->lost;
    if (pass_write (rc->pass, write_slice, rc, &e) < 0) {
        broker_log_store_error (NULL, "reconcile", &e);
        reconcile_free (rc, r);
        rc->cur = NULL;
        return;
    }
    if (!pass_open (rc->pass) || pass_on_end (rc->pass, slice_end, rc) < 0)
        slice_end (rc, true); /* no pass to wait for: committed already */
}

/* Is a slice due: a listing being matched, not paused after a rewind? */
static int64_t slice_due (void *arg, int64_t now)
{
    struct reconciler *rc = arg;
    if (!rc->fmc || *rc->stopping || !rc->cur)
        return TIMER_IDLE; /* a new listing wakes it */
    if (now < rc->cur->resume_at)
        return rc->cur->resume_at - now;
    return 0;
}

/* Slices of the reconciliation in progress, a short pause apart so that
 * requests get the loop and the listing is still matched at about a
 * third of the loop's time (BACKGROUND_SLICE_US, BACKGROUND_PAUSE_MS). */
static int64_t match_next_slice (void *arg, int64_t now)
{
    struct reconciler *rc = arg;
    (void)now;
    /* Matching goes on while the session is down: it only writes the
     * store (the outbox waits for the FM). */
    reconcile_step (rc);
    return BACKGROUND_PAUSE_MS; /* idle then if it was the last slice */
}

/* A failed listing is asked for again after LISTING_RETRY_MS; one that
 * would be refused again (FMC_PERMANENT) after the interval, at most
 * LISTING_REFUSED_RETRY_MS. */
#define LISTING_RETRY_MS         5000
#define LISTING_REFUSED_RETRY_MS (300 * 1000)

static void listing_done (const struct fmc_result *res, void *arg)
{
    /* a copy: its slot is free for the next listing from here on */
    const struct listing done = *(const struct listing *)arg, *l = &done;
    struct reconciler *rc = l->rc;
    if (l->probe)
        fmsession_probe_done (rc->fms);
    else
        rc->inflight = false;
    fmsession_note (rc->fms, res);
    rc->retrying = res->status != FMC_OK;
    if (res->status == FMC_OK) {
        /* While one still runs, this listing is not used: ask for a new
         * one when that is done (and keep an admin's request to reap). */
        bool busy = rc->cur != NULL;
        if (!busy) {
            rc->cur = reconcile_begin (rc, res, l->started, l->reap_foreign);
            background_wake (rc->slices, 0);
        } else
            rc->reap_wanted = rc->reap_wanted || l->reap_foreign;
        /* busy: a new listing once that is done */
        timer_set (rc->listing_timer,
                   busy ? 0
                   : rc->cfg->reconcile_interval_s
                       ? (int64_t)rc->cfg->reconcile_interval_s * 1000
                       : TIMER_IDLE);
    } else {
        /* Try again later, not in a loop against an FM that answers errors.
         * An answer that would be refused again (too large, malformed,
         * most 4xx) waits longer, so that a 16 MiB listing is not fetched
         * every 5 s: until the next periodic listing, and at most
         * LISTING_REFUSED_RETRY_MS, also with reconcile_interval_s = 0 --
         * a listing refused at start is not given up on.  An admin's
         * request to reap stays for the next listing. */
        int64_t retry_ms = LISTING_RETRY_MS;
        if (res->status == FMC_PERMANENT) {
            int64_t every = rc->cfg->reconcile_interval_s * 1000LL;
            retry_ms = every > 0 && every < LISTING_REFUSED_RETRY_MS
                           ? every
                           : LISTING_REFUSED_RETRY_MS;
            if (retry_ms < LISTING_RETRY_MS)
                retry_ms = LISTING_RETRY_MS;
        }
        rc->reap_wanted = rc->reap_wanted || l->reap_foreign;
        timer_set (rc->listing_timer, retry_ms);
        /* (a refusal of our credentials is the session's to log, once) */
        if (res->http_status != 0 && res->status != FMC_UNAUTHORIZED)
            fmb_log (LOG_ERR, "reconcile: %s", res->error);
    }
}

static void start_listing (struct reconciler *rc, bool probe)
{
    struct fmb_error e;
    struct listing *l = &rc->listings[probe ? 1 : 0];
    *l = (struct listing){
        .rc = rc,
        .probe = probe,
        .started = now_recorded (),      /* compared with the jobs' updated_ms */
        .reap_foreign = rc->reap_wanted, /* asked before this listing */
    };
    rc->reap_wanted = false;
    if (!probe) /* (the session counts its probes) */
        rc->inflight = true;
    if (fmc_job_list (rc->fmc, listing_done, l, &e) < 0) {
        struct fmc_result res = {
            .status = FMC_RETRYABLE, .op = FMC_OP_LIST, .error = e.text};
        listing_done (&res, l);
    }
}

void reconcile_now (struct reconciler *rc, bool reap_foreign)
{
    if (reap_foreign)
        rc->reap_wanted = true;
    timer_wake (rc->listing_timer, 0);
}

void reconcile_reschedule (struct reconciler *rc, unsigned interval_s)
{
    if (rc->retrying) /* a failed listing's retry keeps its time */
        return;
    timer_set (rc->listing_timer, interval_s ? (int64_t)interval_s * 1000 : TIMER_IDLE);
}

/* A listing when one is wanted (an admin, a new session, a RUN whose
 * reservation outlived its job) or the interval came. */
static int64_t listing_timer (void *arg, int64_t now)
{
    struct reconciler *rc = arg;
    (void)now;
    if (!rc->fmc || *rc->stopping || fmsession_state (rc->fms) != FM_UP)
        return TIMER_IDLE; /* the session coming up wakes it */
    if (rc->inflight || fmsession_probe_inflight (rc->fms) || rc->cur)
        return 250; /* after the one in progress */
    start_listing (rc, false);
    return TIMER_IDLE; /* its answer says when the next is due */
}

struct reconciler *reconcile_create (const struct fmb_config *cfg,
                                     struct store *st,
                                     struct fmc *fmc,
                                     struct pass *pass,
                                     struct timers *timers,
                                     struct fmsession *fms,
                                     struct outbox *outbox,
                                     struct metrics *metrics,
                                     const bool *stopping)
{
    struct reconciler *rc = calloc (1, sizeof (*rc));
    if (!rc)
        return NULL;
    *rc = (struct reconciler){.cfg = cfg,
                              .st = st,
                              .fmc = fmc,
                              .pass = pass,
                              .timers = timers,
                              .fms = fms,
                              .outbox = outbox,
                              .metrics = metrics,
                              .stopping = stopping};
    if (offloop_create (&rc->reaper) < 0) {
        free (rc);
        return NULL;
    }
    static const struct background_ops slices = {slice_due, match_next_slice};
    rc->slices = background_create (
        rc->pass, rc->timers, "reconcile slices", TIMER_IDLE, &slices, rc);
    rc->listing_timer =
        timer_add (rc->timers, "FM listing", TIMER_IDLE, listing_timer, rc);
    return rc;
}

void reconcile_destroy (struct reconciler *rc)
{
    if (!rc)
        return;
    reconcile_free (rc, rc->cur);
    background_destroy (rc->slices);
    offloop_destroy (rc->reaper); /* joins: everything handed to it is freed */
    json_decref (rc->foreign_seen);
    free (rc);
}

static void orphan_made (void *arg)
{
    reconcile_now (arg, false);
}

static void probe (void *arg)
{
    start_listing (arg, true);
}

void reconcile_start (struct reconciler *rc, struct reservations *rsv)
{
    fmsession_wake_on_up (rc->fms, rc->listing_timer); /* a new session: reconcile */
    reservations_on_orphan (rsv, orphan_made, rc);
    fmsession_wake_on_up (rc->fms, outbox_timer_of (rc->outbox));
    /* the first contact is the first reconcile */
    fmsession_start (rc->fms, rc->fmc != NULL, probe, rc);
}

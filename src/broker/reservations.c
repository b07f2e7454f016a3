/* reservations.c: the FM reservations in flight (reservations.h).
 *
 * A RUN whose job may use hardware collectives commits its intent (the
 * job "reserving") and starts a reservation here within
 * reserve_timeout_ms: for a job that had no row in the store (or only a
 * released one), the POST at once (it leaves when the intent's pass
 * commits), and a GET only if the FM refuses it; for one an earlier
 * intent was committed for (a repeated RUN whose outcome was not
 * recorded, a crash), GET first, since that earlier POST may have made
 * it.  Its outcome is recorded by
 * the jobs' transition (reservations_ops.record) and answered to every
 * RUN that waits for it.  A reservation whose intent's pass did not
 * commit is abandoned (no POST); what the FM may have made anyway is an
 * orphan for reconciliation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "fmsession.h"
#include "httpreq.h"
#include "pass.h"
#include "store.h"
#include "waitq.h"
#include "fmids.h"
#include "log.h"
#include "reservations.h"

struct reservations {
    const struct fmb_config *cfg;
    struct store *st;
    struct fmc *fmc; /* NULL: VNI-only (recovery marks them unavailable) */
    struct pass *pass;
    struct fmsession *fms;
    struct reservation *list;
    struct reservations_ops ops;
    void *ops_arg;
    void (*orphan) (void *arg);
    void *orphan_arg;
};

struct reservation {
    struct reservation *next;
    struct reservations *rs;
    char job[JOB_ID_MAX + 1];
    struct waitq waiters; /* RUNs waiting for the outcome */
    bool aborted; /* the pass that wrote its intent did not commit: no job owns it */
    /* fmc_job_reserve may answer before it returns (GET first: a call that
     * fails at once, an OAuth credential that cannot be read): its caller
     * frees it */
    bool starting, finished;
};

static struct reservation *find_reservation (struct reservations *rs, const char *job)
{
    for (struct reservation *r = rs->list; r; r = r->next)
        if (!r->aborted && strcmp (r->job, job) == 0)
            return r;
    return NULL;
}

bool reservations_busy (struct reservations *rs, const char *job)
{
    return rs && find_reservation (rs, job) != NULL;
}

static void reply_waiter (struct waiter *w, void *arg)
{
    struct reservation *rv = arg;
    struct http_problem p;
    waitq_remove (w);
    if (rv->rs->ops.reply (rv->rs->ops_arg, w->req, rv->job, w->key ? 201 : 200, &p) <
        0)
        http_reply_failure (w->req, &p);
}

static void unlink_reservation (struct reservations *rs, struct reservation *rv)
{
    for (struct reservation **pp = &rs->list; *pp; pp = &(*pp)->next)
        if (*pp == rv) {
            *pp = rv->next;
            return;
        }
}

struct outcome {
    struct reservation *rv;
    const struct fmc_result *res;
};

static int write_outcome (void *arg, struct fmb_error *e)
{
    struct outcome *o = arg;
    return o->rv->rs->ops.record (o->rv->rs->ops_arg, o->rv->job, o->res, e);
}

static void free_reservation (struct reservation *rv)
{
    unlink_reservation (rv->rs, rv);
    pass_forget (rv->rs->pass, rv);
    free (rv);
}

static void reserve_done (const struct fmc_result *res, void *arg)
{
    struct reservation *rv = arg;
    struct reservations *rs = rv->rs;
    struct fmb_error e;
    fmsession_note (rs->fms, res);
    if (rv->aborted) {
        /* Its job was never committed: what the FM made is an orphan
         * unless the RM ran the job again meanwhile, which reconciliation
         * tells apart. */
        if (res->status == FMC_OK && rv->rs->orphan)
            rv->rs->orphan (rv->rs->orphan_arg);
        free_reservation (rv);
        return;
    }
    struct outcome o = {rv, res};
    if (pass_write (rs->pass, write_outcome, &o, &e) < 0)
        broker_log_store_error (NULL, rv->job, &e);
    /* Ended: out of the list before its RUNs are answered, so that a job
     * left 'reserving' (its outcome not written) is answered 503 by
     * ops.reply, as when it ends at once, and a repeated RUN starts the
     * reservation again (the FM's GET finds one this call may have made). */
    unlink_reservation (rv->rs, rv);
    waitq_each (&rv->waiters, reply_waiter, rv);
    if (rv->starting)
        rv->finished = true;
    else
        free_reservation (rv);
}

/* The pass that wrote this reservation's intent did not commit: its RUNs
 * get 503 and the reservation is abandoned (no POST; if one had left
 * already, reconciliation reaps what it made). */
static void reply_uncommitted (struct waiter *w, void *arg)
{
    const char *why;
    bool failing = pass_commits_failing (arg, &why);
    waitq_remove (w);
    http_reply_uncommitted (w->req, failing ? why : NULL);
}

static void abort_reservation (void *arg)
{
    struct reservation *rv = arg;
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    if (rv->aborted)
        return;
    rv->aborted = true; /* a RUN repeated from now on starts afresh */
    fmb_log (
        LOG_ERR, "job %s: its RUN was not committed; the RM must repeat it", rv->job);
    fmids_of_job (rv->rs->cfg->cluster_name, rv->job, fmid, sizeof (fmid));
    fmc_job_reserve_abandon (rv->rs->fmc, fmid);
    waitq_each (&rv->waiters, reply_uncommitted, rv->rs->pass);
}

/* Start the FM reservation of a job whose intent is committed ('is_new':
 * by the pass now open, the job having no row before it, or only a
 * released one: the POST goes first). */
static struct reservation *start_reservation (struct reservations *rs,
                                              const char *job,
                                              bool is_new)
{
    struct fmb_error e;
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    struct reservation *rv = calloc (1, sizeof (*rv));
    if (!rv)
        return NULL;
    rv->rs = rs;
    snprintf (rv->job, sizeof (rv->job), "%s", job);
    rv->next = rs->list;
    rs->list = rv;
    fmids_of_job (rs->cfg->cluster_name, job, fmid, sizeof (fmid));
    rv->starting = true;
    int rc = fmc_job_reserve (rs->fmc,
                              fmid,
                              fmb_config_mcast_limit (rs->cfg),
                              rs->cfg->fm_reserve_timeout_ms,
                              is_new ? FMC_RESERVE_POST_FIRST : FMC_RESERVE_GET_FIRST,
                              reserve_done,
                              rv,
                              &e);
    rv->starting = false;
    if (rc < 0 && !rv->finished) {
        struct fmc_result res = {
            .status = FMC_RETRYABLE, .op = FMC_OP_CREATE, .error = e.text};
        reserve_done (&res, rv);
        return NULL;
    }
    if (rv->finished) { /* answered already: the caller reads the store */
        free_reservation (rv);
        return NULL;
    }
    /* outside a pass (recovery at start) its intent is an earlier run's */
    pass_on_abort (rs->pass, abort_reservation, rv);
    return rv;
}

struct collect_ids {
    char (*ids)[JOB_ID_MAX + 1];
    size_t n, cap;
};

static int collect_reserving (const char *id, void *arg)
{
    struct collect_ids *c = arg;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        void *p = realloc (c->ids, ncap * sizeof (*c->ids));
        if (!p)
            return -1;
        c->ids = p;
        c->cap = ncap;
    }
    snprintf (c->ids[c->n++], JOB_ID_MAX + 1, "%s", id);
    return 0;
}

/* Reads the interrupted reservations through jobs_by_state: start-up
 * costs the same with ten or ten million released jobs stored. */
void reservations_recover (struct reservations *rs)
{
    struct collect_ids c = {0};
    struct fmb_error e;
    if (store_job_list_reserving (rs->st, collect_reserving, &c, &e) < 0)
        broker_log_store_error (NULL, "recovery", &e);
    for (size_t i = 0; i < c.n; i++) {
        if (find_reservation (rs, c.ids[i]))
            continue;
        if (!rs->fmc) {
            fmb_log (
                LOG_WARNING,
                "job %s: was reserving hardware collectives, but no fabric manager "
                "is configured now; marking unavailable",
                c.ids[i]);
            store_job_set_hwcoll (rs->st,
                                  c.ids[i],
                                  STORE_HWCOLL_UNAVAILABLE,
                                  "fabric manager no longer configured",
                                  0,
                                  NULL,
                                  &e);
            continue;
        }
        fmb_log (LOG_NOTICE,
                 "job %s: resolving a reservation interrupted by a restart",
                 c.ids[i]);
        start_reservation (rs, c.ids[i], false);
    }
    free (c.ids);
}

static void reply_shutting_down (struct waiter *w, void *arg)
{
    (void)arg;
    waitq_remove (w);
    http_reply_problem (w->req, 503, "broker shutting down; repeat the request");
}

void reservations_shutdown (struct reservations *rs)
{
    /* The FM calls are abandoned; their jobs stay "reserving" in the store
     * and are resolved at the next start.  A call may still complete in
     * the last passes: the reservation stays until reservations_destroy. */
    for (struct reservation *rv = rs->list; rv; rv = rv->next) {
        rv->aborted = true;
        waitq_each (&rv->waiters, reply_shutting_down, NULL);
    }
}

void reservations_destroy (struct reservations *rs)
{
    if (!rs)
        return;
    while (rs->list) {
        struct reservation *rv = rs->list;
        rs->list = rv->next;
        free (rv);
    }
    free (rs);
}

struct reservations *reservations_create (const struct fmb_config *cfg,
                                          struct store *st,
                                          struct fmc *fmc,
                                          struct pass *pass,
                                          struct fmsession *fms)
{
    struct reservations *rs = calloc (1, sizeof (*rs));
    if (!rs)
        return NULL;
    rs->cfg = cfg;
    rs->st = st;
    rs->fmc = fmc;
    rs->pass = pass;
    rs->fms = fms;
    return rs;
}

void reservations_set_ops (struct reservations *rs,
                           const struct reservations_ops *ops,
                           void *arg)
{
    rs->ops = *ops;
    rs->ops_arg = arg;
}

void reservations_on_orphan (struct reservations *rs, void (*fn) (void *arg), void *arg)
{
    rs->orphan = fn;
    rs->orphan_arg = arg;
}

bool reservations_pending (const struct reservations *rs)
{
    return rs->list != NULL;
}

bool reservations_wait (struct reservations *rs, const char *job, struct http_req *req)
{
    struct reservation *rv = find_reservation (rs, job);
    if (!rv)
        return false;
    http_wait (req)->key = 0; /* a repeated RUN: 200 */
    waitq_add (&rv->waiters, http_wait (req));
    http_suspend (req);
    return true;
}

bool reservations_start (struct reservations *rs,
                         const char *job,
                         struct http_req *req,
                         bool created)
{
    struct reservation *rv = start_reservation (rs, job, created);
    if (!rv) /* completed (as unavailable) already */
        return false;
    http_wait (req)->key = created; /* 201, or 200 for a repeated RUN */
    waitq_add (&rv->waiters, http_wait (req));
    http_suspend (req);
    return true;
}

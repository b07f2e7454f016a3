/* jobs.c: the jobs' wiring (jobs.h): the hooks by which reservations,
 * the outbox and reconciliation reach the job state transitions (in
 * jobs_run.c and jobs_cleanup.c), so that none of them calls back into
 * the files that call them.
 */
#include "broker.h"
#include "fmclient.h"
#include "httpreq.h"
#include "outbox.h"
#include "pass.h"
#include "reconcile.h"
#include "reservations.h"
#include "jobs.h"

/* Does a reserve call for this job run right now?  ('arg': the broker,
 * as for every hook here.) */
static bool jobs_reserving (void *arg, const char *job)
{
    struct broker *b = arg;
    return reservations_busy (b->rsv, job);
}

static int job_deleted (void *arg, const char *job, struct fmb_error *e)
{
    return jobs_released (arg, job, e);
}

static int job_lost (void *arg, const char *job, int64_t listed_at, struct fmb_error *e)
{
    return jobs_lost (arg, job, listed_at, e);
}

/* The outbox's and reconciliation's events, in the event log. */
static int append_event (
    void *arg, const char *type, const char *job, json_t *detail, struct fmb_error *e)
{
    return broker_event (arg, type, job, detail, e);
}

/* The reservations in flight record their outcome and answer their RUNs
 * through these ('arg': the broker). */
static int record_outcome (void *arg,
                           const char *job,
                           const struct fmc_result *res,
                           struct fmb_error *e)
{
    return jobs_record_outcome (arg, job, res, e);
}

static int reply_run (void *arg,
                      struct http_req *req,
                      const char *job,
                      int status,
                      struct http_problem *p)
{
    return jobs_reply (arg, req, job, status, p);
}

/* RUNs waiting on their FM calls: background slices let them finish
 * first (the FM's answer would wait for the slice and its commit).  A
 * RUN every 20 ms during retention of 250,000 jobs: p99 6.5-9.8 ms with
 * this, 8.7-12.1 without (bench 5 at 1M, 4 and 5 runs).  (Aborted
 * reservations whose call is still out count too, for 25 ms at most.) */
static bool runs_in_flight (void *arg)
{
    return reservations_pending (arg);
}

void jobs_start (struct broker *b)
{
    /* The outbox and reconciliation see a reservation's delete finish and
     * a reservation lost; the transitions are here. */
    static const struct outbox_hooks outbox_hooks = {
        .reserving = jobs_reserving,
        .job_deleted = job_deleted,
        .event = append_event,
    };
    static const struct reconcile_hooks reconcile_hooks = {
        .reserving = jobs_reserving,
        .lost = job_lost,
        .event = append_event,
    };
    /* and the reservations in flight record and answer through these */
    static const struct reservations_ops reservations_ops = {record_outcome, reply_run};
    reservations_set_ops (b->rsv, &reservations_ops, b);
    pass_set_foreground (b->pass, runs_in_flight, b->rsv);
    outbox_set_hooks (b->outbox, &outbox_hooks, b);
    reconcile_set_hooks (b->rc, &reconcile_hooks, b);
}

/* reserve.c: fmc_job_reserve, the idempotent reservation RUN uses:
 * GET then POST on 404, or POST first; a GET after a refused POST.  Made
 * of the calls in calls.c, each a request of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_calls.h"
#include "fmc_engine.h"
#include "fmc_request.h"
#include "monotime.h"

/* ---- reserve: GET then POST on 404, or POST first; a GET after a ----
 * ---- refused POST --------------------------------------------------- */

enum reserve_stage { RESERVE_GET, RESERVE_POST, RESERVE_GET_AFTER_POST };

struct reserve {
    struct fmc *fmc;
    char id[257];
    unsigned mcast_limit;
    int64_t deadline;
    enum reserve_stage stage;
    unsigned calls; /* made so far: the first is the caller's, not a follow-up */
    bool abandoned; /* fmc_job_reserve_abandon: no POST any more */
    /* The POST's answer, when a GET after it looks for the job: it stands
     * unless the GET finds the job (its reason is not to be lost). */
    enum fmc_status refused_status;
    long refused_http;
    char refused_error[FMC_ERROR_MAX];
    fmc_done_f cb;
    void *arg;
};

static void reserve_step (const struct fmc_result *res, void *arg);

static int reserve_next (struct reserve *rv, enum fmc_op op, struct fmb_error *error)
{
    struct fmc_req *r;
    char path[512];
    if (op == FMC_OP_CREATE) {
        char *body = fmc_create_body (rv->id, rv->mcast_limit);
        r = body ? fmc_req_new (rv->fmc,
                                FMC_OP_CREATE,
                                "POST",
                                FMC_JOBS_PATH,
                                body,
                                reserve_step,
                                rv)
                 : NULL;
    } else {
        snprintf (path, sizeof (path), FMC_JOBS_PATH "/%s", rv->id);
        r = fmc_req_new (rv->fmc, FMC_OP_GET, "GET", path, NULL, reserve_step, rv);
    }
    if (r) {
        r->deadline = rv->deadline;
        r->arg_free = free;
    }
    /* A POST that follows a GET's answer is not held: the caller let the
     * reservation go when it submitted the first call.  A POST that comes
     * first is, like any change, until the caller's intent commits. */
    return fmc_req_submit (r, rv->calls++ > 0, error);
}

/* Did the FM answer the POST with a refusal that may mean it holds the
 * job already?  What the real FM answers to a duplicate create is not
 * known (Slurm only saw it fail), so any answer but 2xx and auth
 * (401/403: the GET would meet the same).  Not a call that got no
 * answer: the GET would get none either. */
static bool create_refused (const struct fmc_result *res)
{
    long h = res->http_status;
    return h >= 300 && h != 401 && h != 403;
}

static void reserve_finish (struct reserve *rv, const struct fmc_result *res)
{
    rv->cb (res, rv->arg);
    free (rv);
}

/* The GET after a refused POST: the job it finds, else the POST's answer
 * with what became of the GET ('get_error'; 'get' when it was made).  A
 * GET that got no answer says so in the result (http_status 0): the FM
 * may be down. */
static void reserve_after_refusal (struct reserve *rv,
                                   const struct fmc_result *get,
                                   const char *get_error)
{
    if (get && get->status == FMC_OK) {
        reserve_finish (rv, get);
        return;
    }
    char text[2 * FMC_ERROR_MAX];
    snprintf (text,
              sizeof (text),
              "%s (the GET after it: %s)",
              rv->refused_error,
              get && get->status == FMC_NOT_FOUND ? "no such job" : get_error);
    struct fmc_result out = {.status = rv->refused_status,
                             .op = FMC_OP_CREATE,
                             .http_status = rv->refused_http,
                             .error = text,
                             .mcast_limit = -1};
    if (get) {
        out.elapsed_ms = get->elapsed_ms;
        if (get->http_status == 0 && !get->unsent) { /* no answer */
            out.status = get->status;
            out.http_status = 0;
        }
    }
    reserve_finish (rv, &out);
}

static void reserve_step (const struct fmc_result *res, void *arg)
{
    struct reserve *rv = arg;
    struct fmb_error e;
    enum fmc_op next = FMC_OP_TOKEN; /* none */
    if (rv->stage == RESERVE_GET_AFTER_POST) {
        reserve_after_refusal (rv, res, res->error);
        return;
    }
    if (rv->stage == RESERVE_GET && res->status == FMC_NOT_FOUND)
        next = FMC_OP_CREATE;
    else if (rv->stage == RESERVE_POST && create_refused (res)) {
        next = FMC_OP_GET; /* made meanwhile, or before: the GET finds it */
        rv->refused_status = res->status;
        rv->refused_http = res->http_status;
        snprintf (rv->refused_error, sizeof (rv->refused_error), "%s", res->error);
    }
    if (next == FMC_OP_CREATE && rv->abandoned) {
        struct fmc_result stop = {.status = FMC_NOT_SENT,
                                  .op = FMC_OP_CREATE,
                                  .error = "not sent: the reservation was abandoned",
                                  .mcast_limit = -1};
        reserve_finish (rv, &stop);
        return;
    }
    if (next != FMC_OP_TOKEN) {
        rv->stage = next == FMC_OP_CREATE ? RESERVE_POST : RESERVE_GET_AFTER_POST;
        if (reserve_next (rv, next, &e) == 0)
            return;
        if (rv->stage == RESERVE_GET_AFTER_POST) {
            reserve_after_refusal (rv, NULL, e.text);
            return;
        }
        struct fmc_result fail = {.status = FMC_RETRYABLE,
                                  .op = FMC_OP_RESERVE,
                                  .error = e.text,
                                  .mcast_limit = -1};
        reserve_finish (rv, &fail);
        return;
    }
    struct fmc_result out = *res;
    out.created = rv->stage == RESERVE_POST && res->status == FMC_OK;
    reserve_finish (rv, &out);
}

int fmc_job_reserve (struct fmc *fmc,
                     const char *fm_job_id,
                     unsigned mcast_limit,
                     unsigned deadline_ms,
                     enum fmc_reserve_order order,
                     fmc_done_f cb,
                     void *arg,
                     struct fmb_error *error)
{
    if (fmc_check_id (fm_job_id, error) < 0)
        return -1;
    struct reserve *rv = calloc (1, sizeof (*rv));
    if (!rv) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    rv->fmc = fmc;
    snprintf (rv->id, sizeof (rv->id), "%s", fm_job_id);
    rv->mcast_limit = mcast_limit;
    rv->deadline = fmb_monotime_ms () + deadline_ms;
    /* A POST first waits for the caller's commit (fmc_hold).  Not holding,
     * it would leave at once, before an intent that may not be committed
     * (a caller's bug): then GET first, which is always safe. */
    rv->stage =
        order == FMC_RESERVE_POST_FIRST && fmc->holding ? RESERVE_POST : RESERVE_GET;
    rv->cb = cb;
    rv->arg = arg;
    /* From here the request owns rv; only a failure to even create the
     * request leaves it with us. */
    if (reserve_next (
            rv, rv->stage == RESERVE_POST ? FMC_OP_CREATE : FMC_OP_GET, error) < 0) {
        free (rv);
        return -1;
    }
    return 0;
}

int fmc_job_reserve_abandon (struct fmc *fmc, const char *fm_job_id)
{
    int n = 0;
    for (struct fmc_req *r = fmc->all; r; r = r->all_next) {
        struct reserve *rv = r->cb == reserve_step ? r->arg : NULL;
        if (rv && strcmp (rv->id, fm_job_id) == 0 && !rv->abandoned) {
            rv->abandoned = true;
            n++;
        }
    }
    return n;
}

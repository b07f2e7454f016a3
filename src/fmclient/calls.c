/* calls.c: the FM dialect's requests: each call's method, path under
 * FMC_JOBS_PATH and JSON body, and the job ids allowed in a path.  A new
 * FM call goes here (and its answer in reply.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_calls.h"
#include "fmc_engine.h"
#include "fmc_request.h"

/* ---- operations ---------------------------------------------------- */

int fmc_check_id (const char *id, struct fmb_error *error)
{
    /* Ids go into the URL path as they are: allow what the broker's job
     * ids and cluster names allow, nothing that needs escaping. */
    size_t n = strlen (id);
    if (n == 0 || n > 256) {
        errno = EINVAL;
        return fmb_errorf (error, "FM job id must be 1..256 bytes");
    }
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-')) {
            errno = EINVAL;
            return fmb_errorf (
                error, "FM job id '%.64s': only [A-Za-z0-9._-] allowed", id);
        }
    return 0;
}

static int job_call (struct fmc *fmc,
                     enum fmc_op op,
                     const char *method,
                     const char *id,
                     char *body,
                     fmc_done_f cb,
                     void *arg,
                     struct fmb_error *error)
{
    char path[512];
    if (id && fmc_check_id (id, error) < 0) {
        free (body);
        return -1;
    }
    snprintf (path, sizeof (path), FMC_JOBS_PATH "%s%s", id ? "/" : "", id ? id : "");
    return fmc_req_submit (
        fmc_req_new (fmc, op, method, path, body, cb, arg), false, error);
}

char *fmc_create_body (const char *fm_job_id, unsigned mcast_limit)
{
    json_t *o = json_pack (
        "{s:s, s:I}", "jobID", fm_job_id, "mcastLimit", (json_int_t)mcast_limit);
    char *body = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    return body;
}

int fmc_job_get (struct fmc *fmc,
                 const char *fm_job_id,
                 fmc_done_f cb,
                 void *arg,
                 struct fmb_error *error)
{
    return job_call (fmc, FMC_OP_GET, "GET", fm_job_id, NULL, cb, arg, error);
}

int fmc_probe (struct fmc *fmc,
               const char *fm_job_id,
               fmc_done_f cb,
               void *arg,
               struct fmb_error *error)
{
    return job_call (fmc, FMC_OP_PROBE, "GET", fm_job_id, NULL, cb, arg, error);
}

int fmc_job_create (struct fmc *fmc,
                    const char *fm_job_id,
                    unsigned mcast_limit,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    if (fmc_check_id (fm_job_id, error) < 0)
        return -1;
    char *body = fmc_create_body (fm_job_id, mcast_limit);
    if (!body) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    char path[] = FMC_JOBS_PATH;
    return fmc_req_submit (
        fmc_req_new (fmc, FMC_OP_CREATE, "POST", path, body, cb, arg), false, error);
}

int fmc_job_delete_step (struct fmc *fmc,
                         const char *fm_job_id,
                         const char *step_id,
                         fmc_done_f cb,
                         void *arg,
                         struct fmb_error *error)
{
    json_t *o = json_pack ("{s:{s:n}}", "jobSteps", step_id);
    char *body = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    if (!body) {
        errno = EINVAL;
        return fmb_errorf (error, "step id must be valid UTF-8");
    }
    return job_call (fmc, FMC_OP_PATCH, "PATCH", fm_job_id, body, cb, arg, error);
}

int fmc_job_delete (struct fmc *fmc,
                    const char *fm_job_id,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    return job_call (fmc, FMC_OP_DELETE, "DELETE", fm_job_id, NULL, cb, arg, error);
}

int fmc_job_list (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error)
{
    char path[] = FMC_JOBS_PATH "/"; /* with the slash, as the FM lists it */
    return fmc_req_submit (
        fmc_req_new (fmc, FMC_OP_LIST, "GET", path, NULL, cb, arg), false, error);
}

int fmc_login (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error)
{
    /* Forget any token; the no-op call waits for a fresh one (with basic
     * or none it completes at once). */
    fmc->token_refresh_at = 0;
    return fmc_req_submit (
        fmc_req_new (fmc, FMC_OP_LOGIN, "POST", "(login)", NULL, cb, arg),
        false,
        error);
}

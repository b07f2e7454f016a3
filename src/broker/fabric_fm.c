/* fabric_fm.c: the fabric interface over the HPE fabric manager client. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "fmclient.h"

struct fabric {
    struct fmc *fmc;
    char app_url[FMB_CFG_PATH_MAX + 64];
    fabric_done_f observer;
    void *observer_arg;
};

struct call {
    fabric_done_f cb;
    void *arg;
};

int fabric_create (const struct fmb_config *cfg,
                   struct fabric **ret,
                   struct fmb_error *error)
{
    *ret = NULL;
    if (!cfg->fm_url[0])
        return 0;
    struct fabric *f = calloc (1, sizeof (*f));
    if (!f)
        return fmb_errorf (error, "out of memory");
    struct fmc_config fc = {
        .url = cfg->fm_url,
        .auth = cfg->fm_auth,
        .auth_dir = fmb_config_auth_dir (cfg),
        .ca_file = cfg->fm_ca_file,
        .mtls_cert = cfg->fm_mtls_cert,
        .mtls_key = cfg->fm_mtls_key,
        .insecure = cfg->fm_insecure,
        .timeout_ms = cfg->fm_timeout_ms,
        .max_connections = cfg->fm_max_connections,
    };
    if (fmc_create (&fc, &f->fmc, error) < 0) {
        free (f);
        return fmb_error_prefix (error, "[fabric_manager]");
    }
    snprintf (f->app_url,
              sizeof (f->app_url),
              "%s/fabric/collectives/multicasts",
              cfg->fm_url);
    *ret = f;
    return 0;
}

void fabric_destroy (struct fabric *f)
{
    if (f) {
        fmc_destroy (f->fmc);
        free (f);
    }
}

const char *fabric_app_url (struct fabric *f)
{
    return f->app_url;
}

static void to_fabric_result (const struct fmc_result *r, struct fabric_result *out)
{
    struct fabric_result res = {
        .status = (enum fabric_status)r->status, /* same order by design */
        .op = r->op,
        .http_status = r->http_status,
        .elapsed_ms = r->elapsed_ms,
        .error = r->error,
        .token = r->session_token,
        .created = r->created,
        .job_ids = r->job_ids,
        .njob_ids = r->njob_ids,
    };
    *out = res;
}

static void observe (const struct fmc_result *r, void *arg)
{
    struct fabric *f = arg;
    struct fabric_result res;
    to_fabric_result (r, &res);
    f->observer (&res, f->observer_arg);
}

void fabric_set_observer (struct fabric *f, fabric_done_f fn, void *arg)
{
    f->observer = fn;
    f->observer_arg = arg;
    fmc_set_observer (f->fmc, fn ? observe : NULL, f);
}

static void done (const struct fmc_result *r, void *arg)
{
    struct call *c = arg;
    struct fabric_result res;
    to_fabric_result (r, &res);
    fabric_done_f cb = c->cb;
    void *cbarg = c->arg;
    free (c);
    cb (&res, cbarg);
}

static struct call *call_new (fabric_done_f cb, void *arg, struct fmb_error *error)
{
    struct call *c = malloc (sizeof (*c));
    if (!c) {
        errno = ENOMEM;
        fmb_errorf (error, "out of memory");
        return NULL;
    }
    c->cb = cb;
    c->arg = arg;
    return c;
}

/* Wrap one fmclient call: the call record is freed by done() or here. */
#define WRAP(expr)                                  \
    do {                                            \
        struct call *c = call_new (cb, arg, error); \
        if (!c)                                     \
            return -1;                              \
        if ((expr) < 0) {                           \
            free (c);                               \
            return -1;                              \
        }                                           \
        return 0;                                   \
    } while (0)

int fabric_reserve (struct fabric *f,
                    const char *fm_job_id,
                    unsigned mcast_limit,
                    unsigned deadline_ms,
                    fabric_done_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    WRAP (
        fmc_job_reserve (f->fmc, fm_job_id, mcast_limit, deadline_ms, done, c, error));
}

void fabric_reserve_abandon (struct fabric *f, const char *fm_job_id)
{
    fmc_job_reserve_abandon (f->fmc, fm_job_id);
}

int fabric_release_job (struct fabric *f,
                        const char *fm_job_id,
                        fabric_done_f cb,
                        void *arg,
                        struct fmb_error *error)
{
    WRAP (fmc_job_delete (f->fmc, fm_job_id, done, c, error));
}

int fabric_release_step (struct fabric *f,
                         const char *fm_job_id,
                         const char *step_id,
                         fabric_done_f cb,
                         void *arg,
                         struct fmb_error *error)
{
    WRAP (fmc_job_delete_step (f->fmc, fm_job_id, step_id, done, c, error));
}

int fabric_list (struct fabric *f, fabric_done_f cb, void *arg, struct fmb_error *error)
{
    WRAP (fmc_job_list (f->fmc, done, c, error));
}

int fabric_login (struct fabric *f,
                  fabric_done_f cb,
                  void *arg,
                  struct fmb_error *error)
{
    WRAP (fmc_login (f->fmc, done, c, error));
}

int fabric_pollfds (struct fabric *f, struct pollfd *fds, int max)
{
    return fmc_pollfds (f->fmc, fds, max);
}

int fabric_timeout_ms (struct fabric *f)
{
    return fmc_timeout_ms (f->fmc);
}

void fabric_process (struct fabric *f, const struct pollfd *fds, int n)
{
    fmc_process (f->fmc, fds, n);
}

void fabric_hold (struct fabric *f, bool on)
{
    fmc_hold (f->fmc, on);
}

void fabric_start_held (struct fabric *f)
{
    fmc_start_held (f->fmc);
}

void fabric_drop_held (struct fabric *f)
{
    fmc_drop_held (f->fmc);
}

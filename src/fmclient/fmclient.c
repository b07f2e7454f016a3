/* fmclient.c: FM calls over one libcurl multi handle; see fmclient.h.
 *
 * A call is a struct fmc_req.  With OAuth it first waits in 'waiting'
 * until a valid token exists (one token fetch at a time serves them all),
 * then runs as a curl easy handle on the multi.  Completion classifies the
 * answer and calls back.  The multi's socket and timer callbacks keep a
 * table of what to poll, so the caller's loop needs no curl knowledge.
 *
 * This file is the client's lifetime (fmc_create, fmc_destroy) and its
 * names; src/fmclient/README maps the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_engine.h"
#include "fmc_request.h"
#include "fmc_session.h"

const char *fmc_op_name (enum fmc_op op)
{
    static const char *const names[] = {
#define FMC_OP_NAME(name, text) [FMC_OP_##name] = text,
        FMC_OPS (FMC_OP_NAME)
#undef FMC_OP_NAME
            [FMC_OP_RESERVE] = "reserve",
    };
    return (unsigned)op < sizeof (names) / sizeof (names[0]) ? names[op] : "?";
}

const char *fmc_status_name (enum fmc_status s)
{
    switch (s) {
    case FMC_OK:
        return "ok";
    case FMC_NOT_FOUND:
        return "not_found";
    case FMC_RETRYABLE:
        return "retryable";
    case FMC_PERMANENT:
        return "permanent";
    case FMC_UNAUTHORIZED:
        return "unauthorized";
    case FMC_NOT_SENT:
        return "not sent";
    }
    return "?";
}

/* ---- lifetime ------------------------------------------------------ */

static char *dup_or_null (const char *s)
{
    return s && s[0] ? strdup (s) : NULL;
}

int fmc_create (const struct fmc_config *cfg, struct fmc **ret, struct fmb_error *error)
{
    if (fmc_engine_global_init (error) < 0)
        return -1;
    if (!cfg->url ||
        (strncmp (cfg->url, "http://", 7) && strncmp (cfg->url, "https://", 8))) {
        errno = EINVAL;
        return fmb_errorf (error, "fabric_manager.url: not an http(s) URL");
    }
    struct fmc *fmc = calloc (1, sizeof (*fmc));
    if (!fmc)
        return fmb_errorf (error, "out of memory");
    fmc->cfg = *cfg;
    fmc->timer_due = -1;
    fmc->url = strdup (cfg->url);
    if (asprintf (&fmc->multicast_url, "%s" FMC_MULTICASTS_PATH, cfg->url) < 0)
        fmc->multicast_url = NULL;
    fmc->auth_dir = dup_or_null (cfg->auth_dir);
    fmc->ca_file = dup_or_null (cfg->ca_file);
    fmc->mtls_cert = dup_or_null (cfg->mtls_cert);
    fmc->mtls_key = dup_or_null (cfg->mtls_key);
    if (!fmc->url || !fmc->multicast_url) {
        fmb_errorf (error, "out of memory");
        goto error;
    }
    if (fmc_session_check (fmc, error) < 0 || fmc_engine_init (fmc, error) < 0)
        goto error;
    *ret = fmc;
    return 0;
error:
    fmc_destroy (fmc);
    return -1;
}

int fmc_create_from_config (const struct fmb_config *cfg,
                            struct fmc **ret,
                            struct fmb_error *error)
{
    *ret = NULL;
    if (!cfg->fm_url[0])
        return 0;
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
    if (fmc_create (&fc, ret, error) < 0)
        return fmb_error_prefix (error, "[fabric_manager]");
    return 0;
}

const char *fmc_multicast_url (const struct fmc *fmc)
{
    return fmc->multicast_url;
}

void fmc_set_observer (struct fmc *fmc, fmc_observer_f fn, void *arg)
{
    fmc->observer = fn;
    fmc->observer_arg = arg;
}

void fmc_destroy (struct fmc *fmc)
{
    if (fmc) {
        int saved = errno;
        fmc_engine_cleanup (fmc);
        free (fmc->url);
        free (fmc->multicast_url);
        free (fmc->auth_dir);
        free (fmc->ca_file);
        free (fmc->mtls_cert);
        free (fmc->mtls_key);
        fmc_wipe_free (fmc->passwd);
        fmc_wipe_free (fmc->token);
        free (fmc);
        errno = saved;
    }
}

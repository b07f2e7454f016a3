/* fmcheck.c: fmbrokerd --check-config --fm: the FM session and one cheap
 * call on the collectives API (the jobs listing), made as the service
 * makes them (same client, same credentials, as the user the check runs
 * as), and what is wrong named by the key that fixes it: the URL's path
 * (404 where every collectives API answers), its port (nothing accepts
 * the connection), its host (does not resolve), the credentials (401/403,
 * or the token endpoint refuses them), the CA (the FM's certificate does
 * not verify).
 *
 * The listing is the call reconciliation makes first at every start, so
 * what passes here is what the running broker needs; it changes nothing
 * at the FM.
 */
#include <stdio.h>
#include <string.h>

#include "fmcheck.h"
#include "fmclient.h"

/* What came back: the listing's result, and the token fetch's if one
 * failed (its own error, not the "no FM token" of the calls that waited). */
/* an FM error text, as fmclient gives it (its own cap is 256) */
#define FMCHECK_TEXT_MAX 512

struct outcome {
    bool done;
    enum fmc_status status;
    long http;
    enum fmc_net net;
    bool no_api;
    size_t njobs;
    char error[FMCHECK_TEXT_MAX];
    bool token_failed;
    long token_http;
    enum fmc_net token_net;
    char token_error[FMCHECK_TEXT_MAX];
};

static void observe (const struct fmc_result *res, void *arg)
{
    struct outcome *o = arg;
    if (res->op != FMC_OP_TOKEN || res->status == FMC_OK || o->token_failed)
        return;
    o->token_failed = true;
    o->token_http = res->http_status;
    o->token_net = res->net;
    snprintf (o->token_error, sizeof (o->token_error), "%s", res->error);
}

static void listed (const struct fmc_result *res, void *arg)
{
    struct outcome *o = arg;
    o->done = true;
    o->status = res->status;
    o->http = res->http_status;
    o->net = res->net;
    o->no_api = res->no_api;
    o->njobs = res->njob_ids;
    snprintf (o->error, sizeof (o->error), "%s", res->error);
}

static const char *auth_name (enum fmb_auth auth)
{
    return auth == FMB_AUTH_OAUTH ? "oauth" : auth == FMB_AUTH_BASIC ? "basic" : "none";
}

/* What to change for a call that got no HTTP answer. */
static const char *net_fix (enum fmc_net net)
{
    switch (net) {
    case FMC_NET_CONNECT:
        return "nothing accepts connections there: is the port in the URL right, "
               "and the FM up?";
    case FMC_NET_RESOLVE:
        return "the host name in the URL does not resolve";
    case FMC_NET_TLS:
        return "the FM's TLS certificate does not verify: set [fabric_manager] "
               "ca_file to the CA that signed it (empty: the system's CA store)";
    case FMC_NET_TIMEOUT:
        return "no answer within [fabric_manager] timeout_ms: a firewall, or the "
               "wrong host or port?";
    case FMC_NET_NONE:
    case FMC_NET_OTHER:
        break;
    }
    return "the FM could not be reached";
}

static void report_outcome (const struct fmb_config *cfg,
                            const struct outcome *o,
                            svccheck_report_f report,
                            void *arg)
{
    char text[FMCHECK_TEXT_MAX * 2 + FMB_CFG_PATH_MAX * 2];
    const char *auth = auth_name (cfg->fm_auth);
    if (o->token_failed && o->token_http == 0)
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] auth = oauth: the token endpoint (%s/endpoint) "
                  "cannot be reached: %s (%s)",
                  fmb_config_auth_dir (cfg),
                  net_fix (o->token_net),
                  o->token_error);
    else if (o->token_failed)
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] auth = oauth: the token endpoint refuses "
                  "fmbroker's credentials: the client-id and client-secret in %s "
                  "(%s)",
                  fmb_config_auth_dir (cfg),
                  o->token_error);
    else if (o->no_api)
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] url = %s: the URL's path is wrong: %s",
                  cfg->fm_url,
                  o->error);
    else if (o->status == FMC_UNAUTHORIZED)
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] auth = %s: the FM refuses fmbroker's credentials "
                  "(auth_dir %s): %s",
                  auth,
                  fmb_config_auth_dir (cfg),
                  o->error);
    else if (o->http == 0)
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] url = %s: %s (%s)",
                  cfg->fm_url,
                  net_fix (o->net),
                  o->error);
    else
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] url = %s: the collectives API does not answer as "
                  "the FM's does: %s",
                  cfg->fm_url,
                  o->error);
    report (text, arg);
}

int fmcheck_run (const struct fmb_config *cfg, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    struct fmc *fmc = NULL;
    struct outcome o = {0};
    char text[FMCHECK_TEXT_MAX + FMB_CFG_PATH_MAX + 64];
    if (!cfg->fm_url[0]) {
        printf ("fabric manager: none configured (VNI-only): nothing to check\n");
        return 0;
    }
    if (fmc_create_from_config (cfg, &fmc, &error) < 0) {
        report (error.text, arg);
        return 1;
    }
    fmc_set_observer (fmc, observe, &o);
    if (fmc_job_list (fmc, listed, &o, &error) < 0) {
        snprintf (text, sizeof (text), "[fabric_manager]: %s", error.text);
        report (text, arg);
        fmc_destroy (fmc);
        return 1;
    }
    /* a token fetch and the listing, each within timeout_ms */
    int ran = fmc_run (fmc, 2 * (int)cfg->fm_timeout_ms + 1000);
    fmc_destroy (fmc);
    if (ran < 0 || !o.done) {
        snprintf (text,
                  sizeof (text),
                  "[fabric_manager] url = %s: no answer within %u ms",
                  cfg->fm_url,
                  2 * cfg->fm_timeout_ms + 1000);
        report (text, arg);
        return 1;
    }
    if (o.status != FMC_OK) {
        report_outcome (cfg, &o, report, arg);
        return 1;
    }
    printf (
        "fabric manager %s: session made (auth = %s), GET %s/ answered (%zu "
        "job%s listed)\n",
        cfg->fm_url,
        auth_name (cfg->fm_auth),
        FMC_JOBS_PATH,
        o.njobs,
        o.njobs == 1 ? "" : "s");
    return 0;
}

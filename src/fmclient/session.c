/* session.c: the FM session: credentials and the OAuth token.  Calls
 * wait in 'waiting' while no usable token exists (fmc_req_dispatch); one
 * token fetch at a time serves them all, and its answer lets them go or
 * fails them.  Credential files are read again at every fetch, so that
 * rotated ones are picked up; fmc_session_check reads them at start.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fileutil.h"
#include "fmc_request.h"
#include "fmc_session.h"
#include "monotime.h"

/* ---- credentials --------------------------------------------------- */

static int read_cred (
    const char *dir, const char *name, bool secret, char **ret, struct fmb_error *error)
{
    char path[FMB_CFG_PATH_MAX + 64];
    snprintf (path, sizeof (path), "%s/%s", dir, name);
    if (secret && fmb_check_private_file (path, error) < 0)
        return -1;
    if (fmb_read_file (path, FMC_SECRET_MAX, true, ret, NULL, error) < 0)
        return -1;
    if ((*ret)[0] == '\0') {
        free (*ret);
        errno = EINVAL;
        return fmb_errorf (error, "%s: empty", path);
    }
    return 0;
}

static bool token_usable (struct fmc *fmc)
{
    return fmc->token && fmb_monotime_ms () < fmc->token_refresh_at;
}

/* ---- OAuth --------------------------------------------------------- */

static void fail_waiting (struct fmc *fmc, enum fmc_status status, const char *why)
{
    struct fmc_req *list = fmc->waiting;
    fmc->waiting = fmc->waiting_tail = NULL;
    while (list) {
        struct fmc_req *r = list;
        list = r->next;
        struct fmc_result res = {.mcast_limit = -1};
        char text[FMC_ERROR_MAX];
        snprintf (text, sizeof (text), "no FM token: %s", why);
        fmc_req_finish (r, status, 0, text, &res);
    }
}

static void run_waiting (struct fmc *fmc)
{
    struct fmc_req *list = fmc->waiting;
    fmc->waiting = fmc->waiting_tail = NULL;
    while (list) {
        struct fmc_req *r = list;
        list = r->next;
        fmc_req_dispatch (r);
    }
}

static int start_token_fetch (struct fmc *fmc);

/* Run 'r' now, or park it until a token is there.  On failure the
 * request is completed with FMC_RETRYABLE rather than lost. */
void fmc_req_dispatch (struct fmc_req *r)
{
    struct fmc *fmc = r->fmc;
    struct fmb_error e;
    struct fmc_result res = {.mcast_limit = -1};
    if (r->deadline && fmb_monotime_ms () >= r->deadline) {
        /* Held past it (for a commit, or a token that came late): the FM
         * was not asked, unless this is the repeat after a 401. */
        res.unsent = !r->auth_retried;
        fmc_req_finish (r,
                        FMC_RETRYABLE,
                        0,
                        res.unsent ? "deadline passed before the call could leave"
                                   : "deadline passed before the FM answered",
                        &res);
        return;
    }
    if (r->op != FMC_OP_TOKEN && fmc->cfg.auth == FMB_AUTH_OAUTH &&
        !token_usable (fmc)) {
        fmc_req_enqueue (&fmc->waiting, &fmc->waiting_tail, r);
        if (!fmc->token_fetching)
            start_token_fetch (fmc);
        return;
    }
    /* curl cannot start it: not unsent, so that the FM session probes
     * (backing off) rather than wait for a call that may never come */
    if (r->op == FMC_OP_LOGIN)
        fmc_req_finish (r, FMC_OK, 0, NULL, &res);
    else if (fmc_req_start (r, &e) < 0)
        fmc_req_finish (r, FMC_RETRYABLE, 0, e.text, &res);
}

static void token_done (const struct fmc_result *res, void *arg)
{
    struct fmc *fmc = arg;
    fmc->token_fetching = false;
    if (res->status == FMC_OK)
        run_waiting (fmc);
    else
        fail_waiting (fmc, res->status, res->error);
}

/* Start fetching a token (files re-read each time, so rotated credentials
 * are picked up).  A failure to even start fails the waiting calls. */
static int start_token_fetch (struct fmc *fmc)
{
    struct fmb_error e;
    char *endpoint = NULL, *id = NULL, *secret = NULL, *body = NULL;
    char *eid = NULL, *esecret = NULL;
    fmc->token_fetching = true;
    if (read_cred (fmc->auth_dir, "endpoint", false, &endpoint, &e) < 0 ||
        read_cred (fmc->auth_dir, "client-id", false, &id, &e) < 0 ||
        read_cred (fmc->auth_dir, "client-secret", true, &secret, &e) < 0)
        goto fail;
    eid = curl_easy_escape (NULL, id, 0);
    esecret = curl_easy_escape (NULL, secret, 0);
    size_t n = eid && esecret ? strlen (eid) + strlen (esecret) + 96 : 0;
    if (n == 0 || !(body = malloc (n))) {
        fmb_errorf (&e, "out of memory");
        goto fail;
    }
    snprintf (
        body,
        n,
        "grant_type=client_credentials&client_id=%s&client_secret=%s&scope=openid",
        eid,
        esecret);
    struct fmc_req *r = fmc_req_new (
        fmc, FMC_OP_TOKEN, "POST", "(token endpoint)", body, token_done, fmc);
    body = NULL; /* fmc_req_new owns it now, even on failure */
    if (!r || !(r->url = strdup (endpoint))) {
        fmc_req_free (r);
        fmb_errorf (&e, "out of memory");
        goto fail;
    }
    fmc->token_fetches++;
    if (fmc_req_start (r, &e) < 0) {
        struct fmc_result res = {.mcast_limit = -1};
        fmc_req_finish (r, FMC_RETRYABLE, 0, e.text, &res);
    }
    free (endpoint);
    free (id);
    fmc_wipe_free (secret);
    explicit_bzero (esecret, strlen (esecret));
    curl_free (eid);
    curl_free (esecret);
    return 0;
fail:
    free (endpoint);
    free (id);
    fmc_wipe_free (secret);
    fmc_wipe_free (body);
    if (esecret)
        explicit_bzero (esecret, strlen (esecret));
    curl_free (eid);
    curl_free (esecret);
    fmc->token_fetching = false;
    fail_waiting (fmc, FMC_UNAUTHORIZED, e.text);
    return -1;
}

/* A token response: exactly 200 with a string access_token (as Slurm
 * demands); expires_in honoured when present. */
void fmc_session_token_answer (struct fmc_req *r,
                               long http,
                               json_t *body,
                               struct fmc_result *res)
{
    struct fmc *fmc = r->fmc;
    char text[FMC_ERROR_MAX];
    if (http != 200) {
        snprintf (text, sizeof (text), "token endpoint answered %ld", http);
        fmc_req_finish (r,
                        http == 400 || http == 401 || http == 403 ? FMC_UNAUTHORIZED
                                                                  : FMC_RETRYABLE,
                        http,
                        text,
                        res);
        return;
    }
    json_t *tok = json_object_get (body, "access_token");
    json_t *exp = json_object_get (body, "expires_in");
    if (!json_is_string (tok) || json_string_length (tok) == 0 ||
        (exp && !json_is_integer (exp))) {
        fmc_req_finish (r,
                        FMC_PERMANENT,
                        http,
                        "token endpoint: malformed answer (no access_token)",
                        res);
        return;
    }
    fmc_wipe_free (fmc->token);
    fmc->token = strdup (json_string_value (tok));
    fmc->token_gen++;
    /* Refresh a tenth of the lifetime early (at most a minute), so calls
     * never go out with a token about to lapse.  No expires_in: keep it
     * until the FM refuses it. */
    int64_t now = fmb_monotime_ms ();
    if (exp && json_integer_value (exp) > 0) {
        int64_t life = json_integer_value (exp) * 1000;
        int64_t margin = life / 10 < 60000 ? life / 10 : 60000;
        fmc->token_refresh_at = now + life - margin;
    } else
        fmc->token_refresh_at = INT64_MAX;
    fmc_req_finish (r,
                    fmc->token ? FMC_OK : FMC_RETRYABLE,
                    http,
                    fmc->token ? NULL : "out of memory",
                    res);
}

/* Complete the parked calls whose deadline passed. */
void fmc_session_expire_waiting (struct fmc *fmc)
{
    int64_t now = fmb_monotime_ms ();
    struct fmc_req **pp = &fmc->waiting;
    fmc->waiting_tail = NULL;
    struct fmc_req *expired = NULL;
    while (*pp) {
        struct fmc_req *r = *pp;
        if (r->deadline && now >= r->deadline) {
            *pp = r->next;
            r->next = expired;
            expired = r;
        } else {
            fmc->waiting_tail = r;
            pp = &r->next;
        }
    }
    while (expired) {
        struct fmc_req *r = expired;
        expired = r->next;
        struct fmc_result res = {.mcast_limit = -1};
        fmc_req_finish (
            r, FMC_RETRYABLE, 0, "deadline passed while waiting for an FM token", &res);
    }
}

unsigned long fmc_token_fetches (struct fmc *fmc)
{
    return fmc->token_fetches;
}

/* The credentials, read now so that a bad setup fails at start rather
 * than at the first job; basic keeps its password. */
int fmc_session_check (struct fmc *fmc, struct fmb_error *error)
{
    if (fmc->cfg.auth != FMB_AUTH_NONE && !fmc->auth_dir) {
        errno = EINVAL;
        fmb_errorf (error, "fabric_manager.auth_dir: needed for auth");
        return -1;
    }
    if (fmc->cfg.auth == FMB_AUTH_BASIC &&
        read_cred (fmc->auth_dir, "passwd", true, &fmc->passwd, error) < 0)
        return -1;
    if (fmc->cfg.auth == FMB_AUTH_OAUTH) {
        /* Check now; they are read again at each token fetch. */
        char *s = NULL;
        if (read_cred (fmc->auth_dir, "endpoint", false, &s, error) < 0)
            return -1;
        free (s);
        if (read_cred (fmc->auth_dir, "client-id", false, &s, error) < 0)
            return -1;
        free (s);
        if (read_cred (fmc->auth_dir, "client-secret", true, &s, error) < 0)
            return -1;
        fmc_wipe_free (s);
    }
    return 0;
}

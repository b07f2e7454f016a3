/* request.c: one FM request as a libcurl easy handle: making it
 * (fmc_req_new), putting it on the multi with its options (fmc_req_start),
 * reading its answer within the read budget, and completing it
 * (fmc_req_finish: error text redacted, observer, callback, freed).
 * It calls nothing else of fmclient: the session, the engine, the replies
 * and the calls sit above it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_request.h"
#include "monotime.h"

void fmc_wipe_free (char *s)
{
    if (s) {
        explicit_bzero (s, strlen (s));
        free (s);
    }
}

/* An easy handle costs a few KiB of zeroed memory and ~30 options to make:
 * keep the finished ones, reset, for the next calls. */
static CURL *easy_get (struct fmc *fmc)
{
    return fmc->nspare > 0 ? fmc->spare[--fmc->nspare] : curl_easy_init ();
}

void fmc_easy_put (struct fmc *fmc, CURL *e)
{
    curl_multi_remove_handle (fmc->multi, e);
    if (fmc->nspare < FMC_SPARE_HANDLES) {
        curl_easy_reset (e); /* drops every option, the password among them */
        fmc->spare[fmc->nspare++] = e;
    } else
        curl_easy_cleanup (e);
}

void fmc_req_free (struct fmc_req *r)
{
    if (r) {
        if (r->all_prev)
            r->all_prev->all_next = r->all_next;
        else if (r->fmc->all == r)
            r->fmc->all = r->all_next;
        if (r->all_next)
            r->all_next->all_prev = r->all_prev;
        if (r->easy)
            fmc_easy_put (r->fmc, r->easy);
        if (r->arg_free)
            r->arg_free (r->arg);
        curl_slist_free_all (r->headers);
        free (r->path);
        free (r->url);
        fmc_wipe_free (r->body);
        free (r->resp);
        free (r->list_ids);
        free (r);
    }
}

/* Past the budget, curl keeps the data and hands it again once
 * resume_paused unpauses the transfer. */
static bool over_read_budget (struct fmc *fmc, size_t n)
{
    if (!fmc->read_budget.until_us)
        return false;
    if (fmc->read_budget.left >= n && fmb_monotime_us () < fmc->read_budget.until_us) {
        fmc->read_budget.left -= n;
        return false;
    }
    fmc->read_budget.paused = true;
    fmc->read_budget.pauses++;
    return true;
}

static size_t write_cb (char *data, size_t size, size_t nmemb, void *arg)
{
    struct fmc_req *r = arg;
    size_t n = size * nmemb;
    if (r->resp_len + n > FMC_MAX_REPLY) {
        r->too_large = true;
        return 0; /* aborts the transfer */
    }
    if (r->write_error)
        return 0;
    if (over_read_budget (r->fmc, n)) {
        r->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (r->resp_len + n + 1 > r->resp_cap) { /* doubling: a listing is megabytes */
        size_t cap = r->resp_cap ? r->resp_cap : 4096;
        while (cap < r->resp_len + n + 1)
            cap *= 2;
        char *nb = realloc (r->resp, cap);
        if (!nb)
            return 0;
        r->resp = nb;
        r->resp_cap = cap;
    }
    memcpy (r->resp + r->resp_len, data, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return n;
}

struct fmc_req *fmc_req_new (struct fmc *fmc,
                             enum fmc_op op,
                             const char *method,
                             const char *path,
                             char *body,
                             fmc_done_f cb,
                             void *arg)
{
    struct fmc_req *r = calloc (1, sizeof (*r));
    if (!r) {
        fmc_wipe_free (body);
        return NULL;
    }
    r->fmc = fmc;
    r->all_next = fmc->all;
    if (fmc->all)
        fmc->all->all_prev = r;
    fmc->all = r;
    r->op = op;
    r->method = method;
    r->body = body;
    r->cb = cb;
    r->arg = arg;
    r->timeout_ms = op == FMC_OP_TOKEN ? FMC_TOKEN_TIMEOUT : fmc->cfg.timeout_ms;
    r->started = fmb_monotime_ms ();
    if (!(r->path = strdup (path))) {
        fmc_req_free (r);
        return NULL;
    }
    if (op != FMC_OP_TOKEN && op != FMC_OP_LOGIN) {
        size_t n = strlen (fmc->url) + strlen (path) + 1;
        if (!(r->url = malloc (n))) {
            fmc_req_free (r);
            return NULL;
        }
        snprintf (r->url, n, "%s%s", fmc->url, path);
    }
    return r;
}

static void complete (struct fmc_req *r, struct fmc_result *res);

/* The error text of a finished request, without anything secret. */
static void redact_token (struct fmc *fmc, char *text)
{
    if (!fmc->token || !fmc->token[0])
        return;
    char *p;
    while ((p = strstr (text, fmc->token)))
        memset (p, '*', strlen (fmc->token));
}

void fmc_req_finish (struct fmc_req *r,
                     enum fmc_status status,
                     long http,
                     const char *error_text,
                     struct fmc_result *res)
{
    char text[FMC_ERROR_MAX];
    snprintf (text, sizeof (text), "%s", error_text ? error_text : "");
    redact_token (r->fmc, text);
    res->status = status;
    res->http_status = http;
    res->error = text;
    complete (r, res);
}

/* Take the request out of the books and call back; frees it. */
static void complete (struct fmc_req *r, struct fmc_result *res)
{
    struct fmc *fmc = r->fmc;
    res->op = r->op;
    res->elapsed_ms = (unsigned)(fmb_monotime_ms () - r->started);
    if (!res->error)
        res->error = "";
    if (r->op != FMC_OP_TOKEN) /* token fetches serve calls; they are not calls */
        fmc->inflight--;
    r->arg_free = NULL; /* the callback owns 'arg' from here */
    if (fmc->observer && r->op != FMC_OP_LOGIN && res->status != FMC_NOT_SENT &&
        !res->unsent)
        fmc->observer (res, fmc->observer_arg);
    if (r->cb)
        r->cb (res, r->arg);
    fmc_req_free (r);
}

/* Append 'r' to the queue 'head'/'tail' ('waiting' or 'held'). */
void fmc_req_enqueue (struct fmc_req **head, struct fmc_req **tail, struct fmc_req *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

/* The request's headers, made again for each try: the token may have
 * changed since the last. */
static void set_headers (struct fmc_req *r)
{
    struct fmc *fmc = r->fmc;
    curl_slist_free_all (r->headers);
    r->headers = NULL;
    r->headers = curl_slist_append (r->headers, "Accept: application/json");
    r->headers = curl_slist_append (r->headers, "Expect:");
    if (r->op == FMC_OP_TOKEN) {
        r->headers = curl_slist_append (
            r->headers, "Content-Type: application/x-www-form-urlencoded");
        return;
    }
    if (r->body)
        r->headers = curl_slist_append (r->headers, "Content-Type: application/json");
    if (fmc->cfg.auth == FMB_AUTH_OAUTH && fmc->token) {
        size_t n = strlen (fmc->token) + 32;
        char *h = malloc (n);
        if (h) {
            snprintf (h, n, "Authorization: Bearer %s", fmc->token);
            r->headers = curl_slist_append (r->headers, h);
            fmc_wipe_free (h);
        }
        r->token_gen = fmc->token_gen;
    }
}

/* Who we are to the FM and how we check it: basic auth, TLS. */
static void set_credentials (struct fmc_req *r, CURL *e)
{
    struct fmc *fmc = r->fmc;
    if (fmc->cfg.auth == FMB_AUTH_BASIC && r->op != FMC_OP_TOKEN) {
        curl_easy_setopt (e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt (e, CURLOPT_USERNAME, "cxi");
        curl_easy_setopt (e, CURLOPT_PASSWORD, fmc->passwd);
    }
    if (fmc->cfg.insecure) {
        curl_easy_setopt (e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt (e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (fmc->ca_file)
        curl_easy_setopt (e, CURLOPT_CAINFO, fmc->ca_file);
    if (fmc->mtls_cert) {
        curl_easy_setopt (e, CURLOPT_SSLCERT, fmc->mtls_cert);
        curl_easy_setopt (e, CURLOPT_SSLKEY, fmc->mtls_key);
    }
}

/* Every option of the transfer but the credentials. */
static void set_options (struct fmc_req *r, CURL *e, unsigned timeout)
{
    curl_easy_setopt (e, CURLOPT_URL, r->url);
    curl_easy_setopt (e, CURLOPT_PRIVATE, r);
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt (e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt (e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt (e, CURLOPT_NOSIGNAL, 1L);
    /* HTTP/1.1 even over TLS (curl would offer HTTP/2): the dialect is
     * HTTP/1.1's as Slurm and libfabric use it, and a paused answer
     * (read_budget) is what the tests run, over HTTP/1.1 only. */
    curl_easy_setopt (e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt (e, CURLOPT_TIMEOUT_MS, (long)timeout);
    curl_easy_setopt (e, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout);
    curl_easy_setopt (e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt (e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (e, CURLOPT_USERAGENT, "fmbroker/" FMB_VERSION);
    if (r->body) {
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, r->body);
        curl_easy_setopt (e, CURLOPT_POSTFIELDSIZE, (long)strlen (r->body));
    } else if (strcmp (r->method, "GET") == 0)
        curl_easy_setopt (e, CURLOPT_HTTPGET, 1L);
    if (strcmp (r->method, "GET") != 0 && strcmp (r->method, "POST") != 0)
        curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, r->method);
}

/* Put the easy handle of 'r' on the multi. */
int fmc_req_start (struct fmc_req *r, struct fmb_error *error)
{
    struct fmc *fmc = r->fmc;
    CURL *e = easy_get (fmc);
    unsigned timeout = r->timeout_ms;
    if (r->deadline) {
        int64_t left = r->deadline - fmb_monotime_ms ();
        if (left < (int64_t)timeout)
            timeout = left > 1 ? (unsigned)left : 1;
    }
    if (!e)
        return fmb_errorf (error, "curl_easy_init failed");
    r->easy = e;
    r->errbuf[0] = '\0';
    free (r->resp);
    r->resp = NULL;
    r->resp_len = r->resp_cap = 0;
    r->too_large = r->paused = r->write_error = false;
    set_headers (r);
    set_options (r, e, timeout);
    set_credentials (r, e);
    CURLMcode mc = curl_multi_add_handle (fmc->multi, e);
    if (mc != CURLM_OK) {
        fmc_easy_put (fmc, e);
        r->easy = NULL;
        return fmb_errorf (error, "curl: %s", curl_multi_strerror (mc));
    }
    /* the FM's time starts here: not the time it was held for a commit
     * or waited for a token (the latency histogram is the FM's); a repeat
     * after a 401 goes on counting from the first try */
    if (!r->auth_retried)
        r->started = fmb_monotime_ms ();
    return 0;
}

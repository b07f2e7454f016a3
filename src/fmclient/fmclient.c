/* fmclient.c: FM calls over one libcurl multi handle; see fmclient.h.
 *
 * A call is a struct fmc_req.  With OAuth it first waits in 'waiting'
 * until a valid token exists (one token fetch at a time serves them all),
 * then runs as a curl easy handle on the multi.  Completion classifies the
 * answer and calls back.  The multi's socket and timer callbacks keep a
 * table of what to poll, so the caller's loop needs no curl knowledge.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fileutil.h"
#include "fmclient.h"
#include "monotime.h"
#include "offloop.h"

#define FMC_SECRET_MAX    4096 /* credential files are one line */
#define FMC_MAX_SOCKETS   1024
#define FMC_TOKEN_TIMEOUT 10000 /* ms, as Slurm's token requests */
#define FMC_ERROR_MAX     256
#define FMC_SPARE_HANDLES 64 /* easy handles kept for reuse */

/* OP_LOGIN is a no-op call that completes once a token is there. */
enum req_op {
    OP_GET,
    OP_CREATE,
    OP_PATCH,
    OP_DELETE,
    OP_LIST,
    OP_TOKEN,
    OP_LOGIN,
    OP_PROBE
};

static const char *const op_names[] = {
    "get", "create", "patch", "delete", "list", "token", "login", "probe"};

struct fmc_req {
    struct fmc *fmc;
    enum req_op op;
    const char *method;
    char *path; /* for messages: relative to the base URL */
    char *url;
    char *body; /* NULL: none; for OP_TOKEN it holds the secret */
    unsigned timeout_ms;
    int64_t deadline;        /* monotonic ms, 0: none beyond timeout_ms */
    int64_t started;         /* submitted; once it left, when it first left */
    unsigned long token_gen; /* which token it was sent with */
    bool auth_retried;
    CURL *easy;
    struct curl_slist *headers;
    char *resp;
    size_t resp_len, resp_cap;
    bool too_large;
    bool paused;      /* its answer stopped for this fmc_process (read_budget) */
    bool write_error; /* curl dropped part of the answer on a resume */
    char errbuf[CURL_ERROR_SIZE];
    /* OP_LIST: the answer is parsed on the parser thread (see
     * parse_listing), which owns the request until it hands it back. */
    struct offloop_job parse;
    long list_http;
    enum fmc_status list_status;
    char list_error[FMC_ERROR_MAX];
    const char **list_ids; /* one allocation: the pointers, then the ids */
    size_t list_n;
    fmc_done_f cb;
    void *arg;
    void (*arg_free) (void *); /* frees 'arg' if the call never completes */
    struct fmc_req *next;      /* in 'waiting' or 'held' */
    struct fmc_req *all_prev;  /* every live request, for fmc_destroy */
    struct fmc_req *all_next;
};

struct fmc {
    struct fmc_config cfg;
    char *url;
    char *multicast_url; /* fmc_multicast_url */
    char *auth_dir;
    char *ca_file;
    char *mtls_cert;
    char *mtls_key;
    char *passwd; /* basic */
    CURLM *multi;
    CURL *spare[FMC_SPARE_HANDLES]; /* reset easy handles, for the next calls */
    int nspare;
    /* OAuth */
    char *token;
    int64_t token_refresh_at; /* monotonic ms: fetch a new one from here on */
    unsigned long token_gen;
    bool token_fetching;
    unsigned long token_fetches;
    struct fmc_req *waiting; /* calls waiting for a token, FIFO */
    struct fmc_req *waiting_tail;
    struct fmc_req *all; /* every live request */
    /* loop integration */
    struct {
        curl_socket_t fd;
        short events;
    } socks[FMC_MAX_SOCKETS];
    int nsocks;
    int64_t timer_due; /* monotonic ms, -1: none */
    bool done_pending; /* transfers may have ended outside fmc_process */
    bool holding;      /* fmc_hold: calls that change the FM wait */
    struct fmc_req *held, *held_tail;
    struct fmc_req *kept, *kept_tail; /* fmc_keep_held: committed, not started */
    unsigned inflight;
    /* Listings parsed off the loop: a 100,000-entry answer is ~4 MB of
     * JSON, ~1 s of json_loadb and freeing on a loaded machine. */
    struct offloop *parser;
    unsigned parsing; /* handed to the parser, not yet back */
    unsigned long offloop_parses;
    /* What one fmc_process may read of the answers before it pauses
     * them for the next: a listing of 100,000 entries is megabytes, and
     * reading it at once held the loop for ~20 ms. */
    struct {
        int64_t until_us; /* monotonic; 0: outside fmc_process, no budget */
        size_t left;      /* bytes */
        bool paused;      /* some transfer waits for the next fmc_process */
        unsigned long pauses;
    } read_budget;
    fmc_observer_f observer;
    void *observer_arg;
};

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

static void wipe_free (char *s)
{
    if (s) {
        explicit_bzero (s, strlen (s));
        free (s);
    }
}

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

/* ---- the loop-facing side ------------------------------------------ */

static int socket_cb (CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    struct fmc *fmc = userp;
    int i;
    for (i = 0; i < fmc->nsocks; i++)
        if (fmc->socks[i].fd == s)
            break;
    if (what == CURL_POLL_REMOVE) {
        if (i < fmc->nsocks)
            fmc->socks[i] = fmc->socks[--fmc->nsocks];
        return 0;
    }
    if (i == fmc->nsocks) {
        if (fmc->nsocks == FMC_MAX_SOCKETS)
            return -1; /* max_connections is far below this */
        fmc->nsocks++;
        fmc->socks[i].fd = s;
    }
    fmc->socks[i].events = (short)(((what & CURL_POLL_IN) ? POLLIN : 0) |
                                   ((what & CURL_POLL_OUT) ? POLLOUT : 0));
    return 0;
}

static int timer_cb (CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct fmc *fmc = userp;
    fmc->timer_due = timeout_ms < 0 ? -1 : fmb_monotime_ms () + timeout_ms;
    return 0;
}

int fmc_pollfds (struct fmc *fmc, struct pollfd *fds, int max)
{
    int n = 0;
    if (fmc->parsing > 0 && n < max) {
        fds[n].fd = offloop_fd (fmc->parser);
        fds[n].events = POLLIN;
        fds[n].revents = 0;
        n++;
    }
    for (int i = 0; i < fmc->nsocks && n < max; i++) {
        fds[n].fd = fmc->socks[i].fd;
        fds[n].events = fmc->socks[i].events;
        fds[n].revents = 0;
        n++;
    }
    return n;
}

int fmc_timeout_ms (struct fmc *fmc)
{
    if (fmc->done_pending || fmc->read_budget.paused || fmc->kept)
        return 0;
    int64_t due = fmc->timer_due;
    /* A call parked for a token must still end at its deadline. */
    for (struct fmc_req *r = fmc->waiting; r; r = r->next)
        if (r->deadline && (due < 0 || r->deadline < due))
            due = r->deadline;
    if (due < 0)
        return -1;
    int64_t left = due - fmb_monotime_ms ();
    if (left < 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

unsigned fmc_inflight (struct fmc *fmc)
{
    return fmc->inflight;
}

unsigned long fmc_token_fetches (struct fmc *fmc)
{
    return fmc->token_fetches;
}

unsigned long fmc_offloop_parses (struct fmc *fmc)
{
    return fmc->offloop_parses;
}

unsigned fmc_kept (struct fmc *fmc)
{
    unsigned n = 0;
    for (struct fmc_req *r = fmc->kept; r; r = r->next)
        n++;
    return n;
}

unsigned long fmc_read_pauses (struct fmc *fmc)
{
    return fmc->read_budget.pauses;
}

/* ---- requests ------------------------------------------------------ */

/* An easy handle costs a few KiB of zeroed memory and ~30 options to make:
 * keep the finished ones, reset, for the next calls. */
static CURL *easy_get (struct fmc *fmc)
{
    return fmc->nspare > 0 ? fmc->spare[--fmc->nspare] : curl_easy_init ();
}

static void easy_put (struct fmc *fmc, CURL *e)
{
    curl_multi_remove_handle (fmc->multi, e);
    if (fmc->nspare < FMC_SPARE_HANDLES) {
        curl_easy_reset (e); /* drops every option, the password among them */
        fmc->spare[fmc->nspare++] = e;
    } else
        curl_easy_cleanup (e);
}

static void req_free (struct fmc_req *r)
{
    if (r) {
        if (r->all_prev)
            r->all_prev->all_next = r->all_next;
        else if (r->fmc->all == r)
            r->fmc->all = r->all_next;
        if (r->all_next)
            r->all_next->all_prev = r->all_prev;
        if (r->easy)
            easy_put (r->fmc, r->easy);
        if (r->arg_free)
            r->arg_free (r->arg);
        curl_slist_free_all (r->headers);
        free (r->path);
        free (r->url);
        wipe_free (r->body);
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

static struct fmc_req *req_new (struct fmc *fmc,
                                enum req_op op,
                                const char *method,
                                const char *path,
                                char *body,
                                fmc_done_f cb,
                                void *arg)
{
    struct fmc_req *r = calloc (1, sizeof (*r));
    if (!r) {
        wipe_free (body);
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
    r->timeout_ms = op == OP_TOKEN ? FMC_TOKEN_TIMEOUT : fmc->cfg.timeout_ms;
    r->started = fmb_monotime_ms ();
    if (!(r->path = strdup (path))) {
        req_free (r);
        return NULL;
    }
    if (op != OP_TOKEN && op != OP_LOGIN) {
        size_t n = strlen (fmc->url) + strlen (path) + 1;
        if (!(r->url = malloc (n))) {
            req_free (r);
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

static void finish (struct fmc_req *r,
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
    res->op = op_names[r->op];
    res->elapsed_ms = (unsigned)(fmb_monotime_ms () - r->started);
    if (!res->error)
        res->error = "";
    if (r->op != OP_TOKEN) /* token fetches serve calls; they are not calls */
        fmc->inflight--;
    r->arg_free = NULL; /* the callback owns 'arg' from here */
    if (fmc->observer && r->op != OP_LOGIN && res->status != FMC_NOT_SENT &&
        !res->unsent)
        fmc->observer (res, fmc->observer_arg);
    if (r->cb)
        r->cb (res, r->arg);
    req_free (r);
}

static int start_token_fetch (struct fmc *fmc);

/* Append 'r' to the queue 'head'/'tail' ('waiting' or 'held'). */
static void enqueue (struct fmc_req **head, struct fmc_req **tail, struct fmc_req *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static bool token_usable (struct fmc *fmc)
{
    return fmc->token && fmb_monotime_ms () < fmc->token_refresh_at;
}

/* Put the easy handle of 'r' on the multi. */
static int start (struct fmc_req *r, struct fmb_error *error)
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
    curl_slist_free_all (r->headers);
    r->headers = NULL;
    r->headers = curl_slist_append (r->headers, "Accept: application/json");
    r->headers = curl_slist_append (r->headers, "Expect:");
    if (r->op == OP_TOKEN) {
        r->headers = curl_slist_append (
            r->headers, "Content-Type: application/x-www-form-urlencoded");
    } else {
        if (r->body)
            r->headers =
                curl_slist_append (r->headers, "Content-Type: application/json");
        if (fmc->cfg.auth == FMB_AUTH_OAUTH && fmc->token) {
            size_t n = strlen (fmc->token) + 32;
            char *h = malloc (n);
            if (h) {
                snprintf (h, n, "Authorization: Bearer %s", fmc->token);
                r->headers = curl_slist_append (r->headers, h);
                wipe_free (h);
            }
            r->token_gen = fmc->token_gen;
        }
    }
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
    if (fmc->cfg.auth == FMB_AUTH_BASIC && r->op != OP_TOKEN) {
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
    CURLMcode mc = curl_multi_add_handle (fmc->multi, e);
    if (mc != CURLM_OK) {
        easy_put (fmc, e);
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

/* Run 'r' now, or park it until a token is there.  On failure the
 * request is completed with FMC_RETRYABLE rather than lost. */
static void dispatch (struct fmc_req *r)
{
    struct fmc *fmc = r->fmc;
    struct fmb_error e;
    struct fmc_result res = {.mcast_limit = -1};
    if (r->deadline && fmb_monotime_ms () >= r->deadline) {
        /* Held past it (for a commit, or a token that came late): the FM
         * was not asked, unless this is the repeat after a 401. */
        res.unsent = !r->auth_retried;
        finish (r,
                FMC_RETRYABLE,
                0,
                res.unsent ? "deadline passed before the call could leave"
                           : "deadline passed before the FM answered",
                &res);
        return;
    }
    if (r->op != OP_TOKEN && fmc->cfg.auth == FMB_AUTH_OAUTH && !token_usable (fmc)) {
        enqueue (&fmc->waiting, &fmc->waiting_tail, r);
        if (!fmc->token_fetching)
            start_token_fetch (fmc);
        return;
    }
    /* curl cannot start it: not unsent, so that the FM session probes
     * (backing off) rather than wait for a call that may never come */
    if (r->op == OP_LOGIN)
        finish (r, FMC_OK, 0, NULL, &res);
    else if (start (r, &e) < 0)
        finish (r, FMC_RETRYABLE, 0, e.text, &res);
}

/* Let curl do what its timer asks for (start new transfers, time out old
 * ones); false when it was not due. */
static bool run_timer (struct fmc *fmc)
{
    int running;
    if (fmc->timer_due < 0 || fmb_monotime_ms () < fmc->timer_due)
        return false;
    fmc->timer_due = -1;
    curl_multi_socket_action (fmc->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    return true;
}

static bool changes_fm (const struct fmc_req *r)
{
    return r->op == OP_CREATE || r->op == OP_PATCH || r->op == OP_DELETE;
}

/* Hand a new request to the machinery; it now counts as in flight.  It
 * leaves at once, unless it would change the FM while the caller holds
 * such calls back ('follow_up': the next step of a call already let go). */
static int submit (struct fmc_req *r, bool follow_up, struct fmb_error *error)
{
    if (!r) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    struct fmc *fmc = r->fmc;
    fmc->inflight++;
    if (fmc->holding && changes_fm (r) && !follow_up) {
        enqueue (&fmc->held, &fmc->held_tail, r);
        return 0;
    }
    dispatch (r);
    if (run_timer (fmc)) /* curl starts new transfers on its timer */
        fmc->done_pending = true;
    return 0;
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
        finish (r, status, 0, text, &res);
    }
}

static void run_waiting (struct fmc *fmc)
{
    struct fmc_req *list = fmc->waiting;
    fmc->waiting = fmc->waiting_tail = NULL;
    while (list) {
        struct fmc_req *r = list;
        list = r->next;
        dispatch (r);
    }
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
    struct fmc_req *r =
        req_new (fmc, OP_TOKEN, "POST", "(token endpoint)", body, token_done, fmc);
    body = NULL; /* req_new owns it now, even on failure */
    if (!r || !(r->url = strdup (endpoint))) {
        req_free (r);
        fmb_errorf (&e, "out of memory");
        goto fail;
    }
    fmc->token_fetches++;
    if (start (r, &e) < 0) {
        struct fmc_result res = {.mcast_limit = -1};
        finish (r, FMC_RETRYABLE, 0, e.text, &res);
    }
    free (endpoint);
    free (id);
    wipe_free (secret);
    explicit_bzero (esecret, strlen (esecret));
    curl_free (eid);
    curl_free (esecret);
    return 0;
fail:
    free (endpoint);
    free (id);
    wipe_free (secret);
    wipe_free (body);
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
static void token_answer (struct fmc_req *r,
                          long http,
                          json_t *body,
                          struct fmc_result *res)
{
    struct fmc *fmc = r->fmc;
    char text[FMC_ERROR_MAX];
    if (http != 200) {
        snprintf (text, sizeof (text), "token endpoint answered %ld", http);
        finish (r,
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
        finish (r,
                FMC_PERMANENT,
                http,
                "token endpoint: malformed answer (no access_token)",
                res);
        return;
    }
    wipe_free (fmc->token);
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
    finish (r,
            fmc->token ? FMC_OK : FMC_RETRYABLE,
            http,
            fmc->token ? NULL : "out of memory",
            res);
}

/* ---- answers ------------------------------------------------------- */

static void describe_http_error (
    struct fmc_req *r, long http, json_t *body, char *text, size_t len)
{
    const char *why = NULL;
    if (json_is_object (body)) {
        why = json_string_value (json_object_get (body, "detail"));
        if (!why)
            why = json_string_value (json_object_get (body, "message"));
    }
    snprintf (text,
              len,
              "FM answered %ld to %s %s%s%.120s",
              http,
              r->method,
              r->path,
              why ? ": " : "",
              why ? why : "");
}

/* The token goes into every task's environment and into shell code the
 * node agent prints: only characters that mean nothing to a shell or an
 * environment file, in a length a bearer header carries. */
bool fmc_token_is_safe (const char *token, size_t len)
{
    if (len < FMC_TOKEN_MIN || len > FMC_TOKEN_MAX || strlen (token) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = token[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || strchr ("._~+/=:-", c)))
            return false;
    }
    return true;
}

int fmc_reply_job (json_t *body, const char **token, long *mcast_limit)
{
    json_t *tok = json_object_get (body, "sessionToken");
    json_t *limit = json_object_get (body, "mcastLimit");
    if (!json_is_string (tok) || json_string_length (tok) == 0) {
        errno = EPROTO;
        return -1;
    }
    if (!fmc_token_is_safe (json_string_value (tok), json_string_length (tok))) {
        errno = EBADMSG;
        return -1;
    }
    *token = json_string_value (tok);
    *mcast_limit = json_is_integer (limit) ? (long)json_integer_value (limit) : -1;
    return 0;
}

int fmc_reply_list (json_t *body, const char ***ret_ids, size_t *ret_n)
{
    json_t *links = json_object_get (body, "documentLinks");
    size_t i, n = 0;
    json_t *v;
    if (!json_is_array (links)) {
        errno = EPROTO;
        return -1;
    }
    const char **ids = calloc (json_array_size (links) + 1, sizeof (*ids));
    if (!ids)
        return -1;
    /* Links are FM-relative paths "/fabric/collectives/jobs/{id}"; take
     * what follows the collection path wherever it is, so a gateway
     * prefix does not confuse us (Slurm blindly drops 25 characters). */
    json_array_foreach (links, i, v)
    {
        const char *s = json_string_value (v);
        const char *p = s ? strstr (s, FMC_JOBS_PATH "/") : NULL;
        if (!p)
            continue;
        p += strlen (FMC_JOBS_PATH "/");
        if (*p && !strchr (p, '/'))
            ids[n++] = p;
    }
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

static void job_answer (struct fmc_req *r,
                        long http,
                        json_t *body,
                        struct fmc_result *res)
{
    if (fmc_reply_job (body, &res->session_token, &res->mcast_limit) < 0) {
        char text[FMC_ERROR_MAX];
        /* never the token itself: it may be anything */
        snprintf (text,
                  sizeof (text),
                  "malformed FM answer to %s %s: %s",
                  r->method,
                  r->path,
                  errno == EBADMSG ? "unsafe sessionToken (not " FMC_TOKEN_RULE ")"
                                   : "no sessionToken");
        finish (r, FMC_PERMANENT, http, text, res);
        return;
    }
    finish (r, FMC_OK, http, NULL, res);
}

/* A listing's answer, into r->list_*: pure, so that it runs on the
 * parser thread as well as inline.  The ids are copied into one
 * allocation so that the JSON can be freed where it was parsed. */
static void list_parse (struct fmc_req *r, json_t *body)
{
    const char **ids;
    size_t n, len = 0;
    r->list_status = FMC_PERMANENT;
    if (!json_is_object (body)) {
        snprintf (r->list_error,
                  sizeof (r->list_error),
                  "malformed FM answer to %s %s: not a JSON object",
                  r->method,
                  r->path);
        return;
    }
    if (fmc_reply_list (body, &ids, &n) < 0) {
        bool proto = errno == EPROTO;
        snprintf (
            r->list_error,
            sizeof (r->list_error),
            "%s",
            proto ? "malformed FM job list: no documentLinks array" : "out of memory");
        r->list_status = proto ? FMC_PERMANENT : FMC_RETRYABLE;
        return;
    }
    for (size_t i = 0; i < n; i++)
        len += strlen (ids[i]) + 1;
    r->list_ids = malloc ((n + 1) * sizeof (*ids) + len);
    if (!r->list_ids) {
        free (ids);
        snprintf (r->list_error, sizeof (r->list_error), "out of memory");
        r->list_status = FMC_RETRYABLE;
        return;
    }
    char *p = (char *)(r->list_ids + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen (ids[i]) + 1;
        r->list_ids[i] = memcpy (p, ids[i], l);
        p += l;
    }
    r->list_ids[n] = NULL;
    r->list_n = n;
    r->list_status = FMC_OK;
    free (ids);
}

/* On the loop: call back with what list_parse found. */
static void list_finish (struct fmc_req *r)
{
    struct fmc_result res = {.mcast_limit = -1};
    if (r->list_status != FMC_OK) {
        finish (r, r->list_status, r->list_http, r->list_error, &res);
        return;
    }
    res.job_ids = r->list_ids;
    res.njob_ids = r->list_n;
    res.req_ = r;
    finish (r, FMC_OK, r->list_http, NULL, &res);
}

const char **fmc_take_job_ids (const struct fmc_result *res)
{
    struct fmc_req *r = res->req_;
    if (!r || r->op != OP_LIST)
        return NULL;
    const char **ids = r->list_ids;
    r->list_ids = NULL;
    return ids;
}

/* On the parser thread: the request is the thread's until it returns. */
static bool parse_listing (struct offloop_job *job)
{
    struct fmc_req *r =
        (struct fmc_req *)((char *)job - offsetof (struct fmc_req, parse));
    json_t *body = json_loadb (r->resp, r->resp_len, 0, NULL);
    list_parse (r, body);
    json_decref (body);
    free (r->resp);
    r->resp = NULL;
    r->resp_len = r->resp_cap = 0;
    return true;
}

/* Hand a listing's answer to the parser thread; false when there is
 * none to be had (then it is parsed here, as before). */
static bool list_off_loop (struct fmc_req *r, long http)
{
    struct fmc *fmc = r->fmc;
    if (!fmc->parser && offloop_create (&fmc->parser) < 0)
        return false;
    r->list_http = http;
    r->parse.run = parse_listing;
    if (offloop_submit (fmc->parser, &r->parse) < 0)
        return false;
    fmc->parsing++;
    fmc->offloop_parses++;
    return true;
}

/* The listings the parser handed back. */
static void take_parsed (struct fmc *fmc)
{
    if (fmc->parsing == 0)
        return;
    struct offloop_job *list = offloop_take (fmc->parser);
    while (list) {
        struct offloop_job *job = list;
        list = job->next;
        fmc->parsing--;
        list_finish (
            (struct fmc_req *)((char *)job - offsetof (struct fmc_req, parse)));
    }
}

/* Classify a finished transfer and complete (or repeat) the request. */
static void answer (struct fmc_req *r, CURLcode cc)
{
    struct fmc *fmc = r->fmc;
    struct fmc_result res = {.mcast_limit = -1};
    char text[FMC_ERROR_MAX];
    long http = 0;
    curl_easy_getinfo (r->easy, CURLINFO_RESPONSE_CODE, &http);
    easy_put (fmc, r->easy);
    r->easy = NULL;

    if (r->too_large) {
        snprintf (text,
                  sizeof (text),
                  "FM answer to %s %s larger than %d bytes (the most fmbroker reads)",
                  r->method,
                  r->path,
                  FMC_MAX_REPLY);
        finish (r, FMC_PERMANENT, http, text, &res);
        return;
    }
    if (cc == CURLE_OK && r->write_error)
        cc = CURLE_WRITE_ERROR; /* part of it was lost: retryable */
    if (cc != CURLE_OK) {
        bool tls = cc == CURLE_PEER_FAILED_VERIFICATION ||
                   cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_SSL_CERTPROBLEM ||
                   cc == CURLE_SSL_ISSUER_ERROR;
        snprintf (text,
                  sizeof (text),
                  "%s %s: %s%s%.160s",
                  r->method,
                  r->path,
                  curl_easy_strerror (cc),
                  r->errbuf[0] ? ": " : "",
                  r->errbuf);
        finish (r, tls ? FMC_PERMANENT : FMC_RETRYABLE, 0, text, &res);
        return;
    }
    if ((http == 401 || http == 403) && r->op != OP_TOKEN &&
        fmc->cfg.auth == FMB_AUTH_OAUTH && !r->auth_retried) {
        /* Once: drop the token (unless another call already replaced it)
         * and repeat with a fresh one. */
        r->auth_retried = true;
        if (r->token_gen == fmc->token_gen)
            fmc->token_refresh_at = 0;
        dispatch (r);
        return;
    }

    bool ok = http >= 200 && http < 300;
    if (r->op == OP_LIST && ok && list_off_loop (r, http))
        return;
    json_t *body = NULL;
    if (r->resp_len > 0)
        body = json_loadb (r->resp, r->resp_len, 0, NULL);
    if (r->op == OP_TOKEN)
        token_answer (r, http, body, &res);
    else if (ok && r->op == OP_LIST) {
        r->list_http = http;
        list_parse (r, body);
        list_finish (r);
    } else if (ok) {
        bool needs_json = r->op == OP_GET || r->op == OP_CREATE;
        if (needs_json && !json_is_object (body)) {
            snprintf (text,
                      sizeof (text),
                      "malformed FM answer to %s %s: not a JSON object",
                      r->method,
                      r->path);
            finish (r, FMC_PERMANENT, http, text, &res);
        } else if (r->op == OP_GET || r->op == OP_CREATE)
            job_answer (r, http, body, &res);
        else
            finish (r, FMC_OK, http, NULL, &res);
    } else if (http == 404 && r->op == OP_PROBE)
        finish (r, FMC_OK, http, NULL, &res); /* the API answered: no such job */
    else {
        enum fmc_status st;
        describe_http_error (r, http, body, text, sizeof (text));
        /* Paths every collectives API has: a 404 there is a wrong url. */
        res.no_api = http == 404 && (r->op == OP_LIST || r->op == OP_CREATE);
        if (res.no_api) {
            size_t n = strlen (text);
            snprintf (text + n,
                      sizeof (text) - n,
                      "; no collectives API at [fabric_manager] url %s (is its path "
                      "right?)",
                      fmc->cfg.url);
        }
        if (http == 404 && (r->op == OP_GET || r->op == OP_PATCH || r->op == OP_DELETE))
            st = FMC_NOT_FOUND;
        else if (http == 401 || http == 403)
            st = FMC_UNAUTHORIZED;
        else if (http == 408 || http == 409 || http == 425 || http == 429 ||
                 http >= 500)
            st = FMC_RETRYABLE;
        else
            st = FMC_PERMANENT;
        finish (r, st, http, text, &res);
    }
    json_decref (body);
}

/* Answer the transfers that ended, until 'end' (monotonic µs): curl keeps
 * the rest for the next call. */
static void check_done (struct fmc *fmc, int64_t end)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read (fmc->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct fmc_req *r = NULL;
        curl_easy_getinfo (m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        answer (r, m->data.result);
        if (left > 0 && fmb_monotime_us () >= end) {
            fmc->done_pending = true; /* the next fmc_process, at once */
            return;
        }
    }
}

/* Complete the parked calls whose deadline passed. */
static void expire_waiting (struct fmc *fmc)
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
        finish (
            r, FMC_RETRYABLE, 0, "deadline passed while waiting for an FM token", &res);
    }
}

/* Start the kept calls, in the order they were submitted, for about
 * FMC_START_BUDGET_US: starting 64 releases together (curl makes each
 * request and sends it) held a loop pass 5-10 ms.  The rest wait for the
 * next fmc_start_held, which fmc_timeout_ms asks for at once. */
static void start_kept (struct fmc *fmc)
{
    int64_t end = fmb_monotime_us () + FMC_START_BUDGET_US;
    while (fmc->kept) {
        struct fmc_req *r = fmc->kept;
        fmc->kept = r->next;
        if (!fmc->kept)
            fmc->kept_tail = NULL;
        r->next = NULL;
        dispatch (r); /* calls back at once only when curl cannot start it */
        /* Transfers that end here are seen by the next fmc_process. */
        if (run_timer (fmc))
            fmc->done_pending = true;
        if (fmb_monotime_us () >= end)
            break;
    }
}

/* The answers paused by an earlier fmc_process's read budget go on. */
static void resume_paused (struct fmc *fmc)
{
    if (!fmc->read_budget.paused)
        return;
    fmc->read_budget.paused = false;
    for (struct fmc_req *r = fmc->all; r; r = r->all_next)
        if (r->paused) {
            r->paused = false;
            /* Hands back what it kept (and may pause again).  Should the
             * answer fail to be taken then, curl drops that part and goes
             * on: the answer is refused (write_error) rather than parsed
             * with a hole in it. */
            if (r->easy && curl_easy_pause (r->easy, CURLPAUSE_CONT) != CURLE_OK)
                r->write_error = true;
        }
}

void fmc_process (struct fmc *fmc, const struct pollfd *fds, int n)
{
    int running;
    int64_t end = fmb_monotime_us () + FMC_PROCESS_BUDGET_US;
    fmc->done_pending = false;
    fmc->read_budget.until_us = end;
    fmc->read_budget.left = FMC_PROCESS_READ_MAX;
    resume_paused (fmc);
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents ||
            (fmc->parsing > 0 && fds[i].fd == offloop_fd (fmc->parser)))
            continue;
        int mask = 0;
        if (fds[i].revents & POLLIN)
            mask |= CURL_CSELECT_IN;
        if (fds[i].revents & POLLOUT)
            mask |= CURL_CSELECT_OUT;
        if (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL))
            mask |= CURL_CSELECT_ERR;
        curl_multi_socket_action (fmc->multi, fds[i].fd, mask, &running);
    }
    run_timer (fmc);
    check_done (fmc, end);
    take_parsed (fmc);
    expire_waiting (fmc);
    /* Calls those answers dispatched without submit() (the ones parked
     * for a token that came, one repeated after a 401) leave now, not a
     * loop pass later. */
    if (run_timer (fmc))
        check_done (fmc, end);
    fmc->read_budget.until_us = 0;
}

void fmc_hold (struct fmc *fmc, bool on)
{
    fmc->holding = on;
}

void fmc_keep_held (struct fmc *fmc)
{
    if (!fmc->held)
        return;
    if (fmc->kept_tail)
        fmc->kept_tail->next = fmc->held;
    else
        fmc->kept = fmc->held;
    fmc->kept_tail = fmc->held_tail;
    fmc->held = fmc->held_tail = NULL;
}

void fmc_start_held (struct fmc *fmc)
{
    fmc_keep_held (fmc);
    start_kept (fmc);
}

void fmc_drop_held (struct fmc *fmc)
{
    struct fmc_req *list = fmc->held;
    fmc->held = fmc->held_tail = NULL;
    while (list) {
        struct fmc_req *r = list;
        list = r->next;
        struct fmc_result res = {.mcast_limit = -1};
        finish (r, FMC_NOT_SENT, 0, "not sent: its intent did not commit", &res);
    }
}

int fmc_run (struct fmc *fmc, int timeout_ms)
{
    int64_t end = fmb_monotime_ms () + timeout_ms;
    while (fmc->inflight > 0) {
        struct pollfd fds[FMC_MAX_SOCKETS];
        int64_t left = end - fmb_monotime_ms ();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        start_kept (fmc); /* what fmc_start_held left */
        int n = fmc_pollfds (fmc, fds, FMC_MAX_SOCKETS);
        int t = fmc_timeout_ms (fmc);
        if (t < 0 || t > left)
            t = (int)left;
        if (n > 0 || t > 0) {
            if (poll (fds, (nfds_t)n, t) < 0 && errno != EINTR)
                return -1;
        }
        fmc_process (fmc, fds, n);
    }
    return 0;
}

/* ---- operations ---------------------------------------------------- */

static int check_id (const char *id, struct fmb_error *error)
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
                     enum req_op op,
                     const char *method,
                     const char *id,
                     char *body,
                     fmc_done_f cb,
                     void *arg,
                     struct fmb_error *error)
{
    char path[512];
    if (id && check_id (id, error) < 0) {
        free (body);
        return -1;
    }
    snprintf (path, sizeof (path), FMC_JOBS_PATH "%s%s", id ? "/" : "", id ? id : "");
    return submit (req_new (fmc, op, method, path, body, cb, arg), false, error);
}

int fmc_job_get (struct fmc *fmc,
                 const char *fm_job_id,
                 fmc_done_f cb,
                 void *arg,
                 struct fmb_error *error)
{
    return job_call (fmc, OP_GET, "GET", fm_job_id, NULL, cb, arg, error);
}

int fmc_probe (struct fmc *fmc,
               const char *fm_job_id,
               fmc_done_f cb,
               void *arg,
               struct fmb_error *error)
{
    return job_call (fmc, OP_PROBE, "GET", fm_job_id, NULL, cb, arg, error);
}

int fmc_job_create (struct fmc *fmc,
                    const char *fm_job_id,
                    unsigned mcast_limit,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    if (check_id (fm_job_id, error) < 0)
        return -1;
    json_t *o = json_pack (
        "{s:s, s:I}", "jobID", fm_job_id, "mcastLimit", (json_int_t)mcast_limit);
    char *body = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    if (!body) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    char path[] = FMC_JOBS_PATH;
    return submit (req_new (fmc, OP_CREATE, "POST", path, body, cb, arg), false, error);
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
    return job_call (fmc, OP_PATCH, "PATCH", fm_job_id, body, cb, arg, error);
}

int fmc_job_delete (struct fmc *fmc,
                    const char *fm_job_id,
                    fmc_done_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    return job_call (fmc, OP_DELETE, "DELETE", fm_job_id, NULL, cb, arg, error);
}

int fmc_job_list (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error)
{
    char path[] = FMC_JOBS_PATH "/"; /* with the slash, as the FM lists it */
    return submit (req_new (fmc, OP_LIST, "GET", path, NULL, cb, arg), false, error);
}

int fmc_login (struct fmc *fmc, fmc_done_f cb, void *arg, struct fmb_error *error)
{
    /* Forget any token; the no-op call waits for a fresh one (with basic
     * or none it completes at once). */
    fmc->token_refresh_at = 0;
    return submit (
        req_new (fmc, OP_LOGIN, "POST", "(login)", NULL, cb, arg), false, error);
}

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

static int reserve_next (struct reserve *rv, enum req_op op, struct fmb_error *error)
{
    struct fmc_req *r;
    char path[512];
    if (op == OP_CREATE) {
        json_t *o = json_pack (
            "{s:s, s:I}", "jobID", rv->id, "mcastLimit", (json_int_t)rv->mcast_limit);
        char *body = o ? json_dumps (o, JSON_COMPACT) : NULL;
        json_decref (o);
        r = body
                ? req_new (
                      rv->fmc, OP_CREATE, "POST", FMC_JOBS_PATH, body, reserve_step, rv)
                : NULL;
    } else {
        snprintf (path, sizeof (path), FMC_JOBS_PATH "/%s", rv->id);
        r = req_new (rv->fmc, OP_GET, "GET", path, NULL, reserve_step, rv);
    }
    if (r) {
        r->deadline = rv->deadline;
        r->arg_free = free;
    }
    /* A POST that follows a GET's answer is not held: the caller let the
     * reservation go when it submitted the first call.  A POST that comes
     * first is, like any change, until the caller's intent commits. */
    return submit (r, rv->calls++ > 0, error);
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
                             .op = "create",
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
    enum req_op next = OP_TOKEN; /* none */
    if (rv->stage == RESERVE_GET_AFTER_POST) {
        reserve_after_refusal (rv, res, res->error);
        return;
    }
    if (rv->stage == RESERVE_GET && res->status == FMC_NOT_FOUND)
        next = OP_CREATE;
    else if (rv->stage == RESERVE_POST && create_refused (res)) {
        next = OP_GET; /* made meanwhile, or before: the GET finds it */
        rv->refused_status = res->status;
        rv->refused_http = res->http_status;
        snprintf (rv->refused_error, sizeof (rv->refused_error), "%s", res->error);
    }
    if (next == OP_CREATE && rv->abandoned) {
        struct fmc_result stop = {.status = FMC_NOT_SENT,
                                  .op = "create",
                                  .error = "not sent: the reservation was abandoned",
                                  .mcast_limit = -1};
        reserve_finish (rv, &stop);
        return;
    }
    if (next != OP_TOKEN) {
        rv->stage = next == OP_CREATE ? RESERVE_POST : RESERVE_GET_AFTER_POST;
        if (reserve_next (rv, next, &e) == 0)
            return;
        if (rv->stage == RESERVE_GET_AFTER_POST) {
            reserve_after_refusal (rv, NULL, e.text);
            return;
        }
        struct fmc_result fail = {.status = FMC_RETRYABLE,
                                  .op = "reserve",
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
    if (check_id (fm_job_id, error) < 0)
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
    if (reserve_next (rv, rv->stage == RESERVE_POST ? OP_CREATE : OP_GET, error) < 0) {
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

/* ---- lifetime ------------------------------------------------------ */

static char *dup_or_null (const char *s)
{
    return s && s[0] ? strdup (s) : NULL;
}

int fmc_create (const struct fmc_config *cfg, struct fmc **ret, struct fmb_error *error)
{
    static bool global_done;
    if (!global_done) {
        if (curl_global_init (CURL_GLOBAL_DEFAULT) != 0) {
            errno = EIO;
            return fmb_errorf (error, "curl_global_init failed");
        }
        global_done = true;
    }
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
    if (cfg->auth != FMB_AUTH_NONE && !fmc->auth_dir) {
        errno = EINVAL;
        fmb_errorf (error, "fabric_manager.auth_dir: needed for auth");
        goto error;
    }
    if (cfg->auth == FMB_AUTH_BASIC &&
        read_cred (fmc->auth_dir, "passwd", true, &fmc->passwd, error) < 0)
        goto error;
    if (cfg->auth == FMB_AUTH_OAUTH) {
        /* Check now; they are read again at each token fetch. */
        char *s = NULL;
        if (read_cred (fmc->auth_dir, "endpoint", false, &s, error) < 0)
            goto error;
        free (s);
        if (read_cred (fmc->auth_dir, "client-id", false, &s, error) < 0)
            goto error;
        free (s);
        if (read_cred (fmc->auth_dir, "client-secret", true, &s, error) < 0)
            goto error;
        wipe_free (s);
    }
    if (!(fmc->multi = curl_multi_init ())) {
        fmb_errorf (error, "curl_multi_init failed");
        goto error;
    }
    curl_multi_setopt (fmc->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt (fmc->multi, CURLMOPT_SOCKETDATA, fmc);
    curl_multi_setopt (fmc->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt (fmc->multi, CURLMOPT_TIMERDATA, fmc);
    curl_multi_setopt (
        fmc->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)cfg->max_connections);
    curl_multi_setopt (
        fmc->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->max_connections);
    curl_multi_setopt (fmc->multi, CURLMOPT_MAXCONNECTS, (long)cfg->max_connections);
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
        offloop_destroy (fmc->parser); /* joins: the parser's requests are ours again */
        while (fmc->all)
            req_free (fmc->all);
        while (fmc->nspare > 0)
            curl_easy_cleanup (fmc->spare[--fmc->nspare]);
        curl_multi_cleanup (fmc->multi);
        free (fmc->url);
        free (fmc->multicast_url);
        free (fmc->auth_dir);
        free (fmc->ca_file);
        free (fmc->mtls_cert);
        free (fmc->mtls_key);
        wipe_free (fmc->passwd);
        wipe_free (fmc->token);
        free (fmc);
        errno = saved;
    }
}

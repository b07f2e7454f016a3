/* engine.c: the request engine around one libcurl multi handle: the
 * sockets and timer the caller's loop polls, submitting calls (held while
 * the caller's intent is not committed), driving transfers within a time
 * and read budget, a repeat after 401/403, and listings parsed on a
 * thread off the loop.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmc_engine.h"
#include "fmc_reply.h"
#include "fmc_request.h"
#include "fmc_session.h"
#include "monotime.h"
#include "offloop.h"

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
    return r->op == FMC_OP_CREATE || r->op == FMC_OP_PATCH || r->op == FMC_OP_DELETE;
}

/* Hand a new request to the machinery; it now counts as in flight.  It
 * leaves at once, unless it would change the FM while the caller holds
 * such calls back ('follow_up': the next step of a call already let go). */
int fmc_req_submit (struct fmc_req *r, bool follow_up, struct fmb_error *error)
{
    if (!r) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    struct fmc *fmc = r->fmc;
    fmc->inflight++;
    if (fmc->holding && changes_fm (r) && !follow_up) {
        fmc_req_enqueue (&fmc->held, &fmc->held_tail, r);
        return 0;
    }
    fmc_req_dispatch (r);
    if (run_timer (fmc)) /* curl starts new transfers on its timer */
        fmc->done_pending = true;
    return 0;
}

/* On the parser thread: the request is the thread's until it returns. */
static bool parse_listing (struct offloop_job *job)
{
    struct fmc_req *r =
        (struct fmc_req *)((char *)job - offsetof (struct fmc_req, parse));
    json_t *body = json_loadb (r->resp, r->resp_len, 0, NULL);
    fmc_reply_list_parse (r, body);
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
        fmc_reply_list_finish (
            (struct fmc_req *)((char *)job - offsetof (struct fmc_req, parse)));
    }
}

/* An answer that cannot be read: too large, or the transfer failed.
 * Completes the request and returns true; false when there is an answer. */
static bool answer_unread (struct fmc_req *r, CURLcode cc, long http)
{
    struct fmc_result res = {.mcast_limit = -1};
    char text[FMC_ERROR_MAX];
    if (r->too_large) {
        snprintf (text,
                  sizeof (text),
                  "FM answer to %s %s larger than %d bytes (the most fmbroker reads)",
                  r->method,
                  r->path,
                  FMC_MAX_REPLY);
        fmc_req_finish (r, FMC_PERMANENT, http, text, &res);
        return true;
    }
    if (cc == CURLE_OK && r->write_error)
        cc = CURLE_WRITE_ERROR; /* part of it was lost: retryable */
    if (cc == CURLE_OK)
        return false;
    bool tls = cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
               cc == CURLE_SSL_CERTPROBLEM || cc == CURLE_SSL_ISSUER_ERROR;
    snprintf (text,
              sizeof (text),
              "%s %s: %s%s%.160s",
              r->method,
              r->path,
              curl_easy_strerror (cc),
              r->errbuf[0] ? ": " : "",
              r->errbuf);
    res.net = tls                                ? FMC_NET_TLS
              : cc == CURLE_COULDNT_CONNECT      ? FMC_NET_CONNECT
              : cc == CURLE_COULDNT_RESOLVE_HOST ? FMC_NET_RESOLVE
              : cc == CURLE_OPERATION_TIMEDOUT   ? FMC_NET_TIMEOUT
                                                 : FMC_NET_OTHER;
    fmc_req_finish (r, tls ? FMC_PERMANENT : FMC_RETRYABLE, 0, text, &res);
    return true;
}

/* A 401/403 to a call made with an OAuth token: once, drop the token
 * (unless another call already replaced it) and repeat with a fresh one.
 * True when it is repeated. */
static bool repeat_unauthorized (struct fmc_req *r, long http)
{
    struct fmc *fmc = r->fmc;
    if ((http != 401 && http != 403) || r->op == FMC_OP_TOKEN ||
        fmc->cfg.auth != FMB_AUTH_OAUTH || r->auth_retried)
        return false;
    r->auth_retried = true;
    if (r->token_gen == fmc->token_gen)
        fmc->token_refresh_at = 0;
    fmc_req_dispatch (r);
    return true;
}

/* Classify a finished transfer and complete (or repeat) the request. */
static void answer (struct fmc_req *r, CURLcode cc)
{
    struct fmc_result res = {.mcast_limit = -1};
    long http = 0;
    curl_easy_getinfo (r->easy, CURLINFO_RESPONSE_CODE, &http);
    fmc_easy_put (r->fmc, r->easy);
    r->easy = NULL;
    if (answer_unread (r, cc, http) || repeat_unauthorized (r, http))
        return;
    bool ok = http >= 200 && http < 300;
    if (r->op == FMC_OP_LIST && ok && list_off_loop (r, http))
        return;
    json_t *body = NULL;
    if (r->resp_len > 0)
        body = json_loadb (r->resp, r->resp_len, 0, NULL);
    if (r->op == FMC_OP_TOKEN)
        fmc_session_token_answer (r, http, body, &res);
    else
        fmc_reply_answer (r, http, body, &res);
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
        fmc_req_dispatch (r); /* calls back at once only when curl cannot start it */
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
    fmc_session_expire_waiting (fmc);
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
        fmc_req_finish (
            r, FMC_NOT_SENT, 0, "not sent: its intent did not commit", &res);
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

int fmc_engine_global_init (struct fmb_error *error)
{
    static bool global_done;
    if (!global_done) {
        if (curl_global_init (CURL_GLOBAL_DEFAULT) != 0) {
            errno = EIO;
            return fmb_errorf (error, "curl_global_init failed");
        }
        global_done = true;
    }
    return 0;
}

int fmc_engine_init (struct fmc *fmc, struct fmb_error *error)
{
    if (!(fmc->multi = curl_multi_init ())) {
        fmb_errorf (error, "curl_multi_init failed");
        return -1;
    }
    curl_multi_setopt (fmc->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt (fmc->multi, CURLMOPT_SOCKETDATA, fmc);
    curl_multi_setopt (fmc->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt (fmc->multi, CURLMOPT_TIMERDATA, fmc);
    curl_multi_setopt (
        fmc->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)fmc->cfg.max_connections);
    curl_multi_setopt (
        fmc->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)fmc->cfg.max_connections);
    curl_multi_setopt (
        fmc->multi, CURLMOPT_MAXCONNECTS, (long)fmc->cfg.max_connections);
    return 0;
}

void fmc_engine_cleanup (struct fmc *fmc)
{
    offloop_destroy (fmc->parser); /* joins: the parser's requests are ours again */
    while (fmc->all)
        fmc_req_free (fmc->all);
    while (fmc->nspare > 0)
        curl_easy_cleanup (fmc->spare[--fmc->nspare]);
    curl_multi_cleanup (fmc->multi);
}

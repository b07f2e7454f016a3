/* httpreq.c: a request as its handler sees it: answers (held for the
 * loop pass's commit), problem documents, path parameters, the query, and
 * the refusal log (httpreq.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monotime.h"
#include "httpconn.h"
#include "httpreq.h"
#include "log.h"
#include "netaddr.h"
#include "refusallog.h"

/* ---- responses ----------------------------------------------------- */

static const char *reason_phrase (int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 507:
        return "Insufficient Storage";
    default:
        return "Error";
    }
}

int http_status_of_errno (int errnum)
{
    switch (errnum) {
    case ENOENT:
        return 404;
    case EEXIST:
    case EBUSY:
        return 409;
    case EINVAL:
    case EMSGSIZE:
        return 400;
    case EPERM:
    case EACCES:
        return 403;
    case EAGAIN:
    case ENOSPC:
    case EIO: /* the disk failed: nothing was changed, a retry may work */
        return 503;
    default:
        return 500;
    }
}

void httpreq_resume (struct http_req *req)
{
    if (req->suspended) {
        req->suspended = false;
        MHD_resume_connection (req->conn);
        if (req->resumed)
            *req->resumed = true;
    }
}

/* An answer made while the loop pass's transaction is open waits for its
 * commit: nobody hears "done" before it is durable. */
static void hold (struct http_req *req)
{
    if (!req->held) {
        req->held = true;
        req->held_next = req->sh->held;
        req->sh->held = req;
    }
}

int httpreq_release (struct http_shared *sh, bool committed, const char *why)
{
    int n = 0;
    struct http_req *list = sh->held;
    sh->held = NULL;
    while (list) {
        struct http_req *req = list;
        list = req->held_next;
        req->held = false;
        if (!committed) {
            /* the pass's changes are gone: the answer must not claim them */
            free (req->resp);
            req->replied = false;
            http_reply_uncommitted (req, why);
            if (req->held) /* http_reply_problem held it again */
                continue;
        }
        httpreq_resume (req);
        n++;
    }
    return n;
}

void http_reply_text (struct http_req *req, int status, const char *ctype, char *text)
{
    if (req->replied) { /* a bug, but never a double answer */
        free (text);
        return;
    }
    req->replied = true;
    req->status = status;
    req->ctype = ctype;
    req->resp = text ? text : strdup ("");
    if (req->sh->holding && !req->no_hold)
        hold (req);
    else
        httpreq_resume (req);
}

void http_reply (struct http_req *req, int status, json_t *body)
{
    char *text = body ? json_dumps (body, JSON_COMPACT) : NULL;
    json_decref (body);
    http_reply_text (req, status, "application/json", text);
}

static int problem_va (struct http_problem *p, int status, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 3, 0)));
static int problem_va (struct http_problem *p, int status, const char *fmt, va_list ap)
{
    int saved = errno;
    vsnprintf (p->detail, sizeof (p->detail), fmt, ap);
    p->status = status;
    errno = saved;
    return -1;
}

int http_problemf (struct http_problem *p, int status, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    problem_va (p, status, fmt, ap);
    va_end (ap);
    return -1;
}

int http_problem_errno (struct http_problem *p, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    problem_va (p, http_status_of_errno (errno), fmt, ap);
    va_end (ap);
    return -1;
}

void http_reply_failure (struct http_req *req, const struct http_problem *p)
{
    http_reply_problem (req, p->status, "%s", p->detail);
}

void http_reply_problem (struct http_req *req, int status, const char *fmt, ...)
{
    char detail[HTTP_DETAIL_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (detail, sizeof (detail), fmt, ap);
    va_end (ap);
    fmb_log_redact (detail);
    /* A 5xx is the broker's failure, not the caller's: the admin hears of
     * it too (a failing disk, a store error), not only the client. */
    if (status >= 500)
        fmb_log (LOG_ERR,
                 "%s %s%s: %d %s",
                 req->method,
                 req->p.job[0] ? "job " : "",
                 req->p.job,
                 status,
                 detail);
    json_t *o = json_pack ("{s:s, s:s, s:i, s:s}",
                           "type",
                           "about:blank",
                           "title",
                           reason_phrase (status),
                           "status",
                           status,
                           "detail",
                           detail);
    char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    http_reply_text (req, status, "application/problem+json", text);
}

void http_reply_uncommitted (struct http_req *req, const char *why)
{
    if (why && why[0])
        http_reply_problem (req,
                            503,
                            "the broker could not commit this change (%s); repeat "
                            "the request",
                            why);
    else
        http_reply_problem (
            req, 503, "the broker could not commit this change; repeat the request");
}

void http_no_hold (struct http_req *req)
{
    req->no_hold = true;
}

void http_retry_after (struct http_req *req, unsigned seconds)
{
    req->retry_after_s = seconds ? seconds : 1;
}

void http_suspend (struct http_req *req)
{
    req->want_suspend = true;
}

struct waiter *http_wait (struct http_req *req)
{
    return &req->wait;
}

const struct caller *http_caller (struct http_req *req)
{
    return &req->caller;
}

const char *http_job (struct http_req *req)
{
    return req->p.job;
}

const char *http_step (struct http_req *req, size_t *len)
{
    if (len)
        *len = req->p.step_len;
    return req->p.step;
}

const char *http_node (struct http_req *req)
{
    return req->p.node;
}

json_t *http_body (struct http_req *req)
{
    return req->json;
}

const char *http_body_text (struct http_req *req, size_t *len)
{
    *len = req->body ? req->len : 0;
    return req->body;
}

const char *http_query (struct http_req *req, const char *name)
{
    const char *raw =
        MHD_lookup_connection_value (req->conn, MHD_GET_ARGUMENT_KIND, name);
    if (!raw)
        return NULL;
    if (percent_decode (raw, strlen (raw), req->query_buf, sizeof (req->query_buf)) < 0)
        return NULL;
    return req->query_buf;
}

int http_query_bool (struct http_req *req, const char *name, bool *value)
{
    const char *v = http_query (req, name);
    *value = v && (strcmp (v, "1") == 0 || strcmp (v, "true") == 0);
    if (v && !*value && strcmp (v, "0") && strcmp (v, "false")) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int http_query_number (
    struct http_req *req, const char *name, uint64_t min, uint64_t max, uint64_t *value)
{
    const char *v = http_query (req, name);
    if (!v)
        return 0;
    /* digits only: strtoull alone takes a sign, spaces and "" too */
    size_t len = strspn (v, "0123456789");
    errno = 0;
    unsigned long long n = len ? strtoull (v, NULL, 10) : 0;
    if (!len || v[len] || errno || n < min || n > max) {
        errno = EINVAL;
        return -1;
    }
    *value = n;
    return 1;
}

/* ---- the refusal log ----------------------------------------------- */

/* A caller's budget goes by who it is: a node by its name (whatever
 * address it comes from), a TCP caller otherwise by its address's key
 * (an IPv6 one's /64), a local one by uid. */
bool httpreq_refusal_log_due (struct http_req *req)
{
    const struct caller *c = &req->caller;
    char key[REFUSALLOG_KEY_MAX], addr[TCPGUARD_ADDR_MAX];
    if (c->local)
        snprintf (key, sizeof (key), "uid %u", (unsigned)c->uid);
    else if (c->node[0])
        snprintf (key, sizeof (key), "node %s", c->node);
    else {
        fmb_addr_guess_key (c->addr, addr, sizeof (addr));
        snprintf (key, sizeof (key), "%s", addr);
    }
    return refusallog_due (req->sh->rlog, key, fmb_monotime_ms ());
}

void http_caller_name (const struct caller *c, char *out, size_t len)
{
    if (c->local)
        snprintf (out, len, "uid %u", (unsigned)c->uid);
    else if (c->node[0])
        snprintf (out, len, "node %s (%s)", c->node, c->addr);
    else if (c->roles & ROLE_AGENT)
        snprintf (out, len, "the shared agent token (%s)", c->addr);
    else if (c->roles & (ROLE_RM | ROLE_ADMIN))
        snprintf (out, len, "an rm/admin token (%s)", c->addr);
    else if (c->job_token_ok)
        snprintf (out, len, "a job token (%s)", c->addr);
    else
        snprintf (out, len, "an unauthenticated caller (%s)", c->addr);
}

void http_log_refusal (struct http_req *req, const char *fmt, ...)
{
    char what[HTTP_DETAIL_MAX], shown[HTTP_DETAIL_MAX], who[160];
    va_list ap;
    if (!httpreq_refusal_log_due (req))
        return;
    va_start (ap, fmt);
    vsnprintf (what, sizeof (what), fmt, ap);
    va_end (ap);
    fmb_log_escape (shown, sizeof (shown), what);
    fmb_log_redact (shown);
    http_caller_name (&req->caller, who, sizeof (who));
    fmb_log (LOG_WARNING, "api: refused %s: %s", who, shown);
}

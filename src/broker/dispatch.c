/* dispatch.c: one request from its URL to its handler (dispatch.h):
 * the route, the query, the caller's identity (callerid.c) and whether
 * its role may call the route, the body; every failure answered as a
 * problem document. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "callerid.h"
#include "conns.h"
#include "dispatch.h"
#include "httpconn.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "netaddr.h"

struct dispatch {
    const struct route *routes;
    unsigned nroutes;
    struct broker *route_arg; /* every handler's first argument */
    struct callerid *ids;
    dispatch_token_f job_token_ok;
    void *job_token_arg;
};

struct dispatch *dispatch_create (const struct route *routes,
                                  unsigned nroutes,
                                  struct broker *route_arg,
                                  struct callerid *ids,
                                  dispatch_token_f job_token_ok,
                                  void *job_token_arg)
{
    struct dispatch *d = calloc (1, sizeof (*d));
    if (d) {
        d->routes = routes;
        d->nroutes = nroutes;
        d->route_arg = route_arg;
        d->ids = ids;
        d->job_token_ok = job_token_ok;
        d->job_token_arg = job_token_arg;
    }
    return d;
}

void dispatch_destroy (struct dispatch *d)
{
    free (d);
}

/* Every query value must decode (no bad or %00 escapes) to text without
 * control characters; a bad one is an error, never taken as absent. */
struct query_check {
    char *buf;
    size_t size;
    const char *bad; /* the first bad key */
};

static enum MHD_Result check_query_arg (void *cls,
                                        enum MHD_ValueKind kind,
                                        const char *key,
                                        const char *value)
{
    struct query_check *qc = cls;
    (void)kind;
    const char *parts[2] = {key, value};
    for (int i = 0; i < 2; i++) {
        if (!parts[i])
            continue;
        long n = percent_decode (parts[i], strlen (parts[i]), qc->buf, qc->size);
        for (long k = 0; k < n; k++)
            if ((unsigned char)qc->buf[k] < 0x20 || qc->buf[k] == 0x7f)
                n = -1;
        if (n < 0) {
            qc->bad = key ? key : "";
            return MHD_NO;
        }
    }
    return MHD_YES;
}

static bool query_is_clean (struct http_req *req, char *why, size_t whylen)
{
    char buf[1024];
    struct query_check qc = {.buf = buf, .size = sizeof (buf)};
    MHD_get_connection_values (req->conn, MHD_GET_ARGUMENT_KIND, check_query_arg, &qc);
    if (!qc.bad)
        return true;
    char shown[64];
    fmb_log_escape (shown, sizeof (shown), qc.bad);
    snprintf (why,
              whylen,
              "query parameter '%s': bad percent-encoding, control characters or "
              "too long (at most %zu bytes)",
              shown,
              sizeof (buf) - 1);
    return false;
}

/* A TCP caller whose credential was refused: counted, logged (a line per
 * address per 10 s at most), and answered later and later (tcpguard.h);
 * an IPv6 caller as its /64, whose addresses one host may hold whole. */
static void auth_failed (struct http_req *req)
{
    struct tcpguard_verdict v;
    char key[TCPGUARD_ADDR_MAX];
    metrics_add (req->sh->metrics, METRIC_AUTH_FAILURES, 1);
    fmb_addr_guess_key (req->caller.addr, key, sizeof (key));
    tcpguard_auth_failed (req->sh->guard, key, fmb_monotime_ms (), &v);
    if (v.answer_at_ms && !req->sh->quiesced) {
        metrics_add (req->sh->metrics, METRIC_AUTH_DELAYED, 1);
        req->tarpit_until_ms = v.answer_at_ms;
    }
    if (v.cut) {
        struct http_conn *hc = conn_of (req->conn);
        if (hc && !hc->cut) {
            hc->cut = true;
            shutdown (hc->fd, SHUT_RDWR);
        }
    }
    if (v.log && httpreq_refusal_log_due (req))
        fmb_log (LOG_WARNING,
                 "api: authentication failed from %s: %u in the last minute%s%s",
                 req->caller.addr,
                 v.fails,
                 v.fails > TCPGUARD_FREE_FAILS ? "; answers to it are slowed" : "",
                 v.unlogged > 1 ? " (more than one since the last line)" : "");
}

/* ---- routing ------------------------------------------------------- */

/* The route of 'url' and the request's method; NULL with 'p' filled:
 * 405 (with Allow), 400 for a bad path parameter, or 404. */
static const struct route *find_route (const struct dispatch *d,
                                       struct http_req *req,
                                       const char *url,
                                       struct http_problem *p)
{
    char allow[64] = "";
    char why[160] = "";
    bool bad_param = false;
    for (unsigned i = 0; i < d->nroutes; i++) {
        const struct route *r = &d->routes[i];
        int m = api_match_path (r->path, url, &req->p, why, sizeof (why));
        if (m < 0)
            bad_param = true;
        if (m <= 0)
            continue;
        if (strcmp (r->method, req->method) == 0)
            return r;
        size_t used = strlen (allow);
        snprintf (
            allow + used, sizeof (allow) - used, "%s%s", used ? ", " : "", r->method);
    }
    if (allow[0]) {
        snprintf (req->allow, sizeof (req->allow), "%s", allow);
        http_problemf (
            p, 405, "%s is not allowed on %s (allowed: %s)", req->method, url, allow);
    } else if (bad_param)
        http_problemf (p, 400, "%s", why);
    else
        http_problemf (p, 404, "no such resource: %.200s", url);
    return NULL;
}

/* May this caller call 'route'?  401 without any credential, else 403. */
static int check_caller (struct dispatch *d,
                         struct http_req *req,
                         const struct route *route,
                         struct http_problem *p)
{
    callerid_identify (d->ids, req);
    struct caller *c = &req->caller;
    struct http_conn *hc = req->tcp ? conn_of (req->conn) : NULL;
    /* A job's token is a credential (for that job) even where it grants
     * nothing: its holder then gets 403, not 401. */
    if (c->bearer[0] && req->p.job[0])
        c->job_token_ok = d->job_token_ok (d->job_token_arg, req->p.job, c->bearer);
    if (hc && !hc->authed && (c->roles || c->job_token_ok))
        conns_authenticated (hc); /* no longer counts as unauthenticated */
    bool allowed = (route->who & ROLE_ANY) || (route->who & c->roles) ||
                   ((route->who & ROLE_JOB) && c->job_token_ok);
    if (allowed)
        return 0;
    if (!c->local && !c->roles && !c->job_token_ok) {
        if (c->bearer[0])
            auth_failed (req);
        return http_problemf (p, 401, "a valid bearer token is required");
    }
    http_log_refusal (
        req, "%s %s (not allowed for its role)", req->method, route->path);
    return http_problemf (
        p, 403, "%s %s is not allowed for this caller", req->method, route->path);
}

/* The body: within API_MAX_BODY, a JSON object for routes that take one,
 * absent for the others. */
static int check_body (struct http_req *req,
                       const struct route *route,
                       struct http_problem *p)
{
    if (req->too_large)
        return http_problemf (
            p, 413, "request body larger than %d bytes", API_MAX_BODY);
    if (route->body) {
        struct fmb_error e;
        req->json = fmb_json_load_object (req->body ? req->body : "", req->len, &e);
        if (!req->json)
            return http_problemf (p, 400, "%s", e.text);
    } else if (req->len > 0)
        return http_problemf (p, 400, "%s %s takes no body", req->method, route->path);
    return 0;
}

/* What the headers alone decide: the route, the query, and whether this
 * caller may call it.  Done before any body is read (issue 51): a
 * caller without a valid credential is answered at once, and its body
 * is never buffered, so a flood of large unauthenticated requests costs
 * the broker nothing but the reading.  True when answered. */
bool dispatch_headers (struct dispatch *d, struct http_req *req, const char *url)
{
    struct http_problem p;
    char qwhy[200];
    req->headers_checked = true;
    const struct route *route = find_route (d, req, url, &p);
    if (route && !query_is_clean (req, qwhy, sizeof (qwhy)))
        http_problemf (&p, 400, "%s", qwhy);
    else if (route && check_caller (d, req, route, &p) == 0) {
        req->route = route;
        return false;
    }
    http_reply_failure (req, &p);
    return true;
}

/* Route, query, caller and body checks, then the handler; every failure
 * is answered here, as a problem document. */
void dispatch_request (struct dispatch *d, struct http_req *req, const char *url)
{
    struct http_problem p;
    if (!req->headers_checked && dispatch_headers (d, req, url))
        return;
    const struct route *route = req->route;
    if (!route)
        return; /* (answered by dispatch_headers) */
    if (check_body (req, route, &p) < 0 || route->handler (d->route_arg, req, &p) < 0)
        goto fail;
    if (!req->replied && !req->want_suspend)
        http_reply_problem (req, 500, "the handler gave no answer");
    return;
fail:
    http_reply_failure (req, &p);
}

/* http.c: the REST API's transport (http.h).
 *
 * libmicrohttpd runs in external-epoll mode: its epoll fd joins the
 * broker's poll() set and MHD_run() is called from the loop, so handlers
 * run on the loop's thread and need no locks.  The URL is split on '/'
 * before percent-decoding (MHD's own unescaping is turned off), so an
 * encoded slash in a job id can never change the route.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <microhttpd.h>

#include "monotime.h"
#include "callerid.h"
#include "conns.h"
#include "dispatch.h"
#include "fileutil.h"
#include "http.h"
#include "httpconn.h"
#include "log.h"
#include "metrics.h"
#include "refusallog.h"
#include "tlsfront.h"

#define HTTP_CONN_TIMEOUT_S 30 /* the Unix socket's idle connections */
/* Our own limits answer 414 and 431 as problem documents; libmicrohttpd's
 * (a larger memory pool per connection) only catch what is far beyond
 * them, with its own HTML page. */
#define HTTP_MAX_TARGET   8192
#define HTTP_MAX_HEADERS  16384
#define HTTP_MEMORY_LIMIT (64 * 1024)
/* A TCP connection is a node's, kept open from job to job (10,000 of
 * them on a full machine): its pool holds one small request's headers
 * (HTTP_MAX_HEADERS and HTTP_MAX_TARGET fit) and its answer. */
#define HTTP_TCP_MEMORY_LIMIT (32 * 1024)

struct listener {
    struct http *h;
    struct MHD_Daemon *d;
    bool tcp;
    bool resumed; /* a connection of its resumed since its last MHD_run */
};

/* The TCP listener's connections are spread over this many libmicrohttpd
 * daemons, so that a loop pass can serve some of them and leave the rest
 * to the next: one MHD_run serves every ready connection of its daemon,
 * and a full machine's nodes all ready at once would hold the pass (and
 * the RM's answer on the socket, which goes at the pass's end) for
 * 10,000 requests' worth. */
#define TCP_SHARDS 32
/* A pass serves TCP shards for at most this long, the Unix socket's
 * daemon first in every pass. */
#define TCP_PASS_BUDGET_MS 10

struct http {
    struct http_shared sh;             /* what its requests share: held answers, ... */
    struct listener l[1 + TCP_SHARDS]; /* the Unix socket's, then TCP's shards */
    int n;
    int next_shard;          /* the TCP shard the next pass begins with */
    int shards_ep;           /* an epoll set of the shards' epoll fds; -1: none */
    struct conns *cs;        /* listening sockets, connections, their caps */
    struct callerid *ids;    /* tokens, node keys: who a caller is */
    struct dispatch *disp;   /* the route table and its checks */
    struct http_req *tarpit; /* failed authentications answered later */
    char *tls_cert;
    char *tls_key;
    char *tls_trust; /* [api] tls_client_ca's certificates */
};

/* ---- group commit --------------------------------------------------- */

void http_hold (struct http *h, bool on)
{
    h->sh.holding = on;
}

bool http_holds_answers (const struct http *h)
{
    return h->sh.held != NULL;
}

int http_release (struct http *h, bool committed, const char *why)
{
    return httpreq_release (&h->sh, committed, why);
}

/* ---- MHD glue ------------------------------------------------------ */

static size_t no_unescape (void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls;
    (void)c;
    return strlen (uri); /* we decode per path segment ourselves */
}

static enum MHD_Result queue (struct http_req *req)
{
    size_t len = strlen (req->resp);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer (len, req->resp, MHD_RESPMEM_MUST_FREE);
    req->resp = NULL;
    if (!resp)
        return MHD_NO;
    MHD_add_response_header (resp, "Content-Type", req->ctype);
    MHD_add_response_header (resp, "Cache-Control", "no-store");
    if (req->allow[0])
        MHD_add_response_header (resp, "Allow", req->allow);
    if (req->retry_after_s) {
        char secs[16];
        snprintf (secs, sizeof (secs), "%u", req->retry_after_s);
        MHD_add_response_header (resp, "Retry-After", secs);
    }
    enum MHD_Result ret = MHD_queue_response (req->conn, (unsigned)req->status, resp);
    MHD_destroy_response (resp);
    metrics_count_status (req->sh->metrics, req->status);
    return ret;
}

static void notify_cb (void *cls,
                       struct MHD_Connection *mc,
                       void **ctx,
                       enum MHD_ConnectionNotificationCode code)
{
    struct listener *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conns_started (l->h->cs, l->tcp, mc, ctx);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        conns_closed (l->h->cs, ctx);
}

static enum MHD_Result add_length (void *cls,
                                   enum MHD_ValueKind kind,
                                   const char *key,
                                   const char *value)
{
    size_t *total = cls;
    (void)kind;
    *total += (key ? strlen (key) : 0) + (value ? strlen (value) : 0) + 4;
    return MHD_YES;
}

static int oversize_status (struct MHD_Connection *conn, const char *url)
{
    size_t target = strlen (url), headers = 0;
    MHD_get_connection_values (conn, MHD_GET_ARGUMENT_KIND, add_length, &target);
    if (target > HTTP_MAX_TARGET)
        return 414;
    MHD_get_connection_values (conn, MHD_HEADER_KIND, add_length, &headers);
    return headers > HTTP_MAX_HEADERS ? 431 : 0;
}

/* A failed authentication's answer, held: it goes when its turn comes
 * (tarpit_run), the loop meanwhile serves everyone else. */
static void tarpit_add (struct http_req *req)
{
    if (!req->in_tarpit) {
        req->in_tarpit = true;
        req->tarpit_next = req->h->tarpit;
        req->h->tarpit = req;
    }
    if (!req->suspended) {
        req->suspended = true;
        MHD_suspend_connection (req->conn);
    }
}

/* A request's first call: its record, and whether its target or headers
 * are over our limits already. */
static struct http_req *req_new (struct listener *l,
                                 struct MHD_Connection *conn,
                                 const char *url,
                                 const char *method)
{
    struct http_req *req = calloc (1, sizeof (*req));
    if (!req)
        return NULL;
    req->h = l->h;
    req->sh = &l->h->sh;
    req->tcp = l->tcp;
    req->conn = conn;
    req->resumed = &l->resumed;
    req->wait.req = req;
    snprintf (req->method, sizeof (req->method), "%s", method);
    req->early_status = oversize_status (conn, url);
    return req;
}

/* More of the body: kept up to API_MAX_BODY, past it only noted. */
static enum MHD_Result req_read (struct http_req *req, const char *data, size_t n)
{
    if (req->len + n > API_MAX_BODY)
        req->too_large = true; /* keep reading, answer 413 at the end */
    else {
        char *nb = realloc (req->body, req->len + n + 1);
        if (!nb)
            return MHD_NO;
        memcpy (nb + req->len, data, n);
        req->body = nb;
        req->len += n;
        req->body[req->len] = '\0';
    }
    return MHD_YES;
}

static enum MHD_Result access_cb (void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_size,
                                  void **con_cls)
{
    struct listener *l = cls;
    struct http_req *req = *con_cls;
    (void)version;
    if (!req) {
        *con_cls = req = req_new (l, conn, url, method);
        if (!req)
            return MHD_NO;
        /* The caller's credential from the headers, before the body: a
         * refusal is answered now (libmicrohttpd then reads no body and
         * closes the connection after the answer). */
        if (req->early_status || !dispatch_headers (l->h->disp, req, url))
            return MHD_YES;
        req->handled = true;
        conns_disarm (conn);
    } else if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (req->handled) /* answered already: the body is not kept */
            return MHD_YES;
        return req_read (req, upload_data, n);
    }
    if (!req->handled) {
        req->handled = true;
        conns_disarm (conn);
        if (req->early_status == 414)
            http_reply_problem (
                req, 414, "request target longer than %d bytes", HTTP_MAX_TARGET);
        else if (req->early_status == 431)
            http_reply_problem (
                req, 431, "request headers larger than %d bytes", HTTP_MAX_HEADERS);
        else
            dispatch_request (l->h->disp, req, url);
    }
    if (req->replied && req->held) {
        /* answered in this pass: goes out after the pass's commit */
        if (!req->suspended) {
            req->suspended = true;
            MHD_suspend_connection (conn);
        }
        return MHD_YES;
    }
    if (req->replied && req->tarpit_until_ms > fmb_monotime_ms ()) {
        tarpit_add (req);
        return MHD_YES;
    }
    if (req->replied)
        return queue (req);
    if (req->want_suspend && !req->suspended) {
        req->suspended = true;
        MHD_suspend_connection (conn);
    }
    return MHD_YES;
}

static void tarpit_remove (struct http_req *req)
{
    for (struct http_req **pp = &req->h->tarpit; *pp; pp = &(*pp)->tarpit_next)
        if (*pp == req) {
            *pp = req->tarpit_next;
            break;
        }
    req->in_tarpit = false;
}

/* Until the earliest delayed answer is due (0: now; -1: none). */
static int64_t tarpit_next_ms (const struct http *h)
{
    int64_t now = fmb_monotime_ms (), next = -1;
    for (const struct http_req *r = h->tarpit; r; r = r->tarpit_next) {
        int64_t d = r->tarpit_until_ms > now ? r->tarpit_until_ms - now : 0;
        if (next < 0 || d < next)
            next = d;
    }
    return next;
}

/* Resume the delayed answers whose time came. */
static void tarpit_run (struct http *h)
{
    int64_t now = fmb_monotime_ms ();
    for (struct http_req **pp = &h->tarpit; *pp;) {
        struct http_req *req = *pp;
        if (req->tarpit_until_ms <= now) {
            *pp = req->tarpit_next;
            req->in_tarpit = false;
            req->tarpit_until_ms = 0;
            httpreq_resume (req);
            continue;
        }
        pp = &req->tarpit_next;
    }
}

static void completed_cb (void *cls,
                          struct MHD_Connection *c,
                          void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    struct http_conn *hc = conn_of (c);
    if (hc && !hc->cut) /* until the next request on this connection */
        conns_arm_idle (hc);
    if (hc && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        conns_park (hc);
    struct http_req *req = *con_cls;
    if (req && req->in_tarpit)
        tarpit_remove (req);
    if (req) {
        waitq_remove (&req->wait); /* out of whichever wait queue holds it */
        json_decref (req->json);
        free (req->body);
        free (req->resp);
        free (req);
        *con_cls = NULL;
    }
}

__attribute__ ((format (printf, 2, 0))) static void mhd_log (void *cls,
                                                             const char *fmt,
                                                             va_list ap)
{
    (void)cls;
    static bool delay_said;
    char line[512];
    vsnprintf (line, sizeof (line), fmt, ap);
    line[strcspn (line, "\n")] = '\0';
    /* libmicrohttpd cannot cork a Unix socket (no TCP options) and says
     * so at every answer; the client sees no delay on a Unix socket.
     * Once is enough to know it. */
    if (strstr (line, "Client may experience some delay")) {
        if (delay_said)
            return;
        delay_said = true;
        fmb_log (LOG_DEBUG, "http: %s (said once; on a Unix socket it is noise)", line);
        return;
    }
    fmb_log (LOG_DEBUG, "http: %s", line);
}

/* ---- listeners ----------------------------------------------------- */

/* Does the file at 'path' hold other bytes than 'served' (NULL: none
 * loaded)?  An unreadable file is not news here: the next start says. */
static bool file_differs (const char *path, const char *served)
{
    char *text = NULL;
    size_t len = 0;
    if (!served || fmb_read_file (path, 1024 * 1024, false, &text, &len, NULL) < 0)
        return false;
    bool differs = strcmp (text, served) != 0;
    explicit_bzero (text, len);
    free (text);
    return differs;
}

int http_tls_changed (struct http *h, const struct fmb_config *cfg)
{
    int changed = 0;
    const struct {
        const char *key, *path, *served;
    } files[] = {{"[api] tls_cert", cfg->tls_cert, h->tls_cert},
                 {"[api] tls_key", cfg->tls_key, h->tls_key}};
    for (size_t i = 0; i < sizeof (files) / sizeof (files[0]); i++)
        if (file_differs (files[i].path, files[i].served)) {
            fmb_log (LOG_WARNING,
                     "reload: %s %s changed on disk (renewed?); the broker serves the "
                     "one it started with until the next restart",
                     files[i].key,
                     files[i].path);
            changed++;
        }
    return changed;
}

/* Neither listener has a listen socket of MHD's own: accept_unix() and
 * accept_tcp() hand it connections already counted.  Both serve plain
 * HTTP: the TCP one's TLS ([api] tls_priorities, client certificates
 * with tls_client_ca) is the TLS front's (tlsfront.h), on threads of its
 * own, which hands MHD the plaintext end of each connection.  MHD's own
 * idle cut is off there: conns.c times requests, and keeps a node's
 * authenticated connection open between them. */
static struct MHD_Daemon *start_daemon (struct listener *l, unsigned max_conns)
{
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET;
    return MHD_start_daemon (
        flags,
        0,
        NULL,
        NULL,
        access_cb,
        l,
        MHD_OPTION_NOTIFY_COMPLETED,
        completed_cb,
        NULL,
        MHD_OPTION_NOTIFY_CONNECTION,
        notify_cb,
        l,
        MHD_OPTION_UNESCAPE_CALLBACK,
        no_unescape,
        NULL,
        MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log,
        NULL,
        MHD_OPTION_CONNECTION_TIMEOUT,
        l->tcp ? 0u : (unsigned)HTTP_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(l->tcp ? HTTP_TCP_MEMORY_LIMIT : HTTP_MEMORY_LIMIT),
        MHD_OPTION_CONNECTION_LIMIT,
        max_conns + 1, /* our own tables are the real limit */
        MHD_OPTION_END);
}

/* The shards' epoll fds in one epoll set of ours: the loop's poll()
 * watches that one fd, and a pass asks it which shards are ready, not
 * each of the 32 (ready_shards). */
static int shards_watch (struct http *h, struct fmb_error *error)
{
    if ((h->shards_ep = epoll_create1 (EPOLL_CLOEXEC)) < 0)
        return fmb_errorf (error, "epoll_create1: %s", strerror (errno));
    for (int i = 1; i < h->n; i++) {
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info (h->l[i].d, MHD_DAEMON_INFO_EPOLL_FD);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl (h->shards_ep, EPOLL_CTL_ADD, di->epoll_fd, &ev) < 0)
            return fmb_errorf (error, "epoll_ctl: %s", strerror (errno));
    }
    return 0;
}

/* The TCP listener: tokens, node keys, certificate and key, the socket,
 * its bounds, and its MHD with TLS. */
static int tcp_start (struct http *h,
                      const struct fmb_config *cfg,
                      struct fmb_error *error)
{
    unsigned max_conns;
    if (callerid_load (h->ids, cfg, error) < 0 ||
        fmb_read_file (cfg->tls_cert, 1024 * 1024, false, &h->tls_cert, NULL, error) <
            0 ||
        fmb_check_private_file (cfg->tls_key, error) < 0 ||
        fmb_read_file (cfg->tls_key, 1024 * 1024, false, &h->tls_key, NULL, error) <
            0 ||
        (cfg->tls_client_ca[0] &&
         fmb_read_file (
             cfg->tls_client_ca, 1024 * 1024, false, &h->tls_trust, NULL, error) < 0))
        return -1;
    struct tlsfront_files tls = {
        h->tls_cert, h->tls_key, cfg->tls_priorities, h->tls_trust};
    if (conns_listen_tcp (h->cs, cfg, &tls, &max_conns, error) < 0)
        return -1;
    h->sh.guard = conns_guard (h->cs);
    for (int i = 1; i <= TCP_SHARDS; i++) {
        h->l[i].tcp = true;
        if (!(h->l[i].d = start_daemon (&h->l[i], max_conns)))
            return fmb_errorf (
                error, "[api] tcp = %s: cannot start the HTTP server", cfg->tcp);
        conns_add_daemon (h->cs, true, h->l[i].d);
        h->n = i + 1;
    }
    return shards_watch (h, error);
}

int http_create (const struct fmb_config *cfg,
                 const struct http_deps *deps,
                 struct http **ret,
                 struct fmb_error *error)
{
    struct http *h = calloc (1, sizeof (*h));
    if (!h)
        return fmb_errorf (error, "out of memory");
    for (int i = 0; i <= TCP_SHARDS; i++)
        h->l[i].h = h;
    h->shards_ep = -1;
    h->sh.metrics = deps->metrics;
    if (!(h->sh.rlog = refusallog_create ()) ||
        !(h->cs = conns_create (cfg, deps->roles, deps->metrics)) ||
        !(h->ids = callerid_create (cfg, deps->roles)) ||
        !(h->disp = dispatch_create (deps->routes,
                                     deps->nroutes,
                                     deps->route_arg,
                                     h->ids,
                                     deps->job_token_ok,
                                     deps->job_token_arg))) {
        fmb_errorf (error, "out of memory");
        goto error;
    }
    if (conns_listen_unix (h->cs, cfg->socket, error) < 0)
        goto error;
    h->l[0].tcp = false;
    if (!(h->l[0].d = start_daemon (&h->l[0], conns_max_unix (h->cs)))) {
        fmb_errorf (
            error, "[api] socket %s: cannot start the HTTP server", cfg->socket);
        goto error;
    }
    conns_add_daemon (h->cs, false, h->l[0].d);
    h->n = 1;
    if (cfg->tcp[0] && tcp_start (h, cfg, error) < 0)
        goto error;
    *ret = h;
    return 0;
error:
    http_destroy (h);
    return -1;
}

int http_reload_tokens (struct http *h,
                        const struct fmb_config *cfg,
                        struct fmb_error *error)
{
    if (h->n < 2)
        return 0; /* no TCP listener: the file is not used */
    return callerid_reload (h->ids, cfg, error);
}

void http_print_tls (struct http *h, FILE *f)
{
    struct tlsfront *tf = conns_front (h->cs);
    struct tlsfront_stats st;
    if (!tf)
        return;
    tlsfront_stats (tf, &st);
    fprintf (f,
             "# HELP fmbroker_tls_handshakes_total TLS handshakes done on the TCP "
             "listener, by whether they resumed a session (a ticket).\n"
             "# TYPE fmbroker_tls_handshakes_total counter\n"
             "fmbroker_tls_handshakes_total{resumed=\"false\"} %llu\n"
             "fmbroker_tls_handshakes_total{resumed=\"true\"} %llu\n",
             st.handshakes - st.resumed,
             st.resumed);
    fprintf (f,
             "# HELP fmbroker_tls_handshakes_failed_total TLS handshakes that failed, "
             "or took longer than [api] request_timeout_ms.\n"
             "# TYPE fmbroker_tls_handshakes_failed_total counter\n"
             "fmbroker_tls_handshakes_failed_total{why=\"error\"} %llu\n"
             "fmbroker_tls_handshakes_failed_total{why=\"timeout\"} %llu\n",
             st.failed,
             st.timed_out);
    fprintf (f,
             "# HELP fmbroker_tls_handshake_cpu_seconds_total CPU the TLS threads "
             "spent in handshakes.\n"
             "# TYPE fmbroker_tls_handshake_cpu_seconds_total counter\n"
             "fmbroker_tls_handshake_cpu_seconds_total %.6f\n",
             (double)st.handshake_us / 1e6);
    fprintf (f,
             "# HELP fmbroker_tcp_connections TCP connections past their handshake, by "
             "state: relayed (a socketpair to the HTTP server: a request, or a new "
             "connection's first), parked (authenticated, idle: its TLS socket "
             "only), waiting (for a relay).\n"
             "# TYPE fmbroker_tcp_connections gauge\n"
             "fmbroker_tcp_connections{state=\"relayed\"} %llu\n"
             "fmbroker_tcp_connections{state=\"parked\"} %llu\n"
             "fmbroker_tcp_connections{state=\"waiting\"} %llu\n",
             st.relayed,
             st.parked,
             st.waiting);
    fprintf (f,
             "# HELP fmbroker_tcp_parks_total Idle authenticated TCP connections "
             "parked (their socketpair and HTTP connection closed, the TLS session "
             "kept).\n"
             "# TYPE fmbroker_tcp_parks_total counter\n"
             "fmbroker_tcp_parks_total %llu\n",
             st.parks);
}

void http_quiesce (struct http *h)
{
    h->sh.quiesced = true;
    /* answers held back for failed authentications go now: nothing
     * suspended may outlive the daemons */
    for (struct http_req *r = h->tarpit; r; r = r->tarpit_next)
        r->tarpit_until_ms = 0;
    tarpit_run (h);
    conns_quiesce (h->cs);
}

void http_destroy (struct http *h)
{
    if (h) {
        for (int i = 0; i <= TCP_SHARDS; i++)
            if (h->l[i].d)
                MHD_stop_daemon (h->l[i].d);
        if (h->shards_ep >= 0)
            close (h->shards_ep);
        conns_destroy (h->cs);
        dispatch_destroy (h->disp);
        callerid_destroy (h->ids);
        refusallog_destroy (h->sh.rlog);
        free (h->tls_trust);
        if (h->tls_key)
            explicit_bzero (h->tls_key, strlen (h->tls_key));
        free (h->tls_key);
        free (h->tls_cert);
        free (h);
    }
}

int http_pollfds (struct http *h, struct pollfd *fds, int max)
{
    int n = conns_pollfds (h->cs, fds, max);
    int watched[2] = {
        MHD_get_daemon_info (h->l[0].d, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd,
        h->shards_ep};
    for (int i = 0; i < 2 && n < max; i++)
        if (watched[i] >= 0)
            fds[n++] = (struct pollfd){.fd = watched[i], .events = POLLIN};
    return n;
}

static int earliest (int a, int64_t b)
{
    if (b < 0)
        return a;
    if (b > 60000)
        b = 60000;
    return a < 0 || b < a ? (int)b : a;
}

int http_timeout_ms (struct http *h)
{
    int best = -1;
    for (int i = 0; i < h->n; i++) {
        MHD_UNSIGNED_LONG_LONG t;
        if (h->l[i].resumed) /* since its last MHD_run: the pass's commit
                              * released answers, a timer, a budget cut */
            return 0;
        if (MHD_get_timeout (h->l[i].d, &t) == MHD_YES)
            best = earliest (best, t > 60000 ? 60000 : (int64_t)t);
    }
    best = earliest (best, conns_next_deadline_ms (h->cs));
    best = earliest (best, tarpit_next_ms (h));
    best = earliest (best, refusallog_next_ms (h->sh.rlog, fmb_monotime_ms ()));
    return earliest (best, conns_accept_paused_ms (h->cs));
}

/* The TCP shards with work: an epoll fd readable (a request's bytes, a
 * connection handed over), a wait of 0 (data it read ahead, a
 * connection's timeout due) or a connection resumed (an answer released:
 * libmicrohttpd in external mode has no eventfd to say so, MHD_run finds
 * them).  One epoll_wait() on shards_ep, not an MHD_run of each shard:
 * that is an epoll_wait() and a walk of its lists even when it finds
 * nothing, for 32 shards mostly idle, several times a loop pass.
 * Returns how many are in 'ready' (listener indexes), in the order they
 * are to run. */
static int ready_shards (struct http *h, int *ready)
{
    struct epoll_event ev[TCP_SHARDS];
    bool readable[1 + TCP_SHARDS] = {false};
    int shards = h->n - 1, n = 0;
    int got = shards > 0 ? epoll_wait (h->shards_ep, ev, TCP_SHARDS, 0) : 0;
    if (got < 0) /* cannot tell: every shard runs */
        for (int i = 1; i <= shards; i++)
            readable[i] = true;
    for (int k = 0; k < got; k++)
        readable[ev[k].data.u32] = true;
    for (int k = 0; k < shards; k++) {
        int i = 1 + (h->next_shard + k) % shards;
        MHD_UNSIGNED_LONG_LONG t;
        if (readable[i] || h->l[i].resumed ||
            (MHD_get_timeout (h->l[i].d, &t) == MHD_YES && t == 0))
            ready[n++] = i;
    }
    return n;
}

void http_process (struct http *h, const struct pollfd *fds, int n)
{
    conns_accept (h->cs, fds, n);
    conns_cut_late (h->cs);
    tarpit_run (h);
    refusallog_flush (h->sh.rlog, fmb_monotime_ms ()); /* its window's end */
    h->l[0].resumed = false;
    MHD_run (h->l[0].d); /* the Unix socket: the RM and admins */
    /* then TCP's shards with work, each its ready connections, within
     * the budget; the next pass goes on from where this one stopped
     * (the shards' epoll fds still readable make it come at once) */
    int ready[TCP_SHARDS];
    int nready = ready_shards (h, ready);
    int64_t until = fmb_monotime_ms () + TCP_PASS_BUDGET_MS;
    for (int k = 0; k < nready; k++) {
        h->l[ready[k]].resumed = false;
        MHD_run (h->l[ready[k]].d);
        if (fmb_monotime_ms () >= until) {
            h->next_shard = ready[k] % (h->n - 1); /* the one after it */
            return;
        }
    }
}

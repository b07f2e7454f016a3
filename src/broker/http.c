/* http.c: see http.h.
 *
 * libmicrohttpd runs in external-epoll mode: its epoll fd joins the
 * broker's poll() set and MHD_run() is called from the loop, so handlers
 * run on the loop's thread and need no locks.  The URL is split on '/'
 * before percent-decoding (MHD's own unescaping is turned off), so an
 * encoded slash in a job id can never change the route.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "broker.h"
#include "fileutil.h"
#include "jsonutil.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "peers.h"

#define HTTP_CONN_TIMEOUT_S 30
/* Our own limits answer 414 and 431 as problem documents; libmicrohttpd's
 * (a larger memory pool per connection) only catch what is far beyond
 * them, with its own HTML page. */
#define HTTP_MAX_TARGET   8192
#define HTTP_MAX_HEADERS  16384
#define HTTP_MEMORY_LIMIT (64 * 1024)
#define ACCEPTS_PER_PASS  64 /* a flood of connects cannot hold the loop */
#define TOKENS_FILE_MAX   (64 * 1024)
#define MAX_STATIC_TOKENS 64

struct static_token {
    unsigned roles;
    char value[256];
};

struct listener {
    struct http *h;
    struct MHD_Daemon *d;
    bool tcp;
};

/* One connection, from libmicrohttpd's "started" to its "closed".  Its
 * deadline bounds how long the request being read may take in total: a
 * byte now and then does not extend it (libmicrohttpd's own timeout
 * would). */
struct http_conn {
    struct http *h;
    struct http_conn *prev, *next;
    int fd;
    bool counted; /* holds a slot in h->peers for uid */
    bool privileged;
    bool cut;
    uid_t uid;
    int64_t deadline_ms; /* 0 while a request is being handled */
};

struct http {
    struct broker *b;
    bool holding;          /* answers wait for the loop pass's commit */
    struct http_req *held; /* those answers */
    struct listener l[2];
    int n;
    char sock_path[FMB_UNIX_PATH_MAX];
    int unix_fd;         /* accepted here, so SO_PEERCRED decides first */
    struct peers *peers; /* the Unix socket's connections per uid */
    struct peer_limits limits;
    unsigned request_timeout_ms;
    unsigned backlog;
    struct http_conn *conns;
    struct { /* the accepted socket being handed to MHD */
        bool valid;
        int fd;
        uid_t uid;
        bool privileged;
    } pending;
    int64_t refused_logged_ms;
    struct static_token tokens[MAX_STATIC_TOKENS];
    int ntokens;
    char *tls_cert;
    char *tls_key;
};

struct http_req {
    struct http *h;
    struct listener *l;
    struct MHD_Connection *conn;
    char method[16];
    char *body;
    size_t len;
    bool too_large;
    int early_status; /* 414 or 431, found with the headers */
    bool handled;
    bool want_suspend;
    bool suspended;
    bool replied;
    int status;
    char *resp;
    const char *ctype;
    char allow[64];
    unsigned retry_after_s; /* 0: no Retry-After header */
    json_t *json;
    struct caller caller;
    struct api_params p;
    char query_buf[1024];
    struct waiter wait;
    bool held;
    bool no_hold;
    struct http_req *held_next;
};

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

static void resume (struct http_req *req)
{
    if (req->suspended) {
        req->suspended = false;
        MHD_resume_connection (req->conn);
    }
}

/* An answer made while the loop pass's transaction is open waits for its
 * commit: nobody hears "done" before it is durable. */
static void hold (struct http_req *req)
{
    if (!req->held) {
        req->held = true;
        req->held_next = req->h->held;
        req->h->held = req;
    }
}

void http_hold (struct http *h, bool on)
{
    h->holding = on;
}

bool http_holds_answers (const struct http *h)
{
    return h->held != NULL;
}

int http_release (struct http *h, bool committed, const char *why)
{
    int n = 0;
    struct http_req *list = h->held;
    h->held = NULL;
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
        resume (req);
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
    if (req->h->holding && !req->no_hold)
        hold (req);
    else
        resume (req);
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

/* ---- identity ------------------------------------------------------ */

static void identify (struct http *h, struct http_req *req)
{
    struct caller *c = &req->caller;
    memset (c, 0, sizeof (*c));
    const char *auth =
        MHD_lookup_connection_value (req->conn, MHD_HEADER_KIND, "Authorization");
    if (auth && strncasecmp (auth, "Bearer ", 7) == 0)
        snprintf (c->bearer, sizeof (c->bearer), "%s", auth + 7);
    if (!req->l->tcp) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info (req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof (cred);
        if (ci &&
            getsockopt (ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            c->local = true;
            c->uid = cred.uid;
            c->gid = cred.gid;
            c->roles = roles_of (h->b->roles, cred.uid, cred.gid) | ROLE_USER;
        }
        return;
    }
    /* TCP: static tokens only, compared in constant time. */
    size_t blen = strlen (c->bearer);
    for (int i = 0; i < h->ntokens && blen; i++) {
        size_t tlen = strlen (h->tokens[i].value);
        if (tlen == blen && CRYPTO_memcmp (h->tokens[i].value, c->bearer, blen) == 0)
            c->roles |= h->tokens[i].roles;
    }
}

/* ---- routing ------------------------------------------------------- */

/* The route of 'url' and the request's method; NULL with 'p' filled:
 * 405 (with Allow), 400 for a bad path parameter, or 404. */
static const struct route *find_route (struct http_req *req,
                                       const char *url,
                                       struct http_problem *p)
{
    char allow[64] = "";
    char why[160] = "";
    bool bad_param = false;
    for (unsigned i = 0; i < broker_nroutes; i++) {
        const struct route *r = &broker_routes[i];
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
static int check_caller (struct http *h,
                         struct http_req *req,
                         const struct route *route,
                         struct http_problem *p)
{
    identify (h, req);
    struct caller *c = &req->caller;
    /* A job's token is a credential (for that job) even where it grants
     * nothing: its holder then gets 403, not 401. */
    if (c->bearer[0] && req->p.job[0])
        c->job_token_ok = broker_job_token_matches (h->b, req->p.job, c->bearer);
    bool allowed = (route->who & ROLE_ANY) || (route->who & c->roles) ||
                   ((route->who & ROLE_JOB) && c->job_token_ok);
    if (allowed)
        return 0;
    if (!c->local && !c->roles && !c->job_token_ok)
        return http_problemf (p, 401, "a valid bearer token is required");
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

/* Route, query, caller and body checks, then the handler; every failure
 * is answered here, as a problem document. */
static void dispatch (struct http *h, struct http_req *req, const char *url)
{
    struct http_problem p;
    char qwhy[200];
    const struct route *route = find_route (req, url, &p);
    if (!route)
        goto fail;
    if (!query_is_clean (req, qwhy, sizeof (qwhy))) {
        http_problemf (&p, 400, "%s", qwhy);
        goto fail;
    }
    if (check_caller (h, req, route, &p) < 0 || check_body (req, route, &p) < 0 ||
        route->handler (h->b, req, &p) < 0)
        goto fail;
    if (!req->replied && !req->want_suspend)
        http_reply_problem (req, 500, "the handler gave no answer");
    return;
fail:
    http_reply_failure (req, &p);
}

/* ---- connections: fair share and request deadlines ------------------ */

static struct http_conn *conn_of (struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_arm (struct http_conn *c)
{
    c->deadline_ms = now_mono () + c->h->request_timeout_ms;
}

/* The request is read: what remains is the broker's work, not the peer's. */
static void conn_disarm (struct MHD_Connection *mc)
{
    struct http_conn *c = conn_of (mc);
    if (c)
        c->deadline_ms = 0;
}

static void conn_started (struct listener *l, struct MHD_Connection *mc, void **ctx)
{
    struct http *h = l->h;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct http_conn *c = calloc (1, sizeof (*c));
    if (!c || !ci) { /* untracked: the accept path gives its slot back */
        free (c);
        return;
    }
    c->h = h;
    c->fd = ci->connect_fd;
    if (!l->tcp && h->pending.valid && h->pending.fd == c->fd) {
        c->counted = true; /* the slot taken at accept is now this one's */
        c->uid = h->pending.uid;
        c->privileged = h->pending.privileged;
        h->pending.valid = false;
    }
    conn_arm (c);
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    *ctx = c;
}

static void conn_closed (struct http *h, void **ctx)
{
    struct http_conn *c = *ctx;
    if (!c)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->counted)
        peers_release (h->peers, c->uid, c->privileged);
    free (c);
    *ctx = NULL;
}

static void notify_cb (void *cls,
                       struct MHD_Connection *mc,
                       void **ctx,
                       enum MHD_ConnectionNotificationCode code)
{
    struct listener *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_started (l, mc, ctx);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        conn_closed (l->h, ctx);
}

/* Cut connections whose request is late: shutting the socket down makes
 * libmicrohttpd read end-of-file, close it, and free its slot. */
static void cut_late (struct http *h)
{
    int64_t now = now_mono ();
    for (struct http_conn *c = h->conns; c; c = c->next)
        if (c->deadline_ms && !c->cut && now >= c->deadline_ms) {
            c->cut = true;
            shutdown (c->fd, SHUT_RDWR);
        }
}

static int next_deadline_ms (const struct http *h)
{
    int64_t best = -1, now = now_mono ();
    for (const struct http_conn *c = h->conns; c; c = c->next)
        if (c->deadline_ms && !c->cut && (best < 0 || c->deadline_ms < best))
            best = c->deadline_ms;
    if (best < 0)
        return -1;
    return best <= now ? 0 : (int)(best - now > 60000 ? 60000 : best - now);
}

/* Over its limit: a short problem document, then close.  Never blocks. */
static void refuse (struct http *h, int fd, uid_t uid, const char *why)
{
    char body[256], msg[512];
    int blen = snprintf (body,
                         sizeof (body),
                         "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\","
                         "\"status\":503,\"detail\":\"too many connections from uid "
                         "%u ([api] %s)\"}",
                         (unsigned)uid,
                         why);
    int mlen = snprintf (msg,
                         sizeof (msg),
                         "HTTP/1.1 503 Service Unavailable\r\n"
                         "Content-Type: application/problem+json\r\n"
                         "Retry-After: 1\r\nConnection: close\r\n"
                         "Content-Length: %d\r\n\r\n%s",
                         blen,
                         body);
    ssize_t ignored = send (fd, msg, (size_t)mlen, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    close (fd);
    int64_t now = now_mono ();
    if (now - h->refused_logged_ms >= 10000) { /* a flood is one line per 10 s */
        h->refused_logged_ms = now;
        fmb_log (LOG_WARNING,
                 "api: refusing connections from uid %u: [api] %s reached",
                 (unsigned)uid,
                 why);
    }
}

/* Accept on the Unix socket ourselves: the peer's uid is known before the
 * connection takes a slot, so one user's flood only fills that user's. */
static void accept_unix (struct http *h)
{
    for (int i = 0; i < ACCEPTS_PER_PASS && h->unix_fd >= 0; i++) {
        struct sockaddr_un sa;
        socklen_t salen = sizeof (sa);
        int fd = accept4 (
            h->unix_fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                fmb_log (LOG_WARNING, "api: accept: %s", strerror (errno));
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof (cred);
        if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            close (fd);
            continue;
        }
        bool privileged =
            roles_of (h->b->roles, cred.uid, cred.gid) & (ROLE_RM | ROLE_ADMIN);
        const char *why = NULL;
        if (!peers_admit (h->peers, cred.uid, privileged, &why)) {
            refuse (h, fd, cred.uid, why);
            continue;
        }
        h->pending.valid = true;
        h->pending.fd = fd;
        h->pending.uid = cred.uid;
        h->pending.privileged = privileged;
        MHD_add_connection (h->l[0].d, fd, (struct sockaddr *)&sa, salen);
        if (h->pending.valid) { /* not taken over by a tracked connection */
            h->pending.valid = false;
            peers_release (h->peers, cred.uid, privileged);
        }
    }
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
    broker_count_request (req->h->b, req->status);
    return ret;
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
    struct http *h = l->h;
    struct http_req *req = *con_cls;
    (void)version;
    if (!req) {
        req = calloc (1, sizeof (*req));
        if (!req)
            return MHD_NO;
        req->h = h;
        req->l = l;
        req->conn = conn;
        req->wait.req = req;
        snprintf (req->method, sizeof (req->method), "%s", method);
        req->early_status = oversize_status (conn, url);
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_size) {
        if (req->len + *upload_size > API_MAX_BODY)
            req->too_large = true; /* keep reading, answer 413 at the end */
        else {
            char *nb = realloc (req->body, req->len + *upload_size + 1);
            if (!nb)
                return MHD_NO;
            memcpy (nb + req->len, upload_data, *upload_size);
            req->body = nb;
            req->len += *upload_size;
            req->body[req->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (!req->handled) {
        req->handled = true;
        conn_disarm (conn);
        if (req->early_status == 414)
            http_reply_problem (
                req, 414, "request target longer than %d bytes", HTTP_MAX_TARGET);
        else if (req->early_status == 431)
            http_reply_problem (
                req, 431, "request headers larger than %d bytes", HTTP_MAX_HEADERS);
        else
            dispatch (h, req, url);
    }
    if (req->replied && req->held) {
        /* answered in this pass: goes out after the pass's commit */
        if (!req->suspended) {
            req->suspended = true;
            MHD_suspend_connection (conn);
        }
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

static void completed_cb (void *cls,
                          struct MHD_Connection *c,
                          void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct http_conn *hc = conn_of (c);
    if (hc && !hc->cut) /* the next request on this connection */
        conn_arm (hc);
    struct http_req *req = *con_cls;
    if (req) {
        broker_forget_request (req->h->b, &req->wait);
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

static int unix_listen (struct http *h, const char *path, struct fmb_error *error)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char dir[FMB_UNIX_PATH_MAX];
    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "[api] socket: path too long");
    }
    snprintf (dir, sizeof (dir), "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        struct stat before;
        *slash = '\0';
        bool made = stat (dir, &before) < 0;
        if (fmb_mkdir_p (dir, 0755, error) < 0)
            return fmb_error_prefix (error, "[api] socket");
        /* Made under the daemon's umask 077: every local user must reach
         * the socket (it is 0666; roles decide).  A directory the admin
         * made keeps its mode (0750 and a group may be the point). */
        if (made && chmod (dir, 0755) < 0)
            return fmb_errorf (
                error, "[api] socket: chmod 0755 %s: %s", dir, strerror (errno));
    }
    strcpy (sa.sun_path, path);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fmb_errorf (error, "socket: %s", strerror (errno));
    /* A socket file left by a previous run: if nobody answers on it, it
     * is stale and may go; if someone does, another broker is running. */
    struct stat sb;
    if (lstat (path, &sb) == 0) {
        if (!S_ISSOCK (sb.st_mode)) {
            close (fd);
            errno = EEXIST;
            return fmb_errorf (
                error, "[api] socket %s: exists and is not a socket", path);
        }
        int probe = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect (probe, (struct sockaddr *)&sa, sizeof (sa)) == 0) {
            close (probe);
            close (fd);
            errno = EADDRINUSE;
            return fmb_errorf (
                error, "[api] socket %s: another broker is listening", path);
        }
        if (probe >= 0)
            close (probe);
        unlink (path);
    }
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (fd, (int)h->backlog) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] socket %s: %s", path, strerror (errno));
    }
    /* Everyone may connect; SO_PEERCRED decides what they may do. */
    if (chmod (path, 0666) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] socket %s: chmod: %s", path, strerror (errno));
    }
    snprintf (h->sock_path, sizeof (h->sock_path), "%s", path);
    return fd;
}

/* Parse the tokens file into 'tokens' (MAX_STATIC_TOKENS); *n gets the count. */
static int load_tokens_into (const char *path,
                             struct static_token *tokens,
                             int *n,
                             struct fmb_error *error)
{
    char *text;
    *n = 0;
    if (fmb_check_private_file (path, error) < 0 ||
        fmb_read_file (path, TOKENS_FILE_MAX, false, &text, NULL, error) < 0)
        return fmb_error_prefix (error, "[api] tokens_file");
    char *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r (text, "\n", &save); line;
         line = strtok_r (NULL, "\n", &save)) {
        lineno++;
        char role[16], value[256];
        if (line[0] == '#' || line[strspn (line, " \t")] == '\0')
            continue;
        if (sscanf (line, "%15s %255s", role, value) != 2 || strlen (value) < 16 ||
            *n == MAX_STATIC_TOKENS ||
            (strcmp (role, "rm") && strcmp (role, "admin") && strcmp (role, "agent"))) {
            explicit_bzero (text, strlen (text));
            free (text);
            errno = EINVAL;
            return fmb_errorf (
                error,
                "[api] tokens_file %s:%d: expected 'rm|admin|agent TOKEN' with a "
                "token of at least 16 characters",
                path,
                lineno);
        }
        tokens[*n].roles = role[0] == 'r'   ? ROLE_RM
                           : role[1] == 'd' ? ROLE_ADMIN
                                            : ROLE_AGENT;
        snprintf (tokens[(*n)++].value, sizeof (tokens[0].value), "%s", value);
        explicit_bzero (value, sizeof (value));
    }
    explicit_bzero (text, strlen (text));
    free (text);
    return 0;
}

static int load_tokens (struct http *h, const char *path, struct fmb_error *error)
{
    return load_tokens_into (path, h->tokens, &h->ntokens, error);
}

int http_reload_tokens (struct http *h, const char *path, struct fmb_error *error)
{
    if (h->n < 2)
        return 0; /* no TCP listener: the file is not used */
    struct static_token *tokens = calloc (MAX_STATIC_TOKENS, sizeof (*tokens));
    int n = 0;
    if (!tokens)
        return fmb_errorf (error, "out of memory");
    int rc = load_tokens_into (path, tokens, &n, error);
    if (rc == 0) {
        explicit_bzero (h->tokens, sizeof (h->tokens));
        memcpy (h->tokens, tokens, sizeof (*tokens) * (size_t)n);
        h->ntokens = n;
    }
    explicit_bzero (tokens, sizeof (*tokens) * MAX_STATIC_TOKENS);
    free (tokens);
    return rc;
}

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

/* One file the TCP listener reads at start: readable (and private when
 * 'secret'); 0, or 1 after reporting. */
static int check_tls_file (
    const char *key, const char *path, bool secret, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    char *text = NULL;
    int rc = 0;
    if ((secret && fmb_check_private_file (path, &error) < 0) ||
        fmb_read_file (path, 1024 * 1024, false, &text, NULL, &error) < 0) {
        fmb_error_prefix (&error, "%s", key);
        report (error.text, arg);
        rc = 1;
    }
    if (text)
        explicit_bzero (text, strlen (text));
    free (text);
    return rc;
}

int http_check_files (const struct fmb_config *cfg, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    if (!cfg->tcp[0])
        return 0;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int n = 0;
    if (fmb_parse_hostport (cfg->tcp, &ss, &sslen) < 0) {
        fmb_errorf (&error, "[api] tcp = %s: not an address", cfg->tcp);
        report (error.text, arg);
        n++;
    }
    struct static_token *tokens = calloc (MAX_STATIC_TOKENS, sizeof (*tokens));
    int count = 0;
    if (!tokens) {
        report ("out of memory", arg);
        return n + 1;
    }
    if (load_tokens_into (cfg->tokens_file, tokens, &count, &error) < 0) {
        report (error.text, arg);
        n++;
    }
    explicit_bzero (tokens, sizeof (*tokens) * MAX_STATIC_TOKENS);
    free (tokens);
    n += check_tls_file ("[api] tls_cert", cfg->tls_cert, false, report, arg);
    n += check_tls_file ("[api] tls_key", cfg->tls_key, true, report, arg);
    return n;
}

/* The Unix listener has no listen socket of MHD's own: accept_unix()
 * hands it connections already counted.  The TCP one listens itself and
 * limits per client address. */
static struct MHD_Daemon *start_daemon (struct listener *l,
                                        const struct sockaddr *sa,
                                        const char *cert,
                                        const char *key)
{
    struct http *h = l->h;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* Options that only some listeners have; MHD_OPTION_END ends the
     * array early, so those with a value come first. */
    struct MHD_OptionItem extra[] = {
        {sa ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, (void *)sa},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)h->limits.per_user, NULL},
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)cert},
        {cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)key},
        {MHD_OPTION_END, 0, NULL},
    };
    if (cert)
        flags |= MHD_USE_TLS;
    if (sa && sa->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (!sa)
        flags |= MHD_USE_NO_LISTEN_SOCKET;
    return MHD_start_daemon (
        flags,
        0,
        NULL,
        NULL,
        access_cb,
        l,
        MHD_OPTION_LISTEN_BACKLOG_SIZE,
        h->backlog,
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
        (unsigned)HTTP_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_MEMORY_LIMIT,
        MHD_OPTION_CONNECTION_LIMIT,
        h->limits.max_total + 1, /* the peers table is the real limit */
        MHD_OPTION_ARRAY,
        extra,
        MHD_OPTION_END);
}

int http_create (struct broker *b,
                 const struct fmb_config *cfg,
                 struct http **ret,
                 struct fmb_error *error)
{
    struct http *h = calloc (1, sizeof (*h));
    if (!h)
        return fmb_errorf (error, "out of memory");
    h->b = b;
    h->l[0].h = h->l[1].h = h;
    h->unix_fd = -1;
    h->limits.max_total = cfg->api_max_connections;
    h->limits.per_user = cfg->api_max_connections_per_user;
    h->limits.reserved = cfg->api_reserved_connections;
    h->request_timeout_ms = cfg->api_request_timeout_ms;
    h->backlog = cfg->api_listen_backlog;
    if (!(h->peers = peers_create (&h->limits))) {
        fmb_errorf (error, "out of memory");
        goto error;
    }
    h->unix_fd = unix_listen (h, cfg->socket, error);
    if (h->unix_fd < 0)
        goto error;
    h->l[0].tcp = false;
    if (!(h->l[0].d = start_daemon (&h->l[0], NULL, NULL, NULL))) {
        fmb_errorf (
            error, "[api] socket %s: cannot start the HTTP server", cfg->socket);
        goto error;
    }
    h->n = 1;
    if (cfg->tcp[0]) {
        struct sockaddr_storage ss;
        socklen_t sslen;
        if (fmb_parse_hostport (cfg->tcp, &ss, &sslen) < 0) {
            errno = EINVAL;
            fmb_errorf (error, "[api] tcp = %s: not an address", cfg->tcp);
            goto error;
        }
        if (load_tokens (h, cfg->tokens_file, error) < 0 ||
            fmb_read_file (
                cfg->tls_cert, 1024 * 1024, false, &h->tls_cert, NULL, error) < 0 ||
            fmb_check_private_file (cfg->tls_key, error) < 0 ||
            fmb_read_file (cfg->tls_key, 1024 * 1024, false, &h->tls_key, NULL, error) <
                0)
            goto error;
        h->l[1].tcp = true;
        h->l[1].d =
            start_daemon (&h->l[1], (struct sockaddr *)&ss, h->tls_cert, h->tls_key);
        if (!h->l[1].d) {
            fmb_errorf (error,
                        "[api] tcp = %s: cannot listen (TLS setup or address)",
                        cfg->tcp);
            goto error;
        }
        h->n = 2;
    }
    *ret = h;
    return 0;
error:
    http_destroy (h);
    return -1;
}

void http_quiesce (struct http *h)
{
    if (h->unix_fd >= 0)
        close (h->unix_fd);
    h->unix_fd = -1;
    for (int i = 1; i < h->n; i++) {
        MHD_socket s = MHD_quiesce_daemon (h->l[i].d);
        if (s != MHD_INVALID_SOCKET)
            close (s);
    }
    if (h->sock_path[0])
        unlink (h->sock_path);
    h->sock_path[0] = '\0';
}

void http_destroy (struct http *h)
{
    if (h) {
        for (int i = 0; i < 2; i++)
            if (h->l[i].d)
                MHD_stop_daemon (h->l[i].d);
        if (h->unix_fd >= 0)
            close (h->unix_fd);
        peers_destroy (h->peers);
        if (h->sock_path[0])
            unlink (h->sock_path);
        explicit_bzero (h->tokens, sizeof (h->tokens));
        if (h->tls_key)
            explicit_bzero (h->tls_key, strlen (h->tls_key));
        free (h->tls_key);
        free (h->tls_cert);
        free (h);
    }
}

int http_pollfds (struct http *h, struct pollfd *fds, int max)
{
    int n = 0;
    if (h->unix_fd >= 0 && n < max) {
        fds[n].fd = h->unix_fd;
        fds[n].events = POLLIN;
        fds[n].revents = 0;
        n++;
    }
    for (int i = 0; i < h->n && n < max; i++) {
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info (h->l[i].d, MHD_DAEMON_INFO_EPOLL_FD);
        fds[n].fd = di->epoll_fd;
        fds[n].events = POLLIN;
        fds[n].revents = 0;
        n++;
    }
    return n;
}

int http_timeout_ms (struct http *h)
{
    int best = -1;
    for (int i = 0; i < h->n; i++) {
        MHD_UNSIGNED_LONG_LONG t;
        if (MHD_get_timeout (h->l[i].d, &t) == MHD_YES) {
            int ms = t > 60000 ? 60000 : (int)t;
            if (best < 0 || ms < best)
                best = ms;
        }
    }
    int d = next_deadline_ms (h);
    if (d >= 0 && (best < 0 || d < best))
        best = d;
    return best;
}

void http_process (struct http *h, const struct pollfd *fds, int n)
{
    /* http_pollfds puts the Unix socket first */
    if (fds && n > 0 && h->unix_fd >= 0 && fds[0].fd == h->unix_fd &&
        (fds[0].revents & (POLLIN | POLLERR | POLLHUP)))
        accept_unix (h);
    cut_late (h);
    for (int i = 0; i < h->n; i++)
        MHD_run (h->l[i].d);
}

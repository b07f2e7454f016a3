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

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <sys/resource.h>

#include "broker.h"
#include "fileutil.h"
#include "jsonutil.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "nodeauth.h"
#include "peers.h"
#include "tcpguard.h"

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
/* Descriptors the broker holds besides API connections: the database and
 * its journal, the FM client's connections (counted apart), listeners,
 * epoll and signal fds, logs, key files read at reload. */
#define FDS_OWN         64
#define ACCEPT_PAUSE_MS 1000  /* after EMFILE/ENFILE: the loop does not spin */
#define ACCEPT_LOG_MS   60000 /* a repeated accept error: one line a minute */
#define REFUSAL_LOG_MS  10000
#define REFUSAL_LOG_MAX 20 /* refusal and failure lines per REFUSAL_LOG_MS */

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
    bool counted; /* holds a slot in h->peers for uid (or h->guard for addr) */
    bool privileged;
    bool cut;
    bool tcp;
    bool authed; /* TCP: a request on it showed a valid credential */
    uid_t uid;
    char addr[TCPGUARD_ADDR_MAX];
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
        bool tcp;
        char addr[TCPGUARD_ADDR_MAX];
    } pending;
    int64_t refused_logged_ms;
    int tcp_fd;              /* accepted here too: counted per address first */
    struct tcpguard *guard;  /* the TCP connections per address, failures */
    struct nodeauth *nodes;  /* the node keys */
    struct http_req *tarpit; /* failed authentications answered later */
    int64_t accept_paused_until_ms;
    struct { /* a repeated accept error, logged once a minute with a count */
        int err;
        unsigned count;
        int64_t logged_ms;
    } accept_err;
    struct { /* refusals and failures logged: REFUSAL_LOG_MAX per window */
        int64_t window_ms;
        unsigned lines;
        unsigned dropped;
    } rlog;
    struct static_token tokens[MAX_STATIC_TOKENS];
    int ntokens;
    char *tls_cert;
    char *tls_key;
    char *tls_trust; /* [api] tls_client_ca's certificates */
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
    int64_t tarpit_until_ms; /* a failed authentication answered then */
    bool in_tarpit;
    struct http_req *tarpit_next;
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

static struct http_conn *conn_of (struct MHD_Connection *mc);

/* One more line of the refusal log, unless REFUSAL_LOG_MAX were written
 * in this window (then counted, and said with the next window's first). */
static bool refusal_log_due (struct http *h)
{
    int64_t now = now_mono ();
    if (now - h->rlog.window_ms >= REFUSAL_LOG_MS) {
        if (h->rlog.dropped)
            fmb_log (LOG_WARNING,
                     "api: %u more refusals or failed authentications not logged "
                     "(at most %d lines per %d s)",
                     h->rlog.dropped,
                     REFUSAL_LOG_MAX,
                     REFUSAL_LOG_MS / 1000);
        h->rlog.window_ms = now;
        h->rlog.lines = h->rlog.dropped = 0;
    }
    if (h->rlog.lines >= REFUSAL_LOG_MAX) {
        h->rlog.dropped++;
        return false;
    }
    h->rlog.lines++;
    return true;
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
    if (!refusal_log_due (req->h))
        return;
    va_start (ap, fmt);
    vsnprintf (what, sizeof (what), fmt, ap);
    va_end (ap);
    fmb_log_escape (shown, sizeof (shown), what);
    fmb_log_redact (shown);
    http_caller_name (&req->caller, who, sizeof (who));
    fmb_log (LOG_WARNING, "api: refused %s: %s", who, shown);
}

/* A TCP caller's credential: a node token, or a static token. */
static void identify_tcp (struct http *h, struct http_req *req)
{
    struct caller *c = &req->caller;
    struct http_conn *hc = conn_of (req->conn);
    if (hc)
        snprintf (c->addr, sizeof (c->addr), "%s", hc->addr);
    if (!c->bearer[0])
        return;
    char node[NODE_NAME_MAX + 1];
    enum nodeauth_result r = nodeauth_verify (
        h->nodes, c->bearer, h->b->cfg.revoked_nodes, now_wall (), node);
    if (r == NODEAUTH_OK || r == NODEAUTH_OK_PREVIOUS) {
        c->roles |= ROLE_AGENT;
        snprintf (c->node, sizeof (c->node), "%s", node);
        if (r == NODEAUTH_OK_PREVIOUS && refusal_log_due (h))
            fmb_log (LOG_NOTICE,
                     "api: node %s (%s) uses a token of the previous node key; give "
                     "it its new token (fmbrokerd --node-token %s)",
                     node,
                     c->addr,
                     node);
        return;
    }
    if (r == NODEAUTH_REVOKED) {
        if (refusal_log_due (h))
            fmb_log (LOG_WARNING,
                     "api: refused node %s (%s): revoked ([api] revoked_nodes)",
                     node,
                     c->addr);
        return;
    }
    if (r != NODEAUTH_NOT_NODE)
        return;
    /* static tokens, compared in constant time */
    size_t blen = strlen (c->bearer);
    for (int i = 0; i < h->ntokens && blen; i++) {
        size_t tlen = strlen (h->tokens[i].value);
        if (tlen == blen && CRYPTO_memcmp (h->tokens[i].value, c->bearer, blen) == 0)
            c->roles |= h->tokens[i].roles;
    }
}

/* A node's client certificate, if the listener asks for them: verified
 * against [api] tls_client_ca by GnuTLS; its CN (or first DNS name)
 * names the node.  0: none offered; 1: a node named; -1: bad. */
static int identify_cert (struct http_req *req, char *node, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (req->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t session = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned n = 0, status = 0;
    if (!session || !gnutls_certificate_get_peers (session, &n) || n == 0)
        return 0;
    if (gnutls_certificate_verify_peers2 (session, &status) < 0 || status != 0)
        return -1;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers (session, &n);
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init (&crt) < 0)
        return -1;
    int rc = -1;
    size_t sz = len;
    if (gnutls_x509_crt_import (crt, &certs[0], GNUTLS_X509_FMT_DER) == 0) {
        unsigned type = 0;
        sz = len;
        if (gnutls_x509_crt_get_subject_alt_name2 (crt, 0, node, &sz, &type, NULL) ==
                GNUTLS_SAN_DNSNAME ||
            (sz = len,
             gnutls_x509_crt_get_dn_by_oid (
                 crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, node, &sz) == 0))
            rc = valid_node_name (node) ? 1 : -1;
    }
    gnutls_x509_crt_deinit (crt);
    return rc;
}

/* With [api] tls_client_cert: a verified certificate names the node (a
 * node token then must name the same one); 'required' leaves a caller
 * without one no credential at all, whatever token it sends. */
static void identify_by_cert (struct http *h, struct http_req *req)
{
    struct caller *c = &req->caller;
    char node[NODE_NAME_MAX + 1] = "";
    int crt = identify_cert (req, node, sizeof (node));
    const char *why = NULL;
    if (crt == 1 && fmb_config_list_has (h->b->cfg.revoked_nodes, node))
        why = "its certificate names a revoked node";
    else if (crt < 0)
        why = "its client certificate does not verify against [api] tls_client_ca";
    else if (crt == 0 && h->b->cfg.tls_client_cert == FMB_CLIENT_CERT_REQUIRED)
        why = "no client certificate ([api] tls_client_cert = required)";
    else if (crt == 1 && c->node[0] && strcmp (c->node, node) != 0)
        why = "its node token names another node than its certificate";
    if (why) {
        if (refusal_log_due (h))
            fmb_log (LOG_WARNING, "api: refused %s: %s", c->addr, why);
        c->roles = 0;
        c->node[0] = '\0';
        if (c->bearer[0]) { /* still "a credential" (401), but none that works */
            explicit_bzero (c->bearer, sizeof (c->bearer));
            c->bearer[0] = '-';
        }
        return;
    }
    if (crt == 1 && !c->roles) {
        c->roles |= ROLE_AGENT;
        snprintf (c->node, sizeof (c->node), "%s", node);
    }
}

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
    identify_tcp (h, req);
    if (h->b->cfg.tls_client_cert != FMB_CLIENT_CERT_NONE)
        identify_by_cert (h, req);
}

/* A TCP caller whose credential was refused: counted, logged (a line per
 * address per 10 s at most), and answered later and later (tcpguard.h). */
static void auth_failed (struct http *h, struct http_req *req)
{
    struct tcpguard_verdict v;
    metrics_add (h->b->metrics, METRIC_AUTH_FAILURES, 1);
    tcpguard_auth_failed (h->guard, req->caller.addr, now_mono (), &v);
    if (v.answer_at_ms && !h->b->stopping) {
        metrics_add (h->b->metrics, METRIC_AUTH_DELAYED, 1);
        req->tarpit_until_ms = v.answer_at_ms;
    }
    if (v.cut) {
        struct http_conn *hc = conn_of (req->conn);
        if (hc && !hc->cut) {
            hc->cut = true;
            shutdown (hc->fd, SHUT_RDWR);
        }
    }
    if (v.log && refusal_log_due (h))
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
    struct http_conn *hc = req->l->tcp ? conn_of (req->conn) : NULL;
    /* A job's token is a credential (for that job) even where it grants
     * nothing: its holder then gets 403, not 401. */
    if (c->bearer[0] && req->p.job[0])
        c->job_token_ok = broker_job_token_matches (h->b, req->p.job, c->bearer);
    if (hc && !hc->authed && (c->roles || c->job_token_ok)) {
        hc->authed = true; /* no longer counts as unauthenticated */
        tcpguard_authenticated (h->guard);
    }
    bool allowed = (route->who & ROLE_ANY) || (route->who & c->roles) ||
                   ((route->who & ROLE_JOB) && c->job_token_ok);
    if (allowed)
        return 0;
    if (!c->local && !c->roles && !c->job_token_ok) {
        if (c->bearer[0])
            auth_failed (h, req);
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
    if (h->pending.valid && h->pending.fd == c->fd && h->pending.tcp == l->tcp) {
        c->counted = true; /* the slot taken at accept is now this one's */
        c->uid = h->pending.uid;
        c->privileged = h->pending.privileged;
        c->tcp = h->pending.tcp;
        snprintf (c->addr, sizeof (c->addr), "%s", h->pending.addr);
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
    if (c->counted && c->tcp)
        tcpguard_release (h->guard, c->addr, c->authed);
    else if (c->counted)
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

/* An accept that failed for another reason than "nothing there": out of
 * descriptors (EMFILE, ENFILE) or memory pauses accepting for
 * ACCEPT_PAUSE_MS (the listening sockets leave the poll set, so the loop
 * sleeps rather than spins on a queue it cannot take from); the error is
 * logged once, then once a minute with how often it happened. */
static void accept_failed (struct http *h, const char *which, int err)
{
    int64_t now = now_mono ();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
        h->accept_paused_until_ms = now + ACCEPT_PAUSE_MS;
    h->accept_err.count++;
    if (h->accept_err.err != err || now - h->accept_err.logged_ms >= ACCEPT_LOG_MS) {
        fmb_log (LOG_WARNING,
                 "api: accept on the %s: %s (%u time%s since the last such line)%s",
                 which,
                 strerror (err),
                 h->accept_err.count,
                 h->accept_err.count == 1 ? "" : "s",
                 h->accept_paused_until_ms > now ? "; accepting paused for 1 s" : "");
        h->accept_err.err = err;
        h->accept_err.count = 0;
        h->accept_err.logged_ms = now;
    }
}

static bool accept_gone (int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED;
}

/* Hand an accepted socket, counted already, to the listener's MHD. */
static void hand_over (struct http *h,
                       struct listener *l,
                       int fd,
                       const struct sockaddr *sa,
                       socklen_t salen)
{
    h->pending.valid = true;
    h->pending.fd = fd;
    h->pending.tcp = l->tcp;
    MHD_add_connection (l->d, fd, sa, salen);
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
            if (!accept_gone (errno))
                accept_failed (h, "socket", errno);
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
        h->pending.uid = cred.uid;
        h->pending.privileged = privileged;
        hand_over (h, &h->l[0], fd, (struct sockaddr *)&sa, salen);
        if (h->pending.valid) { /* not taken over by a tracked connection */
            h->pending.valid = false;
            peers_release (h->peers, cred.uid, privileged);
        }
    }
}

/* Accept on the TCP port ourselves too: counted per address, in all, and
 * while unauthenticated (tcpguard.h) before TLS costs anything; over a
 * limit the connection is closed at once (a TLS client cannot read a
 * plain 503). */
static void accept_tcp (struct http *h)
{
    for (int i = 0; i < ACCEPTS_PER_PASS && h->tcp_fd >= 0; i++) {
        struct sockaddr_storage sa;
        socklen_t salen = sizeof (sa);
        int fd = accept4 (
            h->tcp_fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (!accept_gone (errno))
                accept_failed (h, "TCP port", errno);
            return;
        }
        char addr[TCPGUARD_ADDR_MAX];
        fmb_format_addr ((struct sockaddr *)&sa, addr, sizeof (addr));
        const char *why = NULL;
        if (!tcpguard_admit (h->guard, addr, &why)) {
            close (fd);
            metrics_add (h->b->metrics, METRIC_TCP_REFUSED, 1);
            int64_t now = now_mono ();
            if (now - h->refused_logged_ms >= 10000) {
                h->refused_logged_ms = now;
                fmb_log (LOG_WARNING,
                         "api: refusing TCP connections from %s: [api] %s reached",
                         addr,
                         why);
            }
            continue;
        }
        snprintf (h->pending.addr, sizeof (h->pending.addr), "%s", addr);
        hand_over (h, &h->l[1], fd, (struct sockaddr *)&sa, salen);
        if (h->pending.valid) {
            h->pending.valid = false;
            tcpguard_release (h->guard, addr, false);
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
    if (req->replied && req->tarpit_until_ms > now_mono ()) {
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
    int64_t now = now_mono (), next = -1;
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
    int64_t now = now_mono ();
    for (struct http_req **pp = &h->tarpit; *pp;) {
        struct http_req *req = *pp;
        if (req->tarpit_until_ms <= now) {
            *pp = req->tarpit_next;
            req->in_tarpit = false;
            req->tarpit_until_ms = 0;
            resume (req);
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
    (void)toe;
    struct http_conn *hc = conn_of (c);
    if (hc && !hc->cut) /* the next request on this connection */
        conn_arm (hc);
    struct http_req *req = *con_cls;
    if (req && req->in_tarpit)
        tarpit_remove (req);
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

/* Parse the tokens file into 'tokens' (MAX_STATIC_TOKENS); *n gets the
 * count.  An "agent" line (one token every node shares) only with
 * [api] shared_agent_token = true. */
static int load_tokens_into (const char *path,
                             bool shared_agent,
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
        if (strcmp (role, "agent") == 0 && !shared_agent) {
            explicit_bzero (text, strlen (text));
            free (text);
            errno = EPERM;
            return fmb_errorf (
                error,
                "[api] tokens_file %s:%d: an 'agent' token is one secret every "
                "compute node shares, and lets each act for all; give each node "
                "its own token (fmbrokerd --node-token NAME), or set [api] "
                "shared_agent_token = true to keep it",
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

static int load_tokens (struct http *h,
                        const struct fmb_config *cfg,
                        struct fmb_error *error)
{
    return load_tokens_into (
        cfg->tokens_file, cfg->shared_agent_token, h->tokens, &h->ntokens, error);
}

int http_reload_tokens (struct http *h,
                        const struct fmb_config *cfg,
                        struct fmb_error *error)
{
    if (h->n < 2)
        return 0; /* no TCP listener: the file is not used */
    struct static_token *tokens = calloc (MAX_STATIC_TOKENS, sizeof (*tokens));
    struct nodeauth *nodes = NULL;
    int n = 0;
    if (!tokens)
        return fmb_errorf (error, "out of memory");
    int rc =
        load_tokens_into (cfg->tokens_file, cfg->shared_agent_token, tokens, &n, error);
    if (rc == 0)
        rc = nodeauth_open (cfg, false, &nodes, error);
    if (rc == 0) {
        nodeauth_destroy (h->nodes);
        h->nodes = nodes;
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

/* What the TCP listener reads beyond tokens and its certificate: the
 * node key (made at the first start if missing), the client CA, the TLS
 * priority string (GnuTLS's own parser says what is wrong in it).  The
 * number of problems reported. */
static int check_node_files (const struct fmb_config *cfg,
                             svccheck_report_f report,
                             void *arg)
{
    struct fmb_error error;
    char path[FMB_CFG_PATH_MAX + 16];
    struct nodeauth *na = NULL;
    int n = 0;
    nodeauth_key_path (cfg, path, sizeof (path));
    if (access (path, F_OK) == 0 && nodeauth_open (cfg, false, &na, &error) < 0) {
        report (error.text, arg);
        n++;
    }
    nodeauth_destroy (na);
    if (cfg->tls_client_ca[0])
        n += check_tls_file (
            "[api] tls_client_ca", cfg->tls_client_ca, false, report, arg);
    gnutls_priority_t prio;
    const char *at = NULL;
    int r = gnutls_priority_init (&prio, cfg->tls_priorities, &at);
    if (r < 0) {
        fmb_errorf (&error,
                    "[api] tls_priorities: %s at '%.40s'",
                    gnutls_strerror (r),
                    at ? at : "");
        report (error.text, arg);
        n++;
    } else
        gnutls_priority_deinit (prio);
    if (cfg->shared_agent_token)
        fmb_log (LOG_WARNING,
                 "[api] shared_agent_token = true: every compute node holds the same "
                 "token and may act for every node and read every job's session "
                 "token; give nodes their own (fmbrokerd --node-token NAME)");
    return n;
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
    if (load_tokens_into (
            cfg->tokens_file, cfg->shared_agent_token, tokens, &count, &error) < 0) {
        report (error.text, arg);
        n++;
    }
    explicit_bzero (tokens, sizeof (*tokens) * MAX_STATIC_TOKENS);
    free (tokens);
    n += check_tls_file ("[api] tls_cert", cfg->tls_cert, false, report, arg);
    n += check_tls_file ("[api] tls_key", cfg->tls_key, true, report, arg);
    return n + check_node_files (cfg, report, arg);
}

/* Neither listener has a listen socket of MHD's own: accept_unix() and
 * accept_tcp() hand it connections already counted.  The TCP one speaks
 * TLS with [api] tls_priorities (TLS 1.2 and 1.3, forward secrecy) and,
 * with tls_client_ca, asks for client certificates. */
struct tls_files {
    const char *cert, *key, *priorities, *trust;
};

static struct MHD_Daemon *start_daemon (struct listener *l,
                                        const struct tls_files *tls,
                                        unsigned max_conns)
{
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET;
    /* Options that only some listeners have; MHD_OPTION_END ends the
     * array early, so those with a value come first. */
    static const struct tls_files plain = {NULL, NULL, NULL, NULL};
    const struct tls_files *f = tls ? tls : &plain;
    bool t = f->cert != NULL, trust = f->trust != NULL;
    struct MHD_OptionItem extra[] = {
        {t ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)f->cert},
        {t ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)f->key},
        {t ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, 0, (void *)f->priorities},
        {trust ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, (void *)f->trust},
        {MHD_OPTION_END, 0, NULL},
    };
    if (t)
        flags |= MHD_USE_TLS;
    return MHD_start_daemon (flags,
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
                             (unsigned)HTTP_CONN_TIMEOUT_S,
                             MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                             (size_t)HTTP_MEMORY_LIMIT,
                             MHD_OPTION_CONNECTION_LIMIT,
                             max_conns + 1, /* our own tables are the real limit */
                             MHD_OPTION_ARRAY,
                             extra,
                             MHD_OPTION_END);
}

/* The TCP listener's bounds fit the file limit: its soft limit raised to
 * the hard one, what the socket's connections, the FM client and the
 * broker's own files need set apart, the rest for TCP.  A configured
 * tcp_max_connections above that is lowered, saying so. */
static void fit_file_limit (struct http *h,
                            const struct fmb_config *cfg,
                            struct tcpguard_limits *lim)
{
    struct rlimit rl;
    rlim_t have = 1024;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65536 : rl.rlim_max;
            struct rlimit raised = {want, rl.rlim_max};
            if (setrlimit (RLIMIT_NOFILE, &raised) == 0)
                rl.rlim_cur = want;
        }
        have = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    }
    rlim_t own = (rlim_t)cfg->api_max_connections + cfg->fm_max_connections + FDS_OWN;
    rlim_t left = have > own + 16 ? have - own : 16;
    if (have < own + 16)
        fmb_log (LOG_WARNING,
                 "api: the file limit (%lu) leaves too little beside [api] "
                 "max_connections (%u); raise LimitNOFILE= or lower it",
                 (unsigned long)have,
                 cfg->api_max_connections);
    lim->max_total = cfg->tcp_max_connections ? cfg->tcp_max_connections
                                              : (unsigned)(left > 65536 ? 65536 : left);
    if (lim->max_total > left) {
        fmb_log (LOG_WARNING,
                 "api: [api] tcp_max_connections %u lowered to %lu: the file limit "
                 "is %lu and the socket's max_connections take %u (raise LimitNOFILE=)",
                 lim->max_total,
                 (unsigned long)left,
                 (unsigned long)have,
                 cfg->api_max_connections);
        lim->max_total = (unsigned)left;
    }
    lim->max_unauth = cfg->tcp_max_unauthenticated ? cfg->tcp_max_unauthenticated
                                                   : (lim->max_total + 1) / 2;
    if (lim->max_unauth > lim->max_total)
        lim->max_unauth = lim->max_total;
    lim->per_addr = cfg->api_max_connections_per_user;
    fmb_log (LOG_INFO,
             "api: file limit %lu: TCP takes at most %u connections (%u "
             "unauthenticated, %u per address)",
             (unsigned long)have,
             lim->max_total,
             lim->max_unauth,
             lim->per_addr);
    (void)h;
}

/* A listening TCP socket on 'cfg->tcp'. */
static int tcp_listen (const struct fmb_config *cfg,
                       unsigned backlog,
                       struct fmb_error *error)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (fmb_parse_hostport (cfg->tcp, &ss, &sslen) < 0) {
        errno = EINVAL;
        return fmb_errorf (error, "[api] tcp = %s: not an address", cfg->tcp);
    }
    int fd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0)
        return fmb_errorf (
            error, "[api] tcp = %s: socket: %s", cfg->tcp, strerror (errno));
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (bind (fd, (struct sockaddr *)&ss, sslen) < 0 || listen (fd, (int)backlog) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] tcp = %s: %s", cfg->tcp, strerror (saved));
    }
    return fd;
}

/* The TCP listener: tokens, node keys, certificate and key, the socket,
 * its bounds, and its MHD with TLS. */
static int tcp_start (struct http *h,
                      const struct fmb_config *cfg,
                      struct fmb_error *error)
{
    struct tcpguard_limits lim;
    if (load_tokens (h, cfg, error) < 0 ||
        nodeauth_open (cfg, true, &h->nodes, error) < 0 ||
        fmb_read_file (cfg->tls_cert, 1024 * 1024, false, &h->tls_cert, NULL, error) <
            0 ||
        fmb_check_private_file (cfg->tls_key, error) < 0 ||
        fmb_read_file (cfg->tls_key, 1024 * 1024, false, &h->tls_key, NULL, error) <
            0 ||
        (cfg->tls_client_ca[0] &&
         fmb_read_file (
             cfg->tls_client_ca, 1024 * 1024, false, &h->tls_trust, NULL, error) < 0))
        return -1;
    fit_file_limit (h, cfg, &lim);
    if (!(h->guard = tcpguard_create (&lim)))
        return fmb_errorf (error, "out of memory");
    if ((h->tcp_fd = tcp_listen (cfg, h->backlog, error)) < 0)
        return -1;
    struct tls_files tls = {h->tls_cert, h->tls_key, cfg->tls_priorities, h->tls_trust};
    h->l[1].tcp = true;
    if (!(h->l[1].d = start_daemon (&h->l[1], &tls, lim.max_total)))
        return fmb_errorf (error,
                           "[api] tcp = %s: cannot start TLS (certificate, key or "
                           "tls_priorities)",
                           cfg->tcp);
    return 0;
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
    h->tcp_fd = -1;
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
    if (!(h->l[0].d = start_daemon (&h->l[0], NULL, h->limits.max_total))) {
        fmb_errorf (
            error, "[api] socket %s: cannot start the HTTP server", cfg->socket);
        goto error;
    }
    h->n = 1;
    if (cfg->tcp[0]) {
        if (tcp_start (h, cfg, error) < 0)
            goto error;
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
    /* answers held back for failed authentications go now: nothing
     * suspended may outlive the daemons */
    for (struct http_req *r = h->tarpit; r; r = r->tarpit_next)
        r->tarpit_until_ms = 0;
    tarpit_run (h);
    if (h->unix_fd >= 0)
        close (h->unix_fd);
    h->unix_fd = -1;
    if (h->tcp_fd >= 0)
        close (h->tcp_fd);
    h->tcp_fd = -1;
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
        if (h->tcp_fd >= 0)
            close (h->tcp_fd);
        peers_destroy (h->peers);
        tcpguard_destroy (h->guard);
        nodeauth_destroy (h->nodes);
        free (h->tls_trust);
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

static bool accepting (struct http *h)
{
    return h->accept_paused_until_ms <= now_mono ();
}

int http_pollfds (struct http *h, struct pollfd *fds, int max)
{
    int n = 0;
    int listeners[2] = {h->unix_fd, h->tcp_fd};
    for (int i = 0; i < 2 && n < max; i++)
        if (listeners[i] >= 0 && accepting (h)) {
            fds[n].fd = listeners[i];
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
        if (MHD_get_timeout (h->l[i].d, &t) == MHD_YES)
            best = earliest (best, t > 60000 ? 60000 : (int64_t)t);
    }
    best = earliest (best, next_deadline_ms (h));
    best = earliest (best, tarpit_next_ms (h));
    if (!accepting (h))
        best = earliest (best, h->accept_paused_until_ms - now_mono ());
    return best;
}

void http_process (struct http *h, const struct pollfd *fds, int n)
{
    for (int i = 0; fds && i < n; i++) {
        if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP)))
            continue;
        if (fds[i].fd == h->unix_fd && h->unix_fd >= 0 && accepting (h))
            accept_unix (h);
        else if (fds[i].fd == h->tcp_fd && h->tcp_fd >= 0 && accepting (h))
            accept_tcp (h);
    }
    cut_late (h);
    tarpit_run (h);
    for (int i = 0; i < h->n; i++)
        MHD_run (h->l[i].d);
}

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

#define HTTP_MAX_CONNECTIONS 1024
#define HTTP_CONN_TIMEOUT_S  30
#define TOKENS_FILE_MAX      (64 * 1024)
#define MAX_STATIC_TOKENS    64

struct static_token {
    unsigned roles;
    char value[256];
};

struct listener {
    struct http *h;
    struct MHD_Daemon *d;
    bool tcp;
};

struct http {
    struct broker *b;
    bool holding;          /* answers wait for the loop pass's commit */
    struct http_req *held; /* those answers */
    struct listener l[2];
    int n;
    char sock_path[FMB_UNIX_PATH_MAX];
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
    bool handled;
    bool want_suspend;
    bool suspended;
    bool replied;
    int status;
    char *resp;
    const char *ctype;
    char allow[64];
    json_t *json;
    struct caller caller;
    struct api_params p;
    char query_buf[1024];
    struct http_wait wait;
    bool held;
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
    case 415:
        return "Unsupported Media Type";
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

int http_release (struct http *h, bool committed)
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
            http_reply_uncommitted (req);
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
    if (req->h->holding)
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

void http_reply_problem (struct http_req *req, int status, const char *fmt, ...)
{
    char detail[512];
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

void http_reply_uncommitted (struct http_req *req)
{
    http_reply_problem (
        req, 503, "the broker could not commit this change; repeat the request");
}

void http_suspend (struct http_req *req)
{
    req->want_suspend = true;
}

struct http_wait *http_wait (struct http_req *req)
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
            c->roles = broker_roles_of (h->b, cred.uid, cred.gid) | ROLE_USER;
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

static void dispatch (struct http *h, struct http_req *req, const char *url)
{
    const struct route *route = NULL;
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
        if (strcmp (r->method, req->method) == 0) {
            route = r;
            break;
        }
        size_t used = strlen (allow);
        snprintf (
            allow + used, sizeof (allow) - used, "%s%s", used ? ", " : "", r->method);
    }
    if (!route) {
        if (allow[0]) {
            snprintf (req->allow, sizeof (req->allow), "%s", allow);
            http_reply_problem (req,
                                405,
                                "%s is not allowed on %s (allowed: %s)",
                                req->method,
                                url,
                                allow);
        } else if (bad_param)
            http_reply_problem (req, 400, "%s", why);
        else
            http_reply_problem (req, 404, "no such resource: %.200s", url);
        return;
    }
    identify (h, req);
    struct caller *c = &req->caller;
    /* A job's token is a credential (for that job) even where it grants
     * nothing: its holder then gets 403, not 401. */
    if (c->bearer[0] && req->p.job[0])
        c->job_token_ok = broker_job_token_matches (h->b, req->p.job, c->bearer);
    bool allowed = (route->who & ROLE_ANY) || (route->who & c->roles) ||
                   ((route->who & ROLE_JOB) && c->job_token_ok);
    if (!allowed) {
        if (!c->local && !c->roles && !c->job_token_ok)
            http_reply_problem (req, 401, "a valid bearer token is required");
        else
            http_reply_problem (req,
                                403,
                                "%s %s is not allowed for this caller",
                                req->method,
                                route->path);
        return;
    }
    if (req->too_large) {
        http_reply_problem (
            req, 413, "request body larger than %d bytes", API_MAX_BODY);
        return;
    }
    if (route->body) {
        struct fmb_error e;
        req->json = fmb_json_load_object (req->body ? req->body : "", req->len, &e);
        if (!req->json) {
            http_reply_problem (req, 400, "%s", e.text);
            return;
        }
    } else if (req->len > 0) {
        http_reply_problem (req, 400, "%s %s takes no body", req->method, route->path);
        return;
    }
    route->handler (h->b, req);
    if (!req->replied && !req->want_suspend)
        http_reply_problem (req, 500, "the handler gave no answer");
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
    enum MHD_Result ret = MHD_queue_response (req->conn, (unsigned)req->status, resp);
    MHD_destroy_response (resp);
    broker_count_request (req->h->b, req->status);
    return ret;
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
        snprintf (req->method, sizeof (req->method), "%s", method);
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
    (void)c;
    (void)toe;
    struct http_req *req = *con_cls;
    if (req) {
        broker_forget_request (req->h->b, req);
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
    char line[512];
    vsnprintf (line, sizeof (line), fmt, ap);
    line[strcspn (line, "\n")] = '\0';
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
        *slash = '\0';
        if (fmb_mkdir_p (dir, 0755, error) < 0)
            return fmb_error_prefix (error, "[api] socket");
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
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 || listen (fd, 128) < 0) {
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

static int load_tokens (struct http *h, const char *path, struct fmb_error *error)
{
    char *text;
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
            h->ntokens == MAX_STATIC_TOKENS ||
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
        h->tokens[h->ntokens].roles = role[0] == 'r'   ? ROLE_RM
                                      : role[1] == 'd' ? ROLE_ADMIN
                                                       : ROLE_AGENT;
        snprintf (
            h->tokens[h->ntokens++].value, sizeof (h->tokens[0].value), "%s", value);
        explicit_bzero (value, sizeof (value));
    }
    explicit_bzero (text, strlen (text));
    free (text);
    return 0;
}

static struct MHD_Daemon *start_daemon (struct listener *l,
                                        int listen_fd,
                                        const struct sockaddr *sa,
                                        const char *cert,
                                        const char *key)
{
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem tls[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)cert},
        {cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)key},
        {MHD_OPTION_END, 0, NULL},
    };
    if (cert)
        flags |= MHD_USE_TLS;
    if (sa && sa->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon (
        flags,
        0,
        NULL,
        NULL,
        access_cb,
        l,
        listen_fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR,
        listen_fd >= 0 ? (intptr_t)listen_fd : (intptr_t)sa,
        MHD_OPTION_NOTIFY_COMPLETED,
        completed_cb,
        NULL,
        MHD_OPTION_UNESCAPE_CALLBACK,
        no_unescape,
        NULL,
        MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log,
        NULL,
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_MAX_CONNECTIONS,
        MHD_OPTION_ARRAY,
        tls,
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
    int fd = unix_listen (h, cfg->socket, error);
    if (fd < 0)
        goto error;
    h->l[0].tcp = false;
    if (!(h->l[0].d = start_daemon (&h->l[0], fd, NULL, NULL, NULL))) {
        close (fd);
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
        h->l[1].d = start_daemon (
            &h->l[1], -1, (struct sockaddr *)&ss, h->tls_cert, h->tls_key);
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
    for (int i = 0; i < h->n; i++) {
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
    return best;
}

void http_process (struct http *h)
{
    for (int i = 0; i < h->n; i++)
        MHD_run (h->l[i].d);
}

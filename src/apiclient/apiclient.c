/* apiclient.c: see apiclient.h. */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "apiclient.h"
#include "apitls.h"
#include "monotime.h"

/* A listing of 1000 jobs is ~1 MiB. */
#define REPLY_MAX (16 * 1024 * 1024)
/* A RUN body with a compressed node list. */
#define REQUEST_MAX (64 * 1024)

struct conn {
    int fd;
    struct api_tls *tls; /* NULL: the Unix socket */
    int64_t deadline;    /* the request's every read and write ends by it */
};

static void conn_close (struct conn *c)
{
    api_tls_close (c->tls);
    c->tls = NULL;
    if (c->fd >= 0)
        close (c->fd);
    c->fd = -1;
}

/* The next blocking read and write of fd end by the deadline.
 * SO_RCVTIMEO and SO_SNDTIMEO bound each call, not their sum. */
static void set_io_deadline (int fd, int64_t deadline)
{
    int64_t left = deadline - fmb_monotime_ms ();
    struct timeval tv = {.tv_sec = left > 0 ? left / 1000 : 0,
                         .tv_usec = left > 0 ? (left % 1000) * 1000 : 1000};
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
    setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
}

/* Before each read or write of the request: what is left of the one
 * timeout, or -1 once it has passed.  (Set once, a broker that reads a
 * large request slowly, or trickles its answer, had the whole timeout
 * again for every call.)  A TLS connection's socket is non-blocking:
 * apitls.c waits on it. */
static int conn_arm (struct conn *c)
{
    if (fmb_monotime_ms () >= c->deadline) {
        errno = ETIMEDOUT;
        return -1;
    }
    if (!c->tls)
        set_io_deadline (c->fd, c->deadline);
    return 0;
}

/* connect() within connect_ms; 0, or -1 with why. */
static int connect_within (int fd,
                           const struct sockaddr *sa,
                           socklen_t len,
                           int64_t connect_ms,
                           char *why,
                           size_t wlen)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t elen = sizeof (err);
    if (connect (fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS) {
        snprintf (why, wlen, "Couldn't connect to server (%s)", strerror (errno));
        return -1;
    }
    int n;
    while ((n = poll (&p, 1, connect_ms > 0 ? (int)connect_ms : 1)) < 0 &&
           errno == EINTR)
        ;
    if (n == 0) {
        snprintf (why, wlen, "Connection timed out");
        return -1;
    }
    if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
        snprintf (
            why, wlen, "Couldn't connect to server (%s)", strerror (err ? err : errno));
        return -1;
    }
    return 0;
}

/* "https://HOST:PORT" (config.c normalised it) into host and port. */
static int split_url (const char *url, char *host, size_t hlen, char *port, size_t plen)
{
    const char *p = strncmp (url, "https://", 8) == 0 ? url + 8 : url;
    const char *end;
    if (*p == '[') {
        end = strchr (p, ']');
        if (!end || end[1] != ':')
            return -1;
        snprintf (host, hlen, "%.*s", (int)(end - p - 1), p + 1);
        end++;
    } else {
        end = strrchr (p, ':');
        if (!end)
            return -1;
        snprintf (host, hlen, "%.*s", (int)(end - p), p);
    }
    snprintf (port, plen, "%.*s", (int)strcspn (end + 1, "/"), end + 1);
    return 0;
}

/* A TLS session with the broker at host:port, its certificate verified. */
static int open_tls (const struct api_target *t,
                     const char *host,
                     const char *port,
                     int64_t deadline,
                     int64_t connect_ms,
                     const struct api_tls_ticket *resume,
                     struct conn *c,
                     char *why,
                     size_t wlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo (host, port, &hints, &ai);
    if (rc != 0) {
        snprintf (why, wlen, "Couldn't resolve host name (%s)", gai_strerror (rc));
        return -1;
    }
    rc = -1;
    for (struct addrinfo *a = ai; a && rc < 0; a = a->ai_next) {
        if (c->fd >= 0)
            close (c->fd);
        c->fd = socket (a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fd < 0)
            snprintf (
                why, wlen, "Couldn't connect to server (socket: %s)", strerror (errno));
        else
            rc = connect_within (
                c->fd, a->ai_addr, a->ai_addrlen, connect_ms, why, wlen);
    }
    freeaddrinfo (ai);
    if (rc < 0)
        return -1;
    /* The handshake's last flight and the request are small writes in a
     * row: with Nagle's algorithm the request waited for the broker's
     * delayed ACK, 40 ms on Linux, in every prolog's RUN (measured: the
     * answer came 47 ms after the request, against 2.5 ms for the same
     * RUN on the socket).  curl sets it too. */
    int one = 1;
    (void)setsockopt (c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    /* connect_ms bounds the TLS handshake too, as a whole (a broker that
     * accepts and never answers must leave time for the next one), as
     * with curl */
    int64_t connected_by = fmb_monotime_ms () + connect_ms;
    if (api_tls_open (c->fd,
                      host,
                      t->ca_file,
                      resume,
                      connected_by < deadline ? connected_by : deadline,
                      &c->tls,
                      why,
                      wlen) < 0)
        return -1;
    c->deadline = deadline;
    return 0;
}

/* The broker's Unix socket. */
static int open_unix (
    const char *path, int64_t deadline, struct conn *c, char *why, size_t wlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen (path) >= sizeof (sa.sun_path)) {
        snprintf (why, wlen, "the path is too long for a socket");
        return -1;
    }
    strcpy (sa.sun_path, path);
    c->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* A broker whose queue of connections is full (stalled, or stopped
     * with SIGSTOP) makes connect() on a Unix socket wait for a slot:
     * SO_SNDTIMEO bounds that wait too (EAGAIN). */
    if (c->fd >= 0)
        set_io_deadline (c->fd, deadline);
    if (c->fd < 0 || connect (c->fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) {
            snprintf (
                why, wlen, "Connection timed out (the broker takes no connection)");
            return -1;
        }
        snprintf (why,
                  wlen,
                  "Couldn't connect to server (%s)",
                  err == ENOENT ? "no such socket: is fmbrokerd running, and is this "
                                  "its [api] socket?"
                  : err == EACCES
                      ? "permission denied: this user may not reach the socket or its "
                        "directory"
                  : err == ECONNREFUSED ? "connection refused: the socket is there but "
                                          "no broker listens (a stale socket)"
                                        : strerror (err));
        return -1;
    }
    c->deadline = deadline;
    return 0;
}

/* A TLS write takes an int: a request goes in pieces of one TLS record,
 * each bounded by what is left of the deadline (apitls.c). */
#define TLS_WRITE_PIECE 16384

static int conn_write_all (struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        if (conn_arm (c) < 0)
            return -1;
        size_t piece = n < TLS_WRITE_PIECE ? n : TLS_WRITE_PIECE;
        ssize_t w = c->tls ? api_tls_write (c->tls, p, (int)piece, c->deadline)
                           : write (c->fd, p, n);
        if (w <= 0) {
            if (!c->tls && w < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Where the header's Content-Length says the answer ends, or 0. */
static size_t declared_length (const char *text, size_t hdr_len)
{
    for (const char *h = strstr (text, "\r\n"); h && (size_t)(h - text) < hdr_len;
         h = strstr (h + 2, "\r\n"))
        if (strncasecmp (h + 2, "content-length:", 15) == 0)
            return hdr_len + strtoul (h + 17, NULL, 10);
    return 0;
}

/* One whole answer: the header, then Content-Length bytes or chunks to
 * the last one, or (a broker that sends neither) everything until it
 * closes (a TLS peer that closes without close_notify has closed too).
 * *reusable (for a connection kept open): nothing past the answer was
 * read and the broker did not close. */
static int conn_read_one (struct conn *c, char **out, size_t *len, bool *reusable)
{
    size_t cap = 16384, n = 0, want = 0;
    char *b = malloc (cap + 1);
    *reusable = false;
    while (b) {
        if (n == cap) {
            char *nb = cap < REPLY_MAX ? realloc (b, cap * 2 + 1) : NULL;
            if (!nb)
                break;
            b = nb;
            cap *= 2;
        }
        if (conn_arm (c) < 0)
            break;
        ssize_t r = c->tls ? api_tls_read (c->tls, b + n, (int)(cap - n), c->deadline)
                           : read (c->fd, b + n, cap - n);
        if (r <= 0) {
            if (!c->tls && r < 0 && errno == EINTR)
                continue;
            bool until_close = want == (size_t)-1 && n > 0;
            if (!until_close)
                break;
            b[n] = '\0';
            *out = b, *len = n;
            return 0;
        }
        n += (size_t)r;
        b[n] = '\0';
        char *hdr_end = want ? NULL : strstr (b, "\r\n\r\n");
        if (hdr_end) {
            size_t hdr_len = (size_t)(hdr_end - b) + 4;
            bool chunked = false;
            for (char *h = strstr (b, "\r\n"); h && h < hdr_end;
                 h = strstr (h + 2, "\r\n"))
                chunked |= strncasecmp (h + 2, "transfer-encoding:", 18) == 0;
            want = chunked ? (size_t)-2 : declared_length (b, hdr_len);
            want = want ? want : (size_t)-1;
        }
        bool whole =
            (want == (size_t)-2 && n >= 5 && !memcmp (b + n - 5, "0\r\n\r\n", 5)) ||
            (want && want < (size_t)-2 && n >= want);
        if (whole) {
            *reusable = n == (want < (size_t)-2 ? want : n);
            *out = b, *len = n;
            return 0;
        }
    }
    free (b);
    return -1;
}

/* Chunked transfer coding, decoded in place; -1 if malformed. */
static int dechunk (char *body, size_t *len)
{
    char *in = body, *out = body, *end = body + *len;
    for (;;) {
        char *nl = memchr (in, '\n', (size_t)(end - in));
        if (!nl)
            return -1;
        unsigned long n = strtoul (in, NULL, 16);
        in = nl + 1;
        if (n == 0)
            break;
        if (n > (size_t)(end - in))
            return -1;
        memmove (out, in, n);
        out += n;
        in += n;
        if (in < end && *in == '\r')
            in++;
        if (in < end && *in == '\n')
            in++;
    }
    *out = '\0';
    *len = (size_t)(out - body);
    return 0;
}

/* Status and JSON body of a whole HTTP/1.1 answer. */
static int parse_reply (char *text, size_t len, struct api_reply *ret)
{
    int status;
    if (sscanf (text, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    char *hdr_end = strstr (text, "\r\n\r\n");
    if (!hdr_end)
        return -1;
    *hdr_end = '\0';
    char *body = hdr_end + 4;
    size_t blen = len - (size_t)(body - text);
    bool chunked = false;
    for (char *h = strstr (text, "\r\n"); h; h = strstr (h + 2, "\r\n"))
        if (strncasecmp (h + 2, "transfer-encoding:", 18) == 0 &&
            strcasestr (h + 2, "chunked"))
            chunked = true;
    if (chunked && dechunk (body, &blen) < 0)
        return -1;
    ret->status = status;
    ret->body = blen ? json_loadb (body, blen, 0, NULL) : NULL;
    if (blen && !ret->body) /* a text answer (/metrics): as a JSON string */
        ret->body = json_stringn (body, blen);
    return 0;
}

/* A broker that took this long to be found away (no answer, not a
 * refusal) is taken as away for the window after: the service's next
 * callers, in line behind that wait, get the same reason at once. */
#define AWAY_SLOW_MS   1000
#define AWAY_WINDOW_MS 2000

struct api_keep {
    struct conn c;
    char base[FMB_CFG_PATH_MAX]; /* the URL it is to, "" the socket */
    int64_t away_until_ms;
    char away[FMB_ERROR_TEXT_MAX];
    struct api_tls_ticket *session;      /* the last TLS session, to resume */
    char session_base[FMB_CFG_PATH_MAX]; /* the URL it was with */
};

/* The session to resume with 'base' (NULL: none kept). */
static const struct api_tls_ticket *keep_session (const struct api_keep *k,
                                                  const char *base)
{
    return k && k->session && base && strcmp (k->session_base, base) == 0 ? k->session
                                                                          : NULL;
}

/* Keep the session of a connection that answered: its ticket came with
 * or after the handshake, read by now. */
static void keep_session_of (struct api_keep *k, const char *base, struct api_tls *tls)
{
    struct api_tls_ticket *s = k && base && tls ? api_tls_ticket_of (tls) : NULL;
    if (!s)
        return;
    api_tls_ticket_free (k->session);
    k->session = s;
    snprintf (k->session_base, sizeof (k->session_base), "%s", base);
}

struct api_keep *api_keep_create (void)
{
    struct api_keep *k = calloc (1, sizeof (*k));
    if (k)
        k->c.fd = -1;
    return k;
}

void api_keep_destroy (struct api_keep *k)
{
    if (k) {
        conn_close (&k->c);
        api_tls_ticket_free (k->session);
        free (k);
    }
}

/* Is an idle connection still open?  Readable is not closed: a TLS 1.3
 * server may send its session tickets after its first answer; those
 * records are read (and kept by OpenSSL) here.  End of file, an error,
 * or bytes of an answer nobody asked for: closed. */
static bool conn_still_open (struct conn *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (c->fd < 0)
        return false;
    if (poll (&p, 1, 0) == 0)
        return true;
    if (!c->tls || (p.revents & (POLLERR | POLLHUP)))
        return false;
    return api_tls_idle_open (c->tls);
}

bool api_keep_is_open (struct api_keep *k)
{
    if (!k || k->c.fd < 0)
        return false;
    if (!conn_still_open (&k->c)) { /* closed by the broker (or garbage): gone */
        conn_close (&k->c);
        return false;
    }
    return true;
}

void api_keep_clear_away (struct api_keep *k)
{
    if (k)
        k->away_until_ms = 0;
}

int api_keep_fd (const struct api_keep *k)
{
    return k ? k->c.fd : -1;
}

/* The kept connection to 'base', if it is still open: the broker may
 * close one idle ([api] tcp_idle_timeout_s, a restart), and a closed one
 * reads as ready. */
static bool keep_take (struct api_keep *k, const char *base, struct conn *c)
{
    if (!k || k->c.fd < 0)
        return false;
    if (strcmp (k->base, base ? base : "") != 0 || !conn_still_open (&k->c)) {
        conn_close (&k->c);
        return false;
    }
    *c = k->c;
    k->c = (struct conn){.fd = -1};
    return true;
}

static void keep_put (struct api_keep *k, const char *base, struct conn *c)
{
    conn_close (&k->c);
    snprintf (k->base, sizeof (k->base), "%s", base ? base : "");
    k->c = *c;
    *c = (struct conn){.fd = -1};
}

/* The request's text (the token's copy is wiped by the caller); NULL
 * with why. */
static char *request_text (const char *method,
                           const char *path,
                           const char *host,
                           const char *bearer,
                           const char *body,
                           bool keep,
                           size_t *len,
                           char *why,
                           size_t wlen)
{
    size_t blen = body ? strlen (body) : 0;
    char *req = malloc (REQUEST_MAX + blen);
    if (!req) {
        snprintf (why, wlen, "out of memory");
        return NULL;
    }
    int n = snprintf (req,
                      REQUEST_MAX,
                      "%s %s HTTP/1.1\r\nHost: %s\r\n%s"
                      "Accept: application/json\r\nContent-Type: application/json\r\n"
                      "%s%s%sContent-Length: %zu\r\n\r\n",
                      method,
                      path,
                      host,
                      keep ? "" : "Connection: close\r\n",
                      bearer ? "Authorization: Bearer " : "",
                      bearer ? bearer : "",
                      bearer ? "\r\n" : "",
                      blen);
    if (n < 0 || n >= REQUEST_MAX) {
        snprintf (why, wlen, "request too large");
        explicit_bzero (req, REQUEST_MAX);
        free (req);
        return NULL;
    }
    memcpy (req + n, body ? body : "", blen);
    *len = (size_t)n + blen;
    return req;
}

/* Did the broker say it closes the connection after this answer? */
static bool says_close (const char *reply)
{
    const char *end = strstr (reply, "\r\n\r\n");
    for (const char *h = strstr (reply, "\r\n"); h && h < end;
         h = strstr (h + 2, "\r\n"))
        if (strncasecmp (h + 2, "connection:", 11) == 0 &&
            strncasecmp (h + 2 + 11 + strspn (h + 13, " "), "close", 5) == 0)
            return true;
    return false;
}

/* One request to one broker ('base' an https URL, or NULL: the socket).
 * With 'keep', on the connection kept from the last call when it is
 * still open (a kept one that fails before any answer is replaced once:
 * the broker may have closed it as it went idle), and kept for the next.
 * -1 with why when no answer came. */
static int call_one (const struct api_target *t,
                     struct api_keep *keep,
                     const char *base,
                     int64_t deadline,
                     int64_t connect_ms,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     char *why,
                     size_t wlen)
{
    struct conn c = {.fd = -1};
    char host[256] = "fmbroker", port[16];
    char *req = NULL, *reply = NULL;
    size_t qlen = 0, rlen = 0;
    bool reused = false, reusable = false;
    int rc = -1;
    if (base && split_url (base, host, sizeof (host), port, sizeof (port)) < 0) {
        snprintf (why, wlen, "not an https://HOST:PORT URL");
        return -1;
    }
    req = request_text (method, path, host, bearer, body, keep, &qlen, why, wlen);
    if (!req)
        return -1;
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        conn_close (&c);
        reused = attempt == 0 && keep_take (keep, base, &c);
        if (!reused && (base ? open_tls (t,
                                         host,
                                         port,
                                         deadline,
                                         connect_ms,
                                         keep_session (keep, base),
                                         &c,
                                         why,
                                         wlen)
                             : open_unix (t->socket, deadline, &c, why, wlen)))
            break;
        if (reused)
            c.deadline = deadline;
        if (conn_write_all (&c, req, qlen) < 0) {
            snprintf (why,
                      wlen,
                      fmb_monotime_ms () >= deadline
                          ? "Operation timed out"
                          : "Failed sending data to the peer");
            /* only a kept connection (the broker may have closed it as
             * it went idle) is replaced; a new one failing is the answer */
            if (!reused || fmb_monotime_ms () >= deadline)
                break;
            continue;
        }
        if (conn_read_one (&c, &reply, &rlen, &reusable) < 0) {
            snprintf (why,
                      wlen,
                      fmb_monotime_ms () >= deadline ? "Operation timed out"
                                                     : "Failure when receiving data "
                                                       "from the peer");
            if (!reused || fmb_monotime_ms () >= deadline)
                break;
            continue;
        }
        rc = 0;
        if (!reused)
            keep_session_of (keep, base, c.tls);
    }
    if (rc == 0 && keep && reusable && !says_close (reply))
        keep_put (keep, base, &c);
    if (rc == 0 && parse_reply (reply, rlen, ret) < 0) {
        snprintf (why, wlen, "not an HTTP answer");
        rc = -1;
    }
    explicit_bzero (req, qlen); /* the token's copy */
    free (req);
    free (reply);
    conn_close (&c);
    return rc;
}

/* The call to the socket, or to each URL in turn. */
static int call_any (const struct api_target *t,
                     struct api_keep *keep,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error)
{
    char why[FMB_ERROR_TEXT_MAX] = "", one[160] = "";
    if (t->url && !api_tls_available ()) {
        errno = EPROTONOSUPPORT;
        return fmb_errorf (error,
                           "broker at %s: this program speaks to the broker's Unix "
                           "socket only, not TLS",
                           t->url);
    }
    if (t->url && !t->token[0] && (!bearer || !*bearer)) {
        errno = EACCES;
        return fmb_errorf (error, "%s", t->token_problem);
    }
    if (!bearer || !*bearer)
        bearer = t->url ? t->token : NULL;
    int64_t deadline = fmb_monotime_ms () + (timeout_s > 0 ? timeout_s : 300) * 1000;
    if (!t->url) {
        if (call_one (t,
                      keep,
                      NULL,
                      deadline,
                      0,
                      method,
                      path,
                      body,
                      bearer,
                      ret,
                      one,
                      sizeof (one)) == 0)
            return 0;
        errno = EHOSTUNREACH;
        return fmb_errorf (error, "broker at %s: %s", t->socket, one);
    }
    /* An ordered list: each broker in turn, within the one timeout; each
     * gets an equal share of what is left to connect, the last all of it. */
    unsigned n = api_target_url_count (t);
    for (unsigned i = 0; i < n; i++) {
        char base[FMB_CFG_PATH_MAX];
        api_target_url (t, i, base, sizeof (base));
        int64_t left = deadline - fmb_monotime_ms ();
        if (left <= 0)
            break;
        if (call_one (t,
                      keep,
                      base,
                      deadline,
                      left / (int64_t)(n - i),
                      method,
                      path,
                      body,
                      bearer,
                      ret,
                      one,
                      sizeof (one)) == 0)
            return 0;
        size_t used = strlen (why);
        if (snprintf (why + used,
                      sizeof (why) - used,
                      "%s%s: %s",
                      used ? "; " : "",
                      base,
                      one) < 0)
            why[used] = '\0';
    }
    errno = EHOSTUNREACH;
    return fmb_errorf (error, "broker at %s", why[0] ? why : t->url);
}

/* SIGPIPE held back from this thread for the call: a broker that closes
 * the connection while the request is still being written (killed, or
 * closing an idle kept one) must be an error the caller handles, not a
 * signal that kills it (the CLI, slurmstepd's step-end module,
 * flux-broker's threads).  OpenSSL writes with write(2), which has no
 * MSG_NOSIGNAL.  A SIGPIPE the call raised is taken back before the mask
 * is restored; one already pending stays pending. */
struct pipe_guard {
    sigset_t pipe_only, old;
    bool was_pending;
};

static void pipe_guard_hold (struct pipe_guard *g)
{
    sigset_t pending;
    sigemptyset (&g->pipe_only);
    sigaddset (&g->pipe_only, SIGPIPE);
    g->was_pending = sigpending (&pending) == 0 && sigismember (&pending, SIGPIPE) == 1;
    pthread_sigmask (SIG_BLOCK, &g->pipe_only, &g->old);
}

static void pipe_guard_release (struct pipe_guard *g)
{
    sigset_t pending;
    if (!g->was_pending && sigpending (&pending) == 0 &&
        sigismember (&pending, SIGPIPE) == 1) {
        struct timespec now = {0, 0};
        while (sigtimedwait (&g->pipe_only, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask (SIG_SETMASK, &g->old, NULL);
}

int api_client_call (const struct api_target *t,
                     struct api_keep *keep,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error)
{
    int64_t now = fmb_monotime_ms ();
    if (keep && now < keep->away_until_ms) {
        errno = EHOSTUNREACH;
        return fmb_errorf (error,
                           "%s (%lld ms ago; tried again %d s after)",
                           keep->away,
                           (long long)(now - keep->away_until_ms + AWAY_WINDOW_MS),
                           AWAY_WINDOW_MS / 1000);
    }
    struct pipe_guard guard;
    pipe_guard_hold (&guard);
    int rc = call_any (t, keep, timeout_s, method, path, body, bearer, ret, error);
    int err = errno;
    pipe_guard_release (&guard);
    if (keep && rc == 0)
        keep->away_until_ms = 0;
    else if (keep && err == EHOSTUNREACH && fmb_monotime_ms () - now >= AWAY_SLOW_MS) {
        keep->away_until_ms = fmb_monotime_ms () + AWAY_WINDOW_MS;
        snprintf (keep->away, sizeof (keep->away), "%s", error ? error->text : "");
    }
    errno = err;
    return rc;
}

int api_path_escape (const char *in, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || strchr ("-._~", *p);
        if (n + (plain ? 1 : 3) >= len) {
            if (len)
                out[0] = '\0';
            errno = ENAMETOOLONG;
            return -1;
        }
        if (plain)
            out[n++] = (char)*p;
        else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

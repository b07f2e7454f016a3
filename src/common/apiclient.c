/* apiclient.c: see apiclient.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <curl/curl.h>

#include "apiclient.h"
#include "fileutil.h"
#include "monotime.h"
#include "validate.h"

#define API_REPLY_MAX (16 * 1024 * 1024) /* a listing of 1000 jobs is ~1 MiB */

struct buf {
    char *p;
    size_t n;
};

static size_t collect (char *d, size_t s, size_t n, void *arg)
{
    struct buf *b = arg;
    if (b->n + s * n > API_REPLY_MAX)
        return 0;
    char *np = realloc (b->p, b->n + s * n + 1);
    if (!np)
        return 0;
    memcpy (np + b->n, d, s * n);
    b->p = np;
    b->n += s * n;
    b->p[b->n] = '\0';
    return s * n;
}

/* One attempt at one broker ('url', or the target's socket when NULL).
 * *cc is curl's verdict; *reached says whether a connection was made. */
static int call_one (const struct api_target *t,
                     const char *base,
                     long timeout_ms,
                     long connect_ms,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     CURLcode *cc)
{
    CURL *e = curl_easy_init ();
    struct buf b = {0};
    struct curl_slist *h = curl_slist_append (NULL, "Content-Type: application/json");
    char url[2048], auth[API_TOKEN_MAX + 32];
    long code = 0;
    *cc = CURLE_OUT_OF_MEMORY;
    if (!e || !h) {
        curl_slist_free_all (h);
        curl_easy_cleanup (e);
        return -1;
    }
    if (bearer && *bearer) {
        snprintf (auth, sizeof (auth), "Authorization: Bearer %s", bearer);
        struct curl_slist *with_auth = curl_slist_append (h, auth);
        explicit_bzero (auth, sizeof (auth));
        if (!with_auth) { /* h is still whole: never send without the token */
            curl_slist_free_all (h);
            curl_easy_cleanup (e);
            return -1;
        }
        h = with_auth;
    }
    if (base) {
        snprintf (url, sizeof (url), "%s%s", base, path);
        /* TLS verification stays on: only the CA is ours to choose */
        if (t->ca_file)
            curl_easy_setopt (e, CURLOPT_CAINFO, t->ca_file);
        curl_easy_setopt (e, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt (e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    } else {
        snprintf (url, sizeof (url), "http://fmbroker%s", path);
        curl_easy_setopt (e, CURLOPT_UNIX_SOCKET_PATH, t->socket);
    }
    curl_easy_setopt (e, CURLOPT_URL, url);
    curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt (e, CURLOPT_TIMEOUT_MS, timeout_ms);
    /* no SIGALRM for DNS timeouts: callers run it on threads (Flux) */
    curl_easy_setopt (e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (e, CURLOPT_WRITEDATA, &b);
    if (body)
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, body);
    *cc = curl_easy_perform (e);
    curl_easy_getinfo (e, CURLINFO_RESPONSE_CODE, &code);
    for (struct curl_slist *p = h; p; p = p->next) /* the token's copy */
        explicit_bzero (p->data, strlen (p->data));
    curl_slist_free_all (h);
    curl_easy_cleanup (e);
    if (*cc != CURLE_OK) {
        free (b.p);
        return -1;
    }
    ret->status = code;
    ret->body = b.p ? json_loads (b.p, 0, NULL) : NULL;
    if (b.p && !ret->body) /* a text answer (/metrics): as a JSON string */
        ret->body = json_string (b.p);
    free (b.p);
    return 0;
}

/* Why the broker's Unix socket took no connection, which curl does not
 * say ("Couldn't connect to server" whatever the cause): "" when a
 * connection works now. */
static const char *socket_problem (const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen (path) >= sizeof (sa.sun_path))
        return "the path is too long for a socket";
    strcpy (sa.sun_path, path);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return strerror (errno);
    int rc = connect (fd, (struct sockaddr *)&sa, sizeof (sa));
    int err = errno;
    close (fd);
    if (rc == 0)
        return "";
    switch (err) {
    case ENOENT:
        return "no such socket: is fmbrokerd running, and is this its [api] socket?";
    case EACCES:
        return "permission denied: this user may not reach the socket or its "
               "directory";
    case ECONNREFUSED:
        return "connection refused: the socket is there but no broker listens "
               "(a stale socket)";
    default:
        return strerror (err);
    }
}

/* Failures after which the next broker of the list is tried: no
 * connection, no TLS session, or a connection that died before an answer
 * (the broker was killed; every API call may be repeated, promise 5). */
static bool try_next (CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
        return true;
    default:
        return false;
    }
}

int api_client_call (const struct api_target *t,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error)
{
    if (t->url && !t->token[0] && (!bearer || !*bearer)) {
        errno = EACCES;
        return fmb_errorf (error, "%s", t->token_problem);
    }
    if (!bearer || !*bearer)
        bearer = t->url ? t->token : NULL;
    CURLcode cc = CURLE_COULDNT_CONNECT; /* stays if no URL is tried */
    if (!t->url) {
        if (call_one (
                t, NULL, timeout_s * 1000, 0, method, path, body, bearer, ret, &cc) ==
            0)
            return 0;
        errno = cc == CURLE_OUT_OF_MEMORY ? ENOMEM : EHOSTUNREACH;
        const char *why = cc == CURLE_COULDNT_CONNECT ? socket_problem (t->socket) : "";
        return fmb_errorf (error,
                           "broker at %s: %s%s%s%s",
                           t->socket,
                           curl_easy_strerror (cc),
                           why[0] ? " (" : "",
                           why,
                           why[0] ? ")" : "");
    }
    /* An ordered list: each broker in turn, within the one timeout.  A
     * broker whose host is gone may never refuse the connection, so each
     * gets an equal share of what is left to connect; the last one gets
     * all of it. */
    int64_t deadline = fmb_monotime_ms () + (timeout_s > 0 ? timeout_s : 300) * 1000;
    char why[FMB_ERROR_TEXT_MAX] = "";
    unsigned n = api_target_url_count (t);
    for (unsigned i = 0; i < n; i++) {
        char base[FMB_CFG_PATH_MAX];
        api_target_url (t, i, base, sizeof (base));
        int64_t left = deadline - fmb_monotime_ms ();
        if (left <= 0) {
            cc = CURLE_OPERATION_TIMEDOUT;
            break;
        }
        long connect_ms = (long)(left / (int64_t)(n - i));
        if (call_one (t,
                      base,
                      (long)left,
                      connect_ms > 0 ? connect_ms : 1,
                      method,
                      path,
                      body,
                      bearer,
                      ret,
                      &cc) == 0)
            return 0;
        size_t used = strlen (why);
        /* a long list is cut short: the message still names the first ones */
        if (snprintf (why + used,
                      sizeof (why) - used,
                      "%s%s: %s",
                      used ? "; " : "",
                      base,
                      curl_easy_strerror (cc)) < 0)
            why[used] = '\0';
        if (!try_next (cc))
            break;
    }
    errno = cc == CURLE_OUT_OF_MEMORY ? ENOMEM : EHOSTUNREACH;
    return fmb_errorf (error, "broker at %s", why[0] ? why : t->url);
}

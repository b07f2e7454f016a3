/* apitls.c: apitls.h over OpenSSL. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "apitls.h"
#include "monotime.h"

struct api_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
};

/* (an opaque name for OpenSSL's own session) */
struct api_tls_ticket;

enum tls_op { TLS_CONNECT, TLS_READ, TLS_WRITE };

/* One TLS operation, done by 'deadline': OpenSSL on a non-blocking
 * socket, and poll() on what is left of the time whenever it wants to
 * read or write.  (A socket timeout bounds each recv(2): a peer that
 * trickled a byte within it held a handshake, or one record, for as many
 * timeouts as it had bytes to send.)  SSL_*'s result; on the deadline,
 * -1 with *late (if given) set.  OpenSSL's error queue is left empty
 * unless the caller is to word the failure (TLS_CONNECT). */
static int tls_within (
    struct api_tls *s, enum tls_op op, void *buf, int n, int64_t deadline, bool *late)
{
    if (late)
        *late = false;
    for (;;) {
        ERR_clear_error ();
        errno = 0;
        int r = op == TLS_CONNECT ? SSL_connect (s->ssl)
                : op == TLS_READ  ? SSL_read (s->ssl, buf, n)
                                  : SSL_write (s->ssl, buf, n);
        if (r > 0)
            return r;
        int err = SSL_get_error (s->ssl, r);
        short want = err == SSL_ERROR_WANT_READ    ? POLLIN
                     : err == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                   : 0;
        if (!want) {
            if (op != TLS_CONNECT)
                ERR_clear_error (); /* not the next handshake's reason */
            return r;
        }
        struct pollfd p = {.fd = s->fd, .events = want};
        int64_t left = deadline - fmb_monotime_ms ();
        int ready = left > 0 ? poll (&p, 1, left > INT_MAX ? INT_MAX : (int)left) : 0;
        if ((ready < 0 && errno != EINTR) || ready == 0) {
            int why = ready == 0 ? ETIMEDOUT : errno;
            if (op != TLS_CONNECT)
                ERR_clear_error ();
            if (late)
                *late = ready == 0;
            errno = why;
            return -1;
        }
    }
}

static void tls_reason (char *why, size_t wlen, const char *what, SSL *ssl)
{
    unsigned long e = ERR_get_error ();
    long v = ssl ? SSL_get_verify_result (ssl) : X509_V_OK;
    if (v != X509_V_OK)
        snprintf (why,
                  wlen,
                  "%s: SSL certificate problem: %s",
                  what,
                  X509_verify_cert_error_string (v));
    else if (e)
        snprintf (why, wlen, "%s: %s", what, ERR_reason_error_string (e));
    else
        snprintf (why, wlen, "%s: %s", what, errno ? strerror (errno) : "failed");
    ERR_clear_error ();
}

bool api_tls_available (void)
{
    return true;
}

void api_tls_close (struct api_tls *s)
{
    if (!s)
        return;
    SSL_free (s->ssl);
    SSL_CTX_free (s->ctx);
    free (s);
}

int api_tls_open (int fd,
                  const char *host,
                  const char *ca_file,
                  const struct api_tls_ticket *ticket,
                  int64_t by,
                  struct api_tls **out,
                  char *why,
                  size_t wlen)
{
    struct api_tls *s = calloc (1, sizeof (*s));
    if (!s) {
        snprintf (why, wlen, "TLS: out of memory");
        return -1;
    }
    s->fd = fd;
    s->ctx = SSL_CTX_new (TLS_client_method ());
    if (!s->ctx) {
        tls_reason (why, wlen, "TLS", NULL);
        goto fail;
    }
    SSL_CTX_set_min_proto_version (s->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify (s->ctx, SSL_VERIFY_PEER, NULL);
    if ((ca_file ? SSL_CTX_load_verify_locations (s->ctx, ca_file, NULL)
                 : SSL_CTX_set_default_verify_paths (s->ctx)) != 1) {
        tls_reason (why, wlen, ca_file ? ca_file : "the system's CAs", NULL);
        goto fail;
    }
    s->ssl = SSL_new (s->ctx);
    if (!s->ssl || SSL_set_fd (s->ssl, fd) != 1) {
        tls_reason (why, wlen, "TLS", NULL);
        goto fail;
    }
    X509_VERIFY_PARAM *vp = SSL_get0_param (s->ssl);
    unsigned char addr[16];
    bool literal =
        inet_pton (AF_INET, host, addr) == 1 || inet_pton (AF_INET6, host, addr) == 1;
    if (literal)
        X509_VERIFY_PARAM_set1_ip_asc (vp, host);
    else {
        SSL_set_tlsext_host_name (s->ssl, host);
        X509_VERIFY_PARAM_set1_host (vp, host, 0);
    }
    /* The last session with this broker, if the caller kept one: a
     * resumed handshake spares the broker the certificate's signature
     * (1-3 ms of its CPU; a full machine reconnecting after a restart
     * is 10,000 of them). */
    if (ticket)
        (void)SSL_set_session (s->ssl, (SSL_SESSION *)ticket);
    bool late;
    if (tls_within (s, TLS_CONNECT, NULL, 0, by, &late) != 1) {
        if (late) {
            snprintf (why, wlen, "TLS handshake: Connection timed out");
            ERR_clear_error ();
        } else
            tls_reason (why, wlen, "TLS handshake", s->ssl);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    api_tls_close (s);
    return -1;
}

int api_tls_read (struct api_tls *s, void *buf, int n, int64_t deadline)
{
    return tls_within (s, TLS_READ, buf, n, deadline, NULL);
}

int api_tls_write (struct api_tls *s, const void *buf, int n, int64_t deadline)
{
    return tls_within (s, TLS_WRITE, (void *)buf, n, deadline, NULL);
}

bool api_tls_idle_open (struct api_tls *s)
{
    char b;
    ERR_clear_error (); /* (the socket is non-blocking) */
    int r = SSL_read (s->ssl, &b, 1);
    int err = SSL_get_error (s->ssl, r);
    ERR_clear_error ();
    return r <= 0 && err == SSL_ERROR_WANT_READ;
}

struct api_tls_ticket *api_tls_ticket_of (struct api_tls *s)
{
    SSL_SESSION *t = s ? SSL_get1_session (s->ssl) : NULL;
    if (t && !SSL_SESSION_is_resumable (t)) {
        SSL_SESSION_free (t);
        t = NULL;
    }
    return (struct api_tls_ticket *)t;
}

void api_tls_ticket_free (struct api_tls_ticket *t)
{
    SSL_SESSION_free ((SSL_SESSION *)t);
}

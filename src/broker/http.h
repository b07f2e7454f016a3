/* http.h: the REST API's transport: libmicrohttpd on the Unix socket (and
 * optionally TCP with TLS), driven by the broker's loop.  It reads each
 * request (bounded in size and in time; connections capped by conns.h)
 * and hands it to the dispatcher (dispatch.h) with the route table it was
 * given at create.  Answers go out when the loop pass's commit allows
 * (group commit); those of failed authentications later (a tarpit).
 * Handlers see httpreq.h only.
 */
#ifndef FMB_HTTP_H
#define FMB_HTTP_H

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "error.h"

struct broker;
struct http;
struct metrics;
struct roles;
struct route;

/* What the transport is handed at create: the route table and the
 * handles the request path uses. */
struct http_deps {
    const struct route *routes; /* dispatch.h; stays the caller's */
    unsigned nroutes;
    struct broker *route_arg; /* every handler's first argument */
    struct roles *roles;      /* who may do what (identity, fair share) */
    struct metrics *metrics;  /* answers by status, TCP refusals, failures */
    /* Is 'token' the session token of 'job'?  (dispatch_token_f) */
    bool (*job_token_ok) (void *arg, const char *job, const char *token);
    void *job_token_arg;
};

/* Listen on [api] socket (and [api] tcp, with TLS).  'cfg' is the running
 * configuration, read again at each request (reload changes it in place). */
int http_create (const struct fmb_config *cfg,
                 const struct http_deps *deps,
                 struct http **ret,
                 struct fmb_error *error);
void http_destroy (struct http *h);
/* Re-read [api] tokens_file and the node keys (reload); on failure the
 * old ones stay. */
int http_reload_tokens (struct http *h,
                        const struct fmb_config *cfg,
                        struct fmb_error *error);
/* Reload: how many of the TLS certificate and key served since start
 * differ from their files now (a renewal in place), each logged as
 * taking effect at the next restart: the listener keeps what it loaded. */
int http_tls_changed (struct http *h, const struct fmb_config *cfg);
/* Stop accepting connections (shutdown); requests in progress finish. */
void http_quiesce (struct http *h);
/* The TCP listener's TLS counters for /metrics, in Prometheus text
 * (nothing without a TCP listener). */
void http_print_tls (struct http *h, FILE *f);

/* Group commit: while holding, answers are kept back; http_release sends
 * them once the loop pass's transaction committed (or, if it did not,
 * replaces them with 503s that give 'why', the store's reason). */
void http_hold (struct http *h, bool on);
int http_release (struct http *h, bool committed, const char *why);
/* Answers wait for the loop pass's commit (http_hold)? */
bool http_holds_answers (const struct http *h);

int http_pollfds (struct http *h, struct pollfd *fds, int max);
int http_timeout_ms (struct http *h);
/* Accept, read, answer.  'fds' are http_pollfds' entries after poll():
 * the Unix socket is accepted on only when they say it is readable (an
 * accept that finds nothing is a system call per pass for nothing);
 * NULL: no accept, only the connections already open. */
void http_process (struct http *h, const struct pollfd *fds, int n);

#endif

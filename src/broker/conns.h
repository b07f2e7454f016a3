/* conns.h: the REST API's listening sockets and connections.  The broker
 * accepts on both itself, so that a connection is counted before it
 * costs anything: on the Unix socket per uid (SO_PEERCRED; peers.h), on
 * TCP per address, in all and while unauthenticated (tcpguard.h); over a
 * limit it is refused at once.  Each accepted one is handed to the
 * listener's libmicrohttpd daemon and tracked until it closes, with a
 * deadline for the request being read.
 */
#ifndef FMB_CONNS_H
#define FMB_CONNS_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "error.h"

struct conns;
struct http_conn;
struct metrics;
struct roles;
struct tcpguard;
struct tlsfront;
struct tlsfront_files;
struct MHD_Connection;
struct MHD_Daemon;

struct conns *conns_create (const struct fmb_config *cfg,
                            struct roles *roles,
                            struct metrics *metrics);
void conns_destroy (struct conns *cs);
/* Listen on the Unix socket at 'path' (its directory made, a stale
 * socket file replaced; another broker listening there is an error). */
int conns_listen_unix (struct conns *cs, const char *path, struct fmb_error *error);
/* Listen on [api] tcp, its bounds fitted to the file limit, its TLS on
 * the front's threads (tlsfront.h) with 'tls'; *max_conns: how many
 * connections it takes at most. */
int conns_listen_tcp (struct conns *cs,
                      const struct fmb_config *cfg,
                      const struct tlsfront_files *tls,
                      unsigned *max_conns,
                      struct fmb_error *error);
/* The TCP listener's TLS front (NULL: no TCP), for its counters. */
struct tlsfront *conns_front (const struct conns *cs);
/* The Unix socket's connection limit ([api] max_connections). */
unsigned conns_max_unix (const struct conns *cs);
/* The TCP connections per address and their failures (NULL: no TCP). */
struct tcpguard *conns_guard (const struct conns *cs);
/* A daemon the listener's connections go to: the Unix socket's, or
 * ('tcp') one of the TCP port's shards, handed connections in turn. */
void conns_add_daemon (struct conns *cs, bool tcp, struct MHD_Daemon *d);

/* libmicrohttpd's connection notifications: started on the listener
 * ('tcp'), closed. */
void conns_started (struct conns *cs, bool tcp, struct MHD_Connection *mc, void **ctx);
void conns_closed (struct conns *cs, void **ctx);
/* A request's deadline starts (a new connection's first request)... */
void conns_arm (struct http_conn *c);
/* ...or, between requests, the idle time a connection is given: kept
 * for an authenticated TCP one ([api] tcp_idle_timeout_s). */
void conns_arm_idle (struct http_conn *c);
/* A request on TCP connection 'c' showed a valid credential: it no
 * longer counts as unauthenticated, and is never evicted. */
void conns_authenticated (struct http_conn *c);
/* A request on TCP connection 'c' is done and answered: an
 * authenticated one is parked once its answer went (tlsfront.h). */
void conns_park (struct http_conn *c);
/* ...and ends: the request is read, what remains is the broker's work. */
void conns_disarm (struct MHD_Connection *mc);
/* Cut connections whose request is late. */
void conns_cut_late (struct conns *cs);
/* Until the earliest deadline (ms; -1: none). */
int conns_next_deadline_ms (const struct conns *cs);

/* The listening sockets for poll() (none while accepting is paused). */
int conns_pollfds (struct conns *cs, struct pollfd *fds, int max);
/* Accept on the listening sockets poll() found readable. */
void conns_accept (struct conns *cs, const struct pollfd *fds, int n);
/* Until accepting resumes after running out of descriptors (ms; -1:
 * not paused). */
int64_t conns_accept_paused_ms (const struct conns *cs);
/* Stop accepting (shutdown): the listening sockets close. */
void conns_quiesce (struct conns *cs);

#endif

/* tlsfront.h: the TCP listener's TLS, on threads of its own.
 *
 * The loop accepts a TCP connection and counts it (conns.c); the front
 * does its TLS handshake and, for as long as it lives, its record layer,
 * on a few threads, and hands the loop the plaintext end of a socketpair
 * that libmicrohttpd serves like any other connection.  So no handshake
 * (1-3 ms of CPU each) and no record crypto runs on the thread that
 * answers the resource manager's RUN on the Unix socket, and a storm of
 * 10,000 nodes connecting costs the loop one accept and one hand-over
 * each.  Everything the loop keeps (caps, credentials, the store) stays
 * on the loop: the front only moves bytes and says what the handshake
 * learned of the peer's certificate.
 */
#ifndef FMB_TLSFRONT_H
#define FMB_TLSFRONT_H

#include <stdbool.h>
#include <sys/socket.h>

#include "error.h"
#include "tcpguard.h"
#include "validate.h"

struct tlsfront;

struct tlsfront_files {
    const char *cert, *key; /* PEM text */
    const char *priorities; /* a GnuTLS priority string ([api] tls_priorities) */
    const char *trust;      /* PEM text of [api] tls_client_ca, or NULL: no client
                               certificates asked */
};

/* What the handshake learned of the peer's client certificate. */
enum tls_peer_cert {
    TLS_PEER_CERT_BAD = -1, /* offered, but does not verify or is not for clients */
    TLS_PEER_CERT_NONE = 0,
    TLS_PEER_CERT_NAMED = 1, /* verified; 'node' is its CN or first DNS name */
};

struct tls_peer {
    enum tls_peer_cert cert;
    char node[NODE_NAME_MAX + 1];
    char why[128]; /* for TLS_PEER_CERT_BAD */
    bool resumed;  /* the handshake resumed an earlier session (a ticket) */
};

/* What the front tells the loop of a connection:
 * - fd >= 0: the plaintext end for the loop's HTTP server, 'handle'
 *   naming the connection at the front (tlsfront_park, _release).
 *   'kept': one the loop was handed before and that was parked, now with
 *   a request ('peer' is not filled again: the loop kept it);
 * - fd < 0, handle NULL: the handshake failed or took too long, and
 *   'tag' gives its slot back;
 * - fd < 0, handle set: a connection handed before has ended (its HTTP
 *   connection, if any, reads end of file); the loop gives its slot back
 *   once that has closed too, and then calls tlsfront_release. */
struct tlsfront_conn {
    int fd;
    struct sockaddr_storage sa;
    socklen_t salen;
    char addr[TCPGUARD_ADDR_MAX];
    struct tls_peer peer;
    void *tag;    /* tlsfront_add's */
    void *handle; /* the front's */
    bool kept;
};

/* The front's bounds. */
struct tlsfront_limits {
    unsigned threads;      /* 1-64 workers */
    unsigned handshake_ms; /* a handshake, a wait for a relay, a stalled relay */
    unsigned idle_ms;      /* a parked connection's life; 0: while its peer's */
    unsigned relays;       /* socketpairs at once (0: no bound); half of them
                              for connections never parked */
};

/* Counters the loop reads for /metrics (monotonic). */
struct tlsfront_stats {
    unsigned long long handshakes, resumed, failed, timed_out;
    unsigned long long handshake_us; /* CPU-less wall time is not counted: thread CPU */
    unsigned long long parks, unparks;
    unsigned long long parked, relayed, waiting; /* now: connections in each state */
};

/* The files are copied. */
int tlsfront_create (const struct tlsfront_files *files,
                     const struct tlsfront_limits *lim,
                     struct tlsfront **ret,
                     struct fmb_error *error);
void tlsfront_destroy (struct tlsfront *tf);

/* Take over accepted socket 'fd' (non-blocking), counted by the caller
 * under 'addr'; 'tag' comes back with it from tlsfront_take.  Returns the
 * worker it went to (for tlsfront_cut), or -1 (errno): not taken; the
 * caller closes it. */
int tlsfront_add (struct tlsfront *tf,
                  int fd,
                  const struct sockaddr *sa,
                  socklen_t salen,
                  const char *addr,
                  void *tag);
/* Cut the connection 'tag' on 'worker' if its handshake is not done: it
 * comes back from tlsfront_take as a failed one (fd < 0).  If it is done
 * already, nothing happens (the loop has it, or soon will). */
int tlsfront_cut (struct tlsfront *tf, int worker, void *tag);

/* The request on connection 'handle' (of 'worker') is done and its
 * answer written: once the answer has gone and no next request has
 * begun, the front parks the connection: its socketpair closes (the
 * loop's HTTP connection reads end of file), its TLS socket stays; the
 * peer's next bytes come back from tlsfront_take as a 'kept' connection.
 * Never blocks. */
int tlsfront_park (struct tlsfront *tf, int worker, void *handle);
/* The loop has forgotten connection 'handle', told it had ended. */
void tlsfront_release (struct tlsfront *tf, int worker, void *handle);

/* Readable when connections wait in tlsfront_take. */
int tlsfront_pollfd (const struct tlsfront *tf);

/* Up to 'max' connections the front is done setting up; never blocks. */
int tlsfront_take (struct tlsfront *tf, struct tlsfront_conn *out, int max);

void tlsfront_stats (struct tlsfront *tf, struct tlsfront_stats *st);

/* Can these files and priorities serve TLS?  (--check-config and start) */
int tlsfront_check (const struct tlsfront_files *files, struct fmb_error *error);

#endif

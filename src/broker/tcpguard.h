/* tcpguard.h: the TCP listener's connections counted per client address,
 * and failed authentications per address (promise 7: no one who reaches
 * the TCP port can take the Unix socket's share or guess tokens freely).
 *
 * A connection is admitted at accept, before libmicrohttpd sees it: at
 * most max_total in all (sized to the file limit, so the Unix socket's
 * connections always fit), per_addr from one address, and max_unauth
 * that have not yet shown a valid credential, per_addr_unauth of them
 * from one address.  An address is the caller's key: an IPv6 one's /64
 * (fmb_addr_guess_key), which one host may hold whole.  When max_total or
 * max_unauth is reached, a new connection may still come in if its
 * caller evicts an older unauthenticated one whose address holds more
 * of them than the newcomer's (issue 51: addresses holding idle
 * connections must not lock nodes out, and cannot evict each other in
 * turn); an authenticated one is never evicted, nor one its address
 * holds alone (a node's new connection, in its handshake).  Failed authentications
 * from an address (an IPv6 one as its /64: fmb_addr_guess_key) are
 * answered later and later (a tarpit) once they
 * pass TCPGUARD_FREE_FAILS in TCPGUARD_FAIL_WINDOW_MS, in turn across all
 * its connections, so guessing costs time whatever the parallelism;
 * the loop never waits for it.
 */
#ifndef FMB_TCPGUARD_H
#define FMB_TCPGUARD_H

#include <stdbool.h>
#include <stdint.h>

#define TCPGUARD_ADDR_MAX       64
#define TCPGUARD_FREE_FAILS     5     /* a mistyped token or two cost nothing */
#define TCPGUARD_FAIL_WINDOW_MS 60000 /* failures older than this are forgotten */
#define TCPGUARD_STEP_MS        200   /* each failure past the free ones adds... */
#define TCPGUARD_MAX_STEP_MS    2000  /* ...up to this much */
#define TCPGUARD_MAX_QUEUE_MS   30000 /* an address's answers queued past this: cut */
#define TCPGUARD_LOG_MS         10000 /* one line per address per 10 s at most */
/* Connections admitted over a limit whose evicted connection has not
 * yet given its slot back (the TLS front closes it on its thread). */
#define TCPGUARD_EVICTING_MAX 64
/* An eviction looks at this many of the oldest unauthenticated
 * connections for one whose address holds more of them than the
 * newcomer's. */
#define TCPGUARD_EVICT_SCAN 32

struct tcpguard_limits {
    unsigned max_total;
    unsigned per_addr;
    unsigned max_unauth;
    unsigned per_addr_unauth;
};

struct tcpguard;

/* NULL when out of memory. */
struct tcpguard *tcpguard_create (const struct tcpguard_limits *lim);
void tcpguard_destroy (struct tcpguard *g);

enum tcpguard_admission {
    TCPGUARD_REFUSED = 0, /* nothing counted; the limit in 'why' */
    TCPGUARD_ADMITTED = 1,
    /* counted, over max_total or max_unauth: the caller evicts the
     * oldest unauthenticated connection (or releases this one) */
    TCPGUARD_EVICT = 2,
};
/* Count a new, unauthenticated connection from key 'addr'. */
enum tcpguard_admission tcpguard_admit (struct tcpguard *g,
                                        const char *addr,
                                        const char **why);
/* How many of key 'addr''s connections have shown no credential yet. */
unsigned tcpguard_unauth_of (const struct tcpguard *g, const char *addr);
/* One of the connections of 'addr' showed a valid credential. */
void tcpguard_authenticated (struct tcpguard *g, const char *addr);
/* Forget one connection of 'addr' ('authed': it had shown one). */
void tcpguard_release (struct tcpguard *g, const char *addr, bool authed);
unsigned tcpguard_open (const struct tcpguard *g);

/* What a failed authentication from 'addr' at 'now_ms' costs. */
struct tcpguard_verdict {
    int64_t answer_at_ms; /* answer no earlier than this (0: at once) */
    bool cut;             /* too many queued: close the connection */
    bool log;             /* a line is due for this address */
    unsigned fails;       /* in the window, this one included */
    unsigned unlogged;    /* failures not logged since the last line */
};
void tcpguard_auth_failed (struct tcpguard *g,
                           const char *addr,
                           int64_t now_ms,
                           struct tcpguard_verdict *v);

#endif

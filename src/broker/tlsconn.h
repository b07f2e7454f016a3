/* tlsconn.h: the TLS front's connections and workers, as tlsfront.c
 * (their life: handshake, relay, park) and tlsrelay.c (the bytes they
 * move) share them.  Not for other files: tlsfront.h is the front's API.
 */
#ifndef FMB_TLSCONN_H
#define FMB_TLSCONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>

#include "tlsfront.h"

#define RELAY_CHUNK 16384

struct conn_list {
    struct tconn *head, *tail;
};

struct tconn {
    struct worker *w;
    struct tconn *prev, *next; /* on 'on', one of the worker's lists */
    struct conn_list *on;
    int tls_fd, plain_fd;
    gnutls_session_t s;
    int64_t deadline_ms; /* of the handshake, or of the wait for a relay */
    int64_t parked_ms;   /* when it was parked: its idle time */
    struct sockaddr_storage sa;
    socklen_t salen;
    char addr[TCPGUARD_ADDR_MAX];
    void *tag; /* the loop's, handed back with the connection */
    /* what one side read and the other could not take yet */
    char *to_plain;
    size_t to_plain_len, to_plain_off;
    char *to_tls;
    size_t to_tls_len, to_tls_off;
    bool tls_again; /* a record is in GnuTLS, to be flushed with (NULL, 0) */
    uint32_t ev_tls, ev_plain;
    bool dead; /* closed in this batch of events: freed after it */
    struct tconn *dead_next;
    /* one side's bytes waiting for the other, since then or since the
     * side they wait for last took some: a side that takes nothing for
     * the stall time closes the connection */
    struct tconn *sprev, *snext;
    bool stalled_listed;
    bool moved_tls, moved_plain; /* bytes went to that side since stalled_update */
    int64_t stalled_since_ms;
    bool stalled_on_peer; /* the side waited for: the peer, else the loop */
    long stalled_queued;  /* what that side's socket held then */
    bool plain_hup;   /* the loop closed its end: what it wrote goes, then we close */
    bool handed;      /* the loop has it: its end comes back as 'gone' */
    bool kept;        /* parked before: its relay is not a new connection's */
    bool park_wanted; /* the loop's request is done: park once all went */
    bool req_open;    /* the peer's bytes went to the loop since its last answer */
    unsigned gen;     /* of its relay: an event of a closed one's end is stale */
};

struct worker {
    struct tlsfront *tf;
    pthread_t thread;
    bool started;
    int ep;
    int wake; /* eventfd: new connections, or stop */
    pthread_mutex_t mu;
    struct tconn *inbox, *inbox_tail; /* handed over by tlsfront_add (mu) */
    struct msg *msgs;                 /* the loop's cuts, parks, releases (mu) */
    size_t nmsgs, msgs_size;
    struct conn_list handshaking;  /* oldest first: their deadlines in order */
    struct conn_list waiting;      /* handshake done, no relay: deadlines in order */
    struct conn_list waiting_kept; /* parked, bytes came, no relay yet */
    struct conn_list relaying;
    struct conn_list parked; /* in the order they were parked */
    struct conn_list gone;   /* closed, the loop told: freed at its release */
    unsigned relays, fresh;  /* socketpairs held; of them, new connections' */
    unsigned relays_max, fresh_max;
    struct tconn *stalled_head, *stalled_tail; /* with bytes waiting, oldest first */
    struct tconn *dead;      /* closed, freed once the batch of events is done */
    struct closing *closing; /* parked connections' old socketpairs */
};

/* What the loop asks of a worker. */
enum msg_kind {
    MSG_CUT,     /* a handshake (by tag): give it up */
    MSG_PARK,    /* a relayed connection (handle): its request is done */
    MSG_RELEASE, /* a connection (handle) that ended: the loop forgot it */
};

struct msg {
    enum msg_kind kind;
    void *p;
};

struct done {
    struct done *next;
    struct tlsfront_conn c;
};

struct tlsfront {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    gnutls_datum_t ticket_key;
    bool ask_cert;
    unsigned handshake_ms; /* also how long bytes may wait for a side */
    unsigned idle_ms;      /* a parked connection's life; 0: while the peer's */
    unsigned nworkers;
    unsigned next_worker;
    struct worker *w;
    atomic_bool stopping;
    int done_fd; /* eventfd: connections wait in 'done' */
    pthread_mutex_t mu;
    struct done *done_head, *done_tail;
    atomic_ullong handshakes, resumed, failed, timed_out, handshake_us;
    atomic_ullong parks, unparks;
    atomic_llong n_parked, n_relays, n_waiting; /* gauges */
};

/* ---- tlsrelay.c ----------------------------------------------------- */

/* A worker's lists (oldest first). */
void tlsrelay_list_add (struct conn_list *l, struct tconn *c);
void tlsrelay_list_del (struct tconn *c);
void tlsrelay_list_move (struct conn_list *to, struct tconn *c);
/* Off the worker's list of connections with bytes waiting for a side. */
void tlsrelay_stalled_del (struct worker *w, struct tconn *c);
/* The stalled list's head is past its time: true (and listed again from
 * now) when the side its bytes wait for took some from the kernel's
 * queue meanwhile. */
bool tlsrelay_stalled_moved (struct tconn *c);
/* Events 'want' on 'fd' in the worker's epoll set; *have: what it has
 * ('tag' in the event's data beside the connection); -1: errno. */
int tlsrelay_watch (
    struct tconn *c, int fd, uint32_t *have, uint32_t want, uintptr_t tag);
/* Both sides' events as their buffers say, and the stalled list. */
int tlsrelay_relay_events (struct tconn *c);
/* A copy of buf[0..len) in *dst; -1: out of memory. */
int tlsrelay_keep (char **dst, size_t *dlen, size_t *doff, const char *buf, size_t len);
/* Moving bytes: 0 for now (a side would block), -1 the connection ends. */
int tlsrelay_tls_to_plain (struct tconn *c);
int tlsrelay_plain_to_tls (struct tconn *c);
/* The loop closed its end while the peer had not taken what it wrote. */
void tlsrelay_plain_hung_up (struct tconn *c);

#endif

/* tlsfront.c: the TCP listener's TLS on threads of its own (tlsfront.h).
 *
 * Each worker thread has an epoll set.  A connection it is given goes
 * through its handshake (GnuTLS, non-blocking), then the worker makes a
 * socketpair, hands one end to the loop and relays: TLS records from the
 * peer, decrypted, into its end; bytes from its end, encrypted, to the
 * peer.  Either side closing closes both.  Nothing here touches what the
 * loop owns: a connection's slot, its credentials and its requests are
 * the loop's, found from the plaintext end it is handed.
 *
 * Session tickets (RFC 5077, TLS 1.3 PSK) let a node that reconnects
 * resume without the certificate's signature: the expensive part of a
 * handshake.  The ticket key is made at start and held in memory only;
 * a restart makes every node do one full handshake again.
 *
 * Memory: a relayed connection holds its GnuTLS session and no buffer;
 * a buffer is allocated only while the other side cannot take what was
 * read (and freed when it has).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "monotime.h"
#include "tlsfront.h"

#define RELAY_CHUNK 16384
#define EVENTS_MAX  64
/* The workers yield to the loop when both want a core: a storm of
 * handshakes slows down, the RM's RUN does not. */
#define WORKER_NICE 5

struct tconn {
    struct worker *w;
    struct tconn *prev, *next; /* the worker's list it is on */
    int tls_fd, plain_fd;
    gnutls_session_t s;
    bool relaying;
    int64_t deadline_ms; /* of the handshake */
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
    /* one side's bytes waiting for the other, since then: a side that
     * takes nothing for the stall time closes the connection */
    struct tconn *sprev, *snext;
    bool stalled_listed;
    int64_t stalled_since_ms;
    bool plain_hup; /* the loop closed its end: what it wrote goes, then we close */
};

struct conn_list {
    struct tconn *head, *tail;
};

struct worker {
    struct tlsfront *tf;
    pthread_t thread;
    bool started;
    int ep;
    int wake; /* eventfd: new connections, or stop */
    pthread_mutex_t mu;
    struct tconn *inbox, *inbox_tail; /* handed over by tlsfront_add (mu) */
    void **cuts;                      /* tags of handshakes the loop wants cut (mu) */
    size_t ncuts, cuts_size;
    struct conn_list handshaking; /* oldest first: their deadlines in order */
    struct conn_list relaying;
    struct tconn *stalled_head, *stalled_tail; /* with bytes waiting, oldest first */
    struct tconn *dead; /* closed, freed once the batch of events is done */
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
    unsigned nworkers;
    unsigned next_worker;
    struct worker *w;
    atomic_bool stopping;
    int done_fd; /* eventfd: connections wait in 'done' */
    pthread_mutex_t mu;
    struct done *done_head, *done_tail;
    atomic_ullong handshakes, resumed, failed, timed_out, handshake_us;
};

/* ---- lists ---------------------------------------------------------- */

static void list_add (struct conn_list *l, struct tconn *c)
{
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static void list_del (struct conn_list *l, struct tconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
}

/* The stalled list: connections one of whose sides has not taken what
 * the other sent.  In the order they began waiting: the head is the
 * first to be cut. */
static void stalled_del (struct worker *w, struct tconn *c)
{
    if (!c->stalled_listed)
        return;
    if (c->sprev)
        c->sprev->snext = c->snext;
    else
        w->stalled_head = c->snext;
    if (c->snext)
        c->snext->sprev = c->sprev;
    else
        w->stalled_tail = c->sprev;
    c->sprev = c->snext = NULL;
    c->stalled_listed = false;
}

/* On the list while bytes wait, with the time they began to; off it
 * once none do (a side that takes something is not stalled). */
static void stalled_update (struct tconn *c)
{
    struct worker *w = c->w;
    bool waiting = c->to_plain || c->to_tls;
    if (!waiting) {
        stalled_del (w, c);
        return;
    }
    if (c->stalled_listed)
        return;
    c->stalled_since_ms = fmb_monotime_ms ();
    c->snext = NULL;
    c->sprev = w->stalled_tail;
    if (w->stalled_tail)
        w->stalled_tail->snext = c;
    else
        w->stalled_head = c;
    w->stalled_tail = c;
    c->stalled_listed = true;
}

/* ---- to the loop ---------------------------------------------------- */

static void wake_fd (int fd)
{
    uint64_t one = 1;
    ssize_t ignored = write (fd, &one, sizeof (one));
    (void)ignored;
}

static void give_loop (struct tlsfront *tf, const struct tlsfront_conn *c)
{
    struct done *d = malloc (sizeof (*d));
    if (!d) { /* the loop never learns of it: its slot stays taken */
        if (c->fd >= 0)
            close (c->fd);
        return;
    }
    d->c = *c;
    d->next = NULL;
    pthread_mutex_lock (&tf->mu);
    if (tf->done_tail)
        tf->done_tail->next = d;
    else
        tf->done_head = d;
    tf->done_tail = d;
    pthread_mutex_unlock (&tf->mu);
    wake_fd (tf->done_fd);
}

/* A handshake that did not finish: the loop gives the slot back. */
static void give_back (struct tconn *c)
{
    struct tlsfront_conn out = {.fd = -1, .salen = c->salen};
    memcpy (&out.sa, &c->sa, sizeof (out.sa));
    snprintf (out.addr, sizeof (out.addr), "%s", c->addr);
    out.tag = c->tag;
    give_loop (c->w->tf, &out);
}

/* ---- a connection --------------------------------------------------- */

/* Its session, sockets and buffers; the record itself stays while
 * events of the same batch may still name it. */
static void conn_release (struct tconn *c)
{
    if (c->s)
        gnutls_deinit (c->s);
    c->s = NULL;
    if (c->tls_fd >= 0)
        close (c->tls_fd);
    if (c->plain_fd >= 0)
        close (c->plain_fd);
    c->tls_fd = c->plain_fd = -1;
    free (c->to_plain);
    free (c->to_tls);
    c->to_plain = c->to_tls = NULL;
}

static void conn_free (struct tconn *c)
{
    conn_release (c);
    free (c);
}

/* Close a connection in either phase.  A handshake's slot is the loop's
 * to give back; a relayed connection's end at the loop reads EOF. */
static void conn_close (struct tconn *c)
{
    struct worker *w = c->w;
    stalled_del (w, c);
    if (c->relaying) {
        list_del (&w->relaying, c);
        if (c->s)
            gnutls_bye (c->s, GNUTLS_SHUT_WR); /* non-blocking: best effort */
    } else {
        list_del (&w->handshaking, c);
        give_back (c);
    }
    conn_release (c);
    c->dead = true;
    c->dead_next = w->dead;
    w->dead = c;
}

static void free_dead (struct worker *w)
{
    while (w->dead) {
        struct tconn *c = w->dead;
        w->dead = c->dead_next;
        free (c);
    }
}

static int watch (struct tconn *c, int fd, uint32_t *have, uint32_t want, uintptr_t tag)
{
    if (*have == want)
        return 0;
    struct epoll_event ev = {.events = want, .data.u64 = (uintptr_t)c | tag};
    int op = *have == UINT32_MAX ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl (c->w->ep, op, fd, &ev) < 0)
        return -1;
    *have = want;
    return 0;
}

/* What each side waits for: a side is read only while the other has
 * taken everything read before (back-pressure, no unbounded buffer). */
static int relay_events (struct tconn *c)
{
    uint32_t tls = (c->to_plain ? 0 : EPOLLIN) | (c->to_tls ? EPOLLOUT : 0);
    uint32_t plain = (c->to_tls ? 0 : EPOLLIN) | (c->to_plain ? EPOLLOUT : 0);
    stalled_update (c);
    if (watch (c, c->tls_fd, &c->ev_tls, tls, 0) < 0 ||
        (!c->plain_hup && watch (c, c->plain_fd, &c->ev_plain, plain, 1) < 0))
        return -1;
    return 0;
}

/* Keep buf[off..len) for later; -1 out of memory. */
static int keep (char **dst, size_t *dlen, size_t *doff, const char *buf, size_t len)
{
    if (!(*dst = malloc (len)))
        return -1;
    memcpy (*dst, buf, len);
    *dlen = len;
    *doff = 0;
    return 0;
}

/* Write what is pending for the loop's end; 1 when all went. */
static int flush_plain (struct tconn *c)
{
    while (c->to_plain) {
        ssize_t n = send (c->plain_fd,
                          c->to_plain + c->to_plain_off,
                          c->to_plain_len - c->to_plain_off,
                          MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->to_plain_off += (size_t)n;
        if (c->to_plain_off == c->to_plain_len) {
            free (c->to_plain);
            c->to_plain = NULL;
        }
    }
    return 1;
}

/* Records from the peer, decrypted, to the loop's end. */
static int tls_to_plain (struct tconn *c)
{
    char buf[RELAY_CHUNK];
    int f;
    if ((f = flush_plain (c)) <= 0)
        return f;
    for (;;) {
        ssize_t n = gnutls_record_recv (c->s, buf, sizeof (buf));
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            return 0;
        if (n <= 0) /* closed, or an error (a renegotiation attempt too) */
            return -1;
        ssize_t w = send (c->plain_fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w < 0)
            w = 0;
        if (w < n) {
            if (keep (&c->to_plain,
                      &c->to_plain_len,
                      &c->to_plain_off,
                      buf + w,
                      (size_t)(n - w)) < 0)
                return -1;
            return 0;
        }
    }
}

/* Send what is pending to the peer; 1 when all went. */
static int flush_tls (struct tconn *c)
{
    while (c->to_tls) {
        ssize_t n = c->tls_again ? gnutls_record_send (c->s, NULL, 0)
                                 : gnutls_record_send (c->s,
                                                       c->to_tls + c->to_tls_off,
                                                       c->to_tls_len - c->to_tls_off);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            c->tls_again = true;
            return 0;
        }
        if (n < 0)
            return -1;
        c->tls_again = false;
        c->to_tls_off += (size_t)n;
        if (c->to_tls_off >= c->to_tls_len) {
            free (c->to_tls);
            c->to_tls = NULL;
        }
    }
    return 1;
}

/* Bytes from the loop's end, encrypted, to the peer. */
static int plain_to_tls (struct tconn *c)
{
    char buf[RELAY_CHUNK];
    int f;
    if ((f = flush_tls (c)) <= 0)
        return f;
    for (;;) {
        ssize_t n = recv (c->plain_fd, buf, sizeof (buf), MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (n == 0) /* the loop closed it */
            return -1;
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t s = gnutls_record_send (c->s, buf + off, (size_t)n - off);
            if (s == GNUTLS_E_AGAIN || s == GNUTLS_E_INTERRUPTED) {
                if (keep (&c->to_tls,
                          &c->to_tls_len,
                          &c->to_tls_off,
                          buf + off,
                          (size_t)n - off) < 0)
                    return -1;
                c->tls_again = true;
                return 0;
            }
            if (s < 0)
                return -1;
            off += (size_t)s;
        }
    }
}

/* The loop closed its end while the peer had not taken what it wrote:
 * epoll would report the hang-up at every wait (a side left unwatched
 * still reports it), so the loop's end leaves the set; what it wrote is
 * still read and sent, and end of file then closes the connection. */
static void plain_hung_up (struct tconn *c)
{
    c->plain_hup = true;
    (void)epoll_ctl (c->w->ep, EPOLL_CTL_DEL, c->plain_fd, NULL);
    c->ev_plain = UINT32_MAX;
}

static void relay (struct tconn *c, bool plain_side, uint32_t events)
{
    bool hup = events & (EPOLLHUP | EPOLLERR);
    if (hup && !plain_side &&
        c->to_plain) { /* the peer went, the loop was not reading */
        conn_close (c);
        return;
    }
    if (hup && plain_side && c->to_tls && !c->plain_hup)
        plain_hung_up (c);
    /* Each side first: what waits for it may now go, then read more.
     * Whichever side fired, both are tried: a flush on one side lets the
     * other be read again. */
    int a = plain_side ? plain_to_tls (c) : tls_to_plain (c);
    int b = a < 0 ? -1 : plain_side ? tls_to_plain (c) : plain_to_tls (c);
    if (a < 0 || b < 0 || relay_events (c) < 0)
        conn_close (c);
}

/* ---- the handshake -------------------------------------------------- */

/* Does the certificate allow TLS client authentication?  With no
 * extended key usage at all it may serve any purpose (RFC 5280). */
static bool for_clients (gnutls_x509_crt_t crt)
{
    bool any = false;
    for (unsigned i = 0;; i++) {
        char oid[128];
        size_t sz = sizeof (oid);
        int r = gnutls_x509_crt_get_key_purpose_oid (crt, i, oid, &sz, NULL);
        if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            return !any;
        if (r < 0)
            return false;
        any = true;
        if (strcmp (oid, GNUTLS_KP_TLS_WWW_CLIENT) == 0 ||
            strcmp (oid, GNUTLS_KP_ANY) == 0)
            return true;
    }
}

static void peer_bad (struct tls_peer *p, const char *why)
{
    p->cert = TLS_PEER_CERT_BAD;
    p->node[0] = '\0';
    snprintf (p->why, sizeof (p->why), "%s", why);
}

/* The peer's certificate: verified against [api] tls_client_ca, meant
 * for clients, its CN (or first DNS name) a node name. */
static void identify_peer (const struct tlsfront *tf,
                           gnutls_session_t s,
                           struct tls_peer *p)
{
    unsigned n = 0, status = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers (s, &n);
    p->resumed = gnutls_session_is_resumed (s) != 0;
    p->cert = TLS_PEER_CERT_NONE;
    if (!tf->ask_cert || !certs || n == 0)
        return;
    if (gnutls_certificate_verify_peers2 (s, &status) < 0 || status != 0)
        return peer_bad (
            p, "its client certificate does not verify against [api] tls_client_ca");
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init (&crt) < 0)
        return peer_bad (p, "out of memory reading its client certificate");
    if (gnutls_x509_crt_import (crt, &certs[0], GNUTLS_X509_FMT_DER) < 0)
        peer_bad (p, "its client certificate cannot be read");
    else if (!for_clients (crt))
        peer_bad (p,
                  "its certificate's extended key usage does not allow TLS client "
                  "authentication (clientAuth)");
    else {
        size_t sz = sizeof (p->node);
        unsigned type = 0;
        if ((gnutls_x509_crt_get_subject_alt_name2 (
                 crt, 0, p->node, &sz, &type, NULL) == GNUTLS_SAN_DNSNAME ||
             (sz = sizeof (p->node),
              gnutls_x509_crt_get_dn_by_oid (
                  crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, p->node, &sz) == 0)) &&
            valid_node_name (p->node))
            p->cert = TLS_PEER_CERT_NAMED;
        else
            peer_bad (p, "its client certificate names no valid node");
    }
    gnutls_x509_crt_deinit (crt);
}

static int64_t thread_cpu_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The handshake is done: the loop gets its end, the relay starts. */
static void handshake_done (struct tconn *c)
{
    struct tlsfront *tf = c->w->tf;
    struct tlsfront_conn out = {.salen = c->salen};
    int sv[2];
    identify_peer (tf, c->s, &out.peer);
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
        conn_close (c);
        return;
    }
    list_del (&c->w->handshaking, c);
    list_add (&c->w->relaying, c);
    c->relaying = true;
    c->plain_fd = sv[0];
    c->ev_plain = UINT32_MAX;
    atomic_fetch_add (&tf->handshakes, 1);
    if (out.peer.resumed)
        atomic_fetch_add (&tf->resumed, 1);
    out.fd = sv[1];
    memcpy (&out.sa, &c->sa, sizeof (out.sa));
    snprintf (out.addr, sizeof (out.addr), "%s", c->addr);
    out.tag = c->tag;
    give_loop (tf, &out);
    /* a request may have come with the handshake's last flight: GnuTLS
     * holds it already, and epoll will not say so again */
    relay (c, false, 0);
}

static void handshake_step (struct tconn *c)
{
    int64_t t0 = thread_cpu_us ();
    int r = gnutls_handshake (c->s);
    atomic_fetch_add (&c->w->tf->handshake_us,
                      (unsigned long long)(thread_cpu_us () - t0));
    if (r == GNUTLS_E_SUCCESS) {
        handshake_done (c);
        return;
    }
    if (!gnutls_error_is_fatal (r)) {
        uint32_t want = gnutls_record_get_direction (c->s) ? EPOLLOUT : EPOLLIN;
        if (watch (c, c->tls_fd, &c->ev_tls, want, 0) == 0)
            return;
    }
    atomic_fetch_add (&c->w->tf->failed, 1);
    conn_close (c);
}

static int session_new (struct tlsfront *tf, struct tconn *c)
{
    if (gnutls_init (&c->s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) {
        c->s = NULL;
        return -1;
    }
    if (gnutls_priority_set (c->s, tf->prio) < 0 ||
        gnutls_credentials_set (c->s, GNUTLS_CRD_CERTIFICATE, tf->cred) < 0 ||
        gnutls_session_ticket_enable_server (c->s, &tf->ticket_key) < 0)
        return -1;
    if (tf->ask_cert)
        gnutls_certificate_server_set_request (c->s, GNUTLS_CERT_REQUEST);
    gnutls_transport_set_int (c->s, c->tls_fd);
    return 0;
}

/* Handshakes the loop wants cut (tlsfront_cut): each found among this
 * worker's is closed, its slot given back as for a failed one; one done
 * meanwhile is the loop's already.  Linear in the worker's handshakes,
 * only when the loop evicts. */
static void take_cuts (struct worker *w, void **cuts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (struct tconn *c = w->handshaking.head; c; c = c->next)
            if (c->tag == cuts[i]) {
                atomic_fetch_add (&w->tf->failed, 1);
                conn_close (c);
                break;
            }
    free (cuts);
}

/* New connections from the loop: each starts its handshake. */
static void take_inbox (struct worker *w)
{
    uint64_t n;
    ssize_t ignored = read (w->wake, &n, sizeof (n));
    (void)ignored;
    pthread_mutex_lock (&w->mu);
    struct tconn *c = w->inbox;
    w->inbox = w->inbox_tail = NULL;
    void **cuts = w->cuts;
    size_t ncuts = w->ncuts;
    w->cuts = NULL;
    w->ncuts = w->cuts_size = 0;
    pthread_mutex_unlock (&w->mu);
    while (c) {
        struct tconn *next = c->next;
        list_add (&w->handshaking, c);
        if (session_new (w->tf, c) < 0) {
            atomic_fetch_add (&w->tf->failed, 1);
            conn_close (c);
        } else
            handshake_step (c);
        c = next;
    }
    take_cuts (w, cuts, ncuts);
}

/* Handshakes past their time are cut (a peer that never sends its
 * ClientHello holds nothing for long).  Returns the wait until the next
 * deadline, or -1. */
static int cut_late (struct worker *w)
{
    int64_t now = fmb_monotime_ms (), stall = w->tf->handshake_ms, next = -1;
    while (w->handshaking.head && w->handshaking.head->deadline_ms <= now) {
        atomic_fetch_add (&w->tf->timed_out, 1);
        conn_close (w->handshaking.head);
    }
    /* a peer (or the loop) that takes nothing for as long: the connection
     * goes, and with it what it holds (its slot at the loop, too) */
    while (w->stalled_head && w->stalled_head->stalled_since_ms + stall <= now)
        conn_close (w->stalled_head);
    if (w->handshaking.head)
        next = w->handshaking.head->deadline_ms - now;
    if (w->stalled_head) {
        int64_t d = w->stalled_head->stalled_since_ms + stall - now;
        next = next < 0 || d < next ? d : next;
    }
    return (int)next;
}

static void *worker_main (void *arg)
{
    struct worker *w = arg;
    struct epoll_event ev[EVENTS_MAX];
    (void)setpriority (PRIO_PROCESS, (id_t)syscall (SYS_gettid), WORKER_NICE);
    while (!atomic_load (&w->tf->stopping)) {
        int n = epoll_wait (w->ep, ev, EVENTS_MAX, cut_late (w));
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 0) {
                take_inbox (w);
                continue;
            }
            struct tconn *c =
                (struct tconn *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)1);
            bool plain_side = ev[i].data.u64 & 1;
            if (c->dead) /* closed by an earlier event of this batch */
                continue;
            if (c->relaying)
                relay (c, plain_side, ev[i].events);
            else
                handshake_step (c);
        }
        free_dead (w);
    }
    free_dead (w);
    return NULL;
}

/* ---- the front ------------------------------------------------------ */

static int load_creds (struct tlsfront *tf,
                       const struct tlsfront_files *f,
                       struct fmb_error *error)
{
    const char *at = NULL;
    gnutls_datum_t cert = {(unsigned char *)f->cert, (unsigned)strlen (f->cert)};
    gnutls_datum_t key = {(unsigned char *)f->key, (unsigned)strlen (f->key)};
    int r;
    if ((r = gnutls_certificate_allocate_credentials (&tf->cred)) < 0 ||
        (r = gnutls_certificate_set_x509_key_mem (
             tf->cred, &cert, &key, GNUTLS_X509_FMT_PEM)) < 0)
        return fmb_errorf (error,
                           "[api] tls_cert/tls_key: %s (a PEM certificate and its key)",
                           gnutls_strerror (r));
    if (f->trust) {
        gnutls_datum_t trust = {(unsigned char *)f->trust, (unsigned)strlen (f->trust)};
        if ((r = gnutls_certificate_set_x509_trust_mem (
                 tf->cred, &trust, GNUTLS_X509_FMT_PEM)) <= 0)
            return fmb_errorf (error,
                               "[api] tls_client_ca: %s",
                               r < 0 ? gnutls_strerror (r) : "no certificate in it");
        tf->ask_cert = true;
    }
    if ((r = gnutls_priority_init (&tf->prio, f->priorities, &at)) < 0)
        return fmb_errorf (error,
                           "[api] tls_priorities: %s at '%.40s'",
                           gnutls_strerror (r),
                           at ? at : "");
    if ((r = gnutls_session_ticket_key_generate (&tf->ticket_key)) < 0)
        return fmb_errorf (error, "TLS session tickets: %s", gnutls_strerror (r));
    return 0;
}

int tlsfront_check (const struct tlsfront_files *files, struct fmb_error *error)
{
    struct tlsfront tf = {0};
    int rc = load_creds (&tf, files, error);
    if (tf.prio)
        gnutls_priority_deinit (tf.prio);
    if (tf.cred)
        gnutls_certificate_free_credentials (tf.cred);
    if (tf.ticket_key.data)
        gnutls_free (tf.ticket_key.data);
    return rc;
}

static int worker_start (struct tlsfront *tf, struct worker *w)
{
    w->tf = tf;
    w->ep = epoll_create1 (EPOLL_CLOEXEC);
    w->wake = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init (&w->mu, NULL);
    if (w->ep < 0 || w->wake < 0)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (epoll_ctl (w->ep, EPOLL_CTL_ADD, w->wake, &ev) < 0)
        return -1;
    if ((errno = pthread_create (&w->thread, NULL, worker_main, w)) != 0)
        return -1;
    w->started = true;
    return 0;
}

int tlsfront_create (const struct tlsfront_files *files,
                     unsigned threads,
                     unsigned handshake_ms,
                     struct tlsfront **ret,
                     struct fmb_error *error)
{
    struct tlsfront *tf = calloc (1, sizeof (*tf));
    if (!tf)
        return fmb_errorf (error, "out of memory");
    tf->done_fd = -1;
    pthread_mutex_init (&tf->mu, NULL);
    tf->handshake_ms = handshake_ms;
    tf->nworkers = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    if (load_creds (tf, files, error) < 0)
        goto fail;
    if ((tf->done_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        !(tf->w = calloc (tf->nworkers, sizeof (*tf->w)))) {
        fmb_errorf (error, "TLS threads: %s", strerror (errno ? errno : ENOMEM));
        goto fail;
    }
    for (unsigned i = 0; i < tf->nworkers; i++) /* none closes fd 0 on a failure */
        tf->w[i].ep = tf->w[i].wake = -1;
    for (unsigned i = 0; i < tf->nworkers; i++) {
        if (worker_start (tf, &tf->w[i]) < 0) {
            fmb_errorf (error, "TLS thread %u: %s", i, strerror (errno));
            goto fail;
        }
    }
    *ret = tf;
    return 0;
fail:
    tlsfront_destroy (tf);
    return -1;
}

static void worker_stop (struct worker *w)
{
    if (w->started) {
        wake_fd (w->wake);
        pthread_join (w->thread, NULL);
    }
    while (w->handshaking.head) {
        struct tconn *c = w->handshaking.head;
        list_del (&w->handshaking, c);
        conn_free (c);
    }
    while (w->relaying.head) {
        struct tconn *c = w->relaying.head;
        list_del (&w->relaying, c);
        conn_free (c);
    }
    for (struct tconn *c = w->inbox, *next; c; c = next) {
        next = c->next;
        conn_free (c);
    }
    free_dead (w);
    free (w->cuts);
    if (w->ep >= 0)
        close (w->ep);
    if (w->wake >= 0)
        close (w->wake);
    pthread_mutex_destroy (&w->mu);
}

void tlsfront_destroy (struct tlsfront *tf)
{
    if (!tf)
        return;
    atomic_store (&tf->stopping, true);
    for (unsigned i = 0; tf->w && i < tf->nworkers; i++)
        worker_stop (&tf->w[i]);
    free (tf->w);
    for (struct done *d = tf->done_head, *next; d; d = next) {
        next = d->next;
        if (d->c.fd >= 0)
            close (d->c.fd);
        free (d);
    }
    if (tf->done_fd >= 0)
        close (tf->done_fd);
    if (tf->prio)
        gnutls_priority_deinit (tf->prio);
    if (tf->cred)
        gnutls_certificate_free_credentials (tf->cred);
    if (tf->ticket_key.data) {
        explicit_bzero (tf->ticket_key.data, tf->ticket_key.size);
        gnutls_free (tf->ticket_key.data);
    }
    pthread_mutex_destroy (&tf->mu);
    free (tf);
}

int tlsfront_add (struct tlsfront *tf,
                  int fd,
                  const struct sockaddr *sa,
                  socklen_t salen,
                  const char *addr,
                  void *tag)
{
    struct tconn *c = calloc (1, sizeof (*c));
    if (!c) {
        errno = ENOMEM;
        return -1;
    }
    unsigned wi = tf->next_worker++ % tf->nworkers;
    struct worker *w = &tf->w[wi];
    c->w = w;
    c->tag = tag;
    c->tls_fd = fd;
    c->plain_fd = -1;
    c->ev_tls = c->ev_plain = UINT32_MAX;
    c->deadline_ms = fmb_monotime_ms () + tf->handshake_ms;
    c->salen = salen > sizeof (c->sa) ? sizeof (c->sa) : salen;
    memcpy (&c->sa, sa, c->salen);
    snprintf (c->addr, sizeof (c->addr), "%s", addr);
    pthread_mutex_lock (&w->mu); /* in arrival order: their deadlines in order */
    c->next = NULL;
    if (w->inbox_tail)
        w->inbox_tail->next = c;
    else
        w->inbox = c;
    w->inbox_tail = c;
    pthread_mutex_unlock (&w->mu);
    wake_fd (w->wake);
    return (int)wi;
}

int tlsfront_cut (struct tlsfront *tf, int worker, void *tag)
{
    if (worker < 0 || (unsigned)worker >= tf->nworkers) {
        errno = EINVAL;
        return -1;
    }
    struct worker *w = &tf->w[worker];
    pthread_mutex_lock (&w->mu);
    if (w->ncuts == w->cuts_size) {
        size_t size = w->cuts_size ? 2 * w->cuts_size : 16;
        void **more = realloc (w->cuts, size * sizeof (*more));
        if (!more) {
            pthread_mutex_unlock (&w->mu);
            errno = ENOMEM;
            return -1;
        }
        w->cuts = more;
        w->cuts_size = size;
    }
    w->cuts[w->ncuts++] = tag;
    pthread_mutex_unlock (&w->mu);
    wake_fd (w->wake);
    return 0;
}

int tlsfront_pollfd (const struct tlsfront *tf)
{
    return tf->done_fd;
}

int tlsfront_take (struct tlsfront *tf, struct tlsfront_conn *out, int max)
{
    uint64_t n;
    int got = 0;
    ssize_t ignored = read (tf->done_fd, &n, sizeof (n));
    (void)ignored;
    pthread_mutex_lock (&tf->mu);
    while (got < max && tf->done_head) {
        struct done *d = tf->done_head;
        tf->done_head = d->next;
        if (!tf->done_head)
            tf->done_tail = NULL;
        out[got++] = d->c;
        free (d);
    }
    bool more = tf->done_head != NULL;
    pthread_mutex_unlock (&tf->mu);
    if (more) /* the rest in a later pass: the fd stays readable */
        wake_fd (tf->done_fd);
    return got;
}

void tlsfront_stats (struct tlsfront *tf, struct tlsfront_stats *st)
{
    st->handshakes = atomic_load (&tf->handshakes);
    st->resumed = atomic_load (&tf->resumed);
    st->failed = atomic_load (&tf->failed);
    st->timed_out = atomic_load (&tf->timed_out);
    st->handshake_us = atomic_load (&tf->handshake_us);
}

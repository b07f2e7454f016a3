/* tlsfront.c: the TCP listener's TLS on threads of its own (tlsfront.h).
 *
 * Each worker thread has an epoll set.  A connection it is given goes
 * through its handshake (GnuTLS, non-blocking), then the worker makes a
 * socketpair, hands one end to the loop and relays: TLS records from the
 * peer, decrypted, into its end; bytes from its end, encrypted, to the
 * peer.  Either side closing closes both.  Nothing here touches what the
 * loop owns: a connection's slot, its credentials and its requests are
 * the loop's, found from the tag it is handed back.
 *
 * Parking (issue 49): a node's authenticated connection is kept between
 * jobs, idle for hours.  When the loop says a request is done
 * (tlsfront_park) and nothing is on its way either way, the worker
 * closes the socketpair (libmicrohttpd then closes its connection) and
 * keeps only the TLS socket and its session: 1 descriptor instead of 3,
 * and no HTTP connection.  The peer's next bytes get a new socketpair,
 * handed to the loop as a connection it knows ('kept'); the slot, the
 * authentication and the certificate's name stay with the loop's slot.
 *
 * Relays (socketpairs) are a budget: at most 'relays' at once, half of
 * them for connections not parked before (new, unauthenticated ones), so
 * that a flood of handshakes never keeps a node's next request waiting
 * for one.  A connection without one waits, its TLS socket unread.
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
#include <limits.h>
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
#include "tlsconn.h"
#include "tlsfront.h"

#define EVENTS_MAX 64
/* The workers yield to the loop when both want a core: a storm of
 * handshakes slows down, the RM's RUN does not. */
#define WORKER_NICE 5

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

/* A connection ended: a handshake that did not finish (the loop gives
 * the slot back), or ('handed') one the loop had, whose slot goes once
 * its HTTP connection has closed too. */
static void give_back (struct tconn *c)
{
    struct tlsfront_conn out = {.fd = -1, .salen = c->salen};
    memcpy (&out.sa, &c->sa, sizeof (out.sa));
    snprintf (out.addr, sizeof (out.addr), "%s", c->addr);
    out.tag = c->tag;
    out.handle = c->handed ? c : NULL;
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

/* A relay's place in the budget given back. */
static void relay_unbudget (struct worker *w, bool kept)
{
    w->relays--;
    if (!kept)
        w->fresh--;
    atomic_fetch_sub (&w->tf->n_relays, 1);
}

/* Its socketpair goes (closed: the loop's end reads end of file), and
 * with it its place in the budget: the connection ends, its TLS socket
 * with it, so the loop's end outlives it by one descriptor at most. */
static void relay_free (struct tconn *c)
{
    struct worker *w = c->w;
    tlsrelay_stalled_del (w, c);
    if (c->plain_fd >= 0)
        close (c->plain_fd);
    c->plain_fd = -1;
    c->ev_plain = UINT32_MAX;
    c->plain_hup = false;
    relay_unbudget (w, c->kept);
}

/* A parked connection's old socketpair: its end here is shut for
 * writing, and it stays in the budget until the loop has closed its end
 * (end of file here): else a storm's parks and unparks, each leaving the
 * loop an end to close later, would hold more descriptors than the
 * budget says. */
struct closing {
    struct worker *w;
    struct closing *prev, *next; /* the worker's, to free at the end */
    int fd;
    bool kept;
};

static void closing_free (struct closing *k)
{
    struct worker *w = k->w;
    if (k->prev)
        k->prev->next = k->next;
    else
        w->closing = k->next;
    if (k->next)
        k->next->prev = k->prev;
    close (k->fd);
    free (k);
}

/* Park's half of relay_free: the budget is given back by closing_event. */
static void relay_drain (struct tconn *c)
{
    struct worker *w = c->w;
    struct closing *k = malloc (sizeof (*k));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uintptr_t)k | 4};
    if (!k || shutdown (c->plain_fd, SHUT_WR) < 0 ||
        epoll_ctl (w->ep,
                   c->ev_plain == UINT32_MAX ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
                   c->plain_fd,
                   &ev) < 0) {
        free (k);
        relay_free (c);
        return;
    }
    tlsrelay_stalled_del (w, c);
    *k = (struct closing){
        .w = w, .next = w->closing, .fd = c->plain_fd, .kept = c->kept};
    if (w->closing)
        w->closing->prev = k;
    w->closing = k;
    c->plain_fd = -1;
    c->ev_plain = UINT32_MAX;
    c->plain_hup = false;
}

/* The loop's end of a parked connection's old socketpair: read until
 * it closes (it writes nothing more: its request was done). */
static void closing_event (struct closing *k)
{
    char buf[512];
    for (;;) {
        ssize_t n = recv (k->fd, buf, sizeof (buf), MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        break; /* end of file, or an error: it is gone either way */
    }
    relay_unbudget (k->w, k->kept);
    closing_free (k);
}

/* Close a connection in any phase.  A handshake's slot is the loop's to
 * give back; a relayed connection's end at the loop reads EOF; the loop
 * is told of every one it had, and releases it (tlsfront_release). */
static void conn_close (struct tconn *c)
{
    struct worker *w = c->w;
    tlsrelay_stalled_del (w, c);
    if (c->on == &w->relaying) {
        if (c->s)
            gnutls_bye (c->s, GNUTLS_SHUT_WR); /* non-blocking: best effort */
        relay_free (c);
    } else if (c->on == &w->parked)
        atomic_fetch_sub (&w->tf->n_parked, 1);
    else if (c->on == &w->waiting || c->on == &w->waiting_kept)
        atomic_fetch_sub (&w->tf->n_waiting, 1);
    tlsrelay_list_del (c);
    give_back (c);
    conn_release (c);
    c->dead = true;
    if (c->handed) /* the loop may still name it: kept until it says */
        tlsrelay_list_add (&w->gone, c);
    else {
        c->dead_next = w->dead;
        w->dead = c;
    }
}

static void free_dead (struct worker *w)
{
    while (w->dead) {
        struct tconn *c = w->dead;
        w->dead = c->dead_next;
        free (c);
    }
}

/* The loop's request is done (tlsfront_park): once its answer has all
 * gone to the peer and none of the peer's bytes is on its way to the
 * loop, the socketpair closes (the loop's HTTP connection reads end of
 * file and goes) and the TLS socket waits alone for the next request.
 * A request begun meanwhile keeps the relay: the loop asks again when
 * that one is done.  (A client that pipelines, sending its next request
 * before it read the answer, could lose that request to a park; HTTP
 * clients do not pipeline, the node service's libcurl among them.) */
static void try_park (struct tconn *c)
{
    struct worker *w = c->w;
    c->park_wanted = false;
    if (c->plain_hup) /* the loop closed its end: the connection ends */
        return;
    if (tlsrelay_plain_to_tls (c) < 0) {
        conn_close (c);
        return;
    }
    if (c->req_open || gnutls_record_check_pending (c->s) > 0)
        return;
    if (c->to_tls || c->tls_again) { /* once the answer went */
        c->park_wanted = true;
        if (tlsrelay_relay_events (c) < 0)
            conn_close (c);
        return;
    }
    relay_drain (c);
    c->kept = true;
    tlsrelay_list_move (&w->parked, c);
    c->parked_ms = fmb_monotime_ms ();
    atomic_fetch_add (&w->tf->n_parked, 1);
    atomic_fetch_add (&w->tf->parks, 1);
    if (tlsrelay_watch (c, c->tls_fd, &c->ev_tls, EPOLLIN, 0) < 0)
        conn_close (c);
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
        tlsrelay_plain_hung_up (c);
    /* Each side first: what waits for it may now go, then read more.
     * Whichever side fired, both are tried: a flush on one side lets the
     * other be read again. */
    int a = plain_side ? tlsrelay_plain_to_tls (c) : tlsrelay_tls_to_plain (c);
    int b = a < 0        ? -1
            : plain_side ? tlsrelay_tls_to_plain (c)
                         : tlsrelay_plain_to_tls (c);
    if (a < 0 || b < 0 || tlsrelay_relay_events (c) < 0)
        conn_close (c);
    else if (c->park_wanted)
        try_park (c);
}

/* ---- relays: the budget of socketpairs ------------------------------ */

static bool has_relay (const struct worker *w, bool kept)
{
    return w->relays < w->relays_max && (kept || w->fresh < w->fresh_max);
}

static void identify_peer (const struct tlsfront *tf,
                           gnutls_session_t s,
                           struct tls_peer *p);

/* The connection gets a socketpair: one end to the loop (a new HTTP
 * connection; 'kept' if the loop had it before), the other relayed. */
static void start_relay (struct tconn *c)
{
    struct worker *w = c->w;
    struct tlsfront *tf = w->tf;
    struct tlsfront_conn out = {.salen = c->salen, .kept = c->handed};
    int sv[2];
    if (!c->handed) /* a kept one's is the loop's already */
        identify_peer (tf, c->s, &out.peer);
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
        conn_close (c);
        return;
    }
    if (c->on == &w->waiting || c->on == &w->waiting_kept)
        atomic_fetch_sub (&tf->n_waiting, 1);
    tlsrelay_list_move (&w->relaying, c);
    c->plain_fd = sv[0];
    c->ev_plain = UINT32_MAX;
    c->gen++;
    w->relays++;
    if (!c->kept)
        w->fresh++;
    atomic_fetch_add (&tf->n_relays, 1);
    out.fd = sv[1];
    memcpy (&out.sa, &c->sa, sizeof (out.sa));
    snprintf (out.addr, sizeof (out.addr), "%s", c->addr);
    out.tag = c->tag;
    out.handle = c;
    c->handed = true;
    give_loop (tf, &out);
    /* bytes may wait already: kept from the peer's first record after a
     * park, or in GnuTLS from the handshake's last flight (epoll will not
     * say so again) */
    relay (c, false, 0);
}

/* A relay now, or a wait for one: its TLS socket is not read meanwhile
 * (only its hang-up is seen); a new connection's wait has the
 * handshake's deadline. */
static void relay_or_wait (struct tconn *c)
{
    struct worker *w = c->w;
    if (has_relay (w, c->kept)) {
        start_relay (c);
        return;
    }
    tlsrelay_list_move (c->kept ? &w->waiting_kept : &w->waiting, c);
    c->deadline_ms = fmb_monotime_ms () + w->tf->handshake_ms;
    atomic_fetch_add (&w->tf->n_waiting, 1);
    if (tlsrelay_watch (c, c->tls_fd, &c->ev_tls, 0, 0) < 0)
        conn_close (c);
}

/* Relays freed in this batch go to those waiting: parked connections'
 * requests first, then new connections. */
static void serve_waiting (struct worker *w)
{
    while (w->waiting_kept.head && has_relay (w, true))
        start_relay (w->waiting_kept.head);
    while (w->waiting.head && has_relay (w, false))
        start_relay (w->waiting.head);
}

/* A parked connection's peer sent something: its next request (a relay
 * for it, now or once one is free), or its end. */
static void unpark (struct tconn *c)
{
    char buf[RELAY_CHUNK];
    ssize_t n = gnutls_record_recv (c->s, buf, sizeof (buf));
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
        return; /* a record with no data (a TLS 1.3 key update) */
    if (n <= 0 ||
        tlsrelay_keep (
            &c->to_plain, &c->to_plain_len, &c->to_plain_off, buf, (size_t)n) < 0) {
        conn_close (c);
        return;
    }
    c->req_open = true;
    atomic_fetch_sub (&c->w->tf->n_parked, 1);
    atomic_fetch_add (&c->w->tf->unparks, 1);
    relay_or_wait (c);
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

/* The handshake is done: a relay, or the wait for one. */
static void handshake_done (struct tconn *c)
{
    struct tlsfront *tf = c->w->tf;
    atomic_fetch_add (&tf->handshakes, 1);
    if (gnutls_session_is_resumed (c->s))
        atomic_fetch_add (&tf->resumed, 1);
    relay_or_wait (c);
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
        if (tlsrelay_watch (c, c->tls_fd, &c->ev_tls, want, 0) == 0)
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

/* A handshake the loop wants cut (tlsfront_cut): closed if found among
 * this worker's handshakes or those waiting for a relay, its slot given
 * back as for a failed one; one handed over meanwhile is the loop's
 * already.  Linear in those, only when the loop evicts. */
static void take_cut (struct worker *w, void *tag)
{
    struct conn_list *lists[] = {&w->handshaking, &w->waiting};
    for (size_t i = 0; i < sizeof (lists) / sizeof (lists[0]); i++)
        for (struct tconn *c = lists[i]->head; c; c = c->next)
            if (c->tag == tag) {
                atomic_fetch_add (&w->tf->failed, 1);
                conn_close (c);
                return;
            }
}

/* The loop's requests, in the order it made them: a park or a release
 * names a connection it was handed, and a release comes after every
 * other message naming it (the loop sends none once told it is gone). */
static void take_msgs (struct worker *w, struct msg *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct tconn *c = msgs[i].p;
        switch (msgs[i].kind) {
        case MSG_CUT:
            take_cut (w, msgs[i].p);
            break;
        case MSG_PARK:
            if (!c->dead && c->on == &w->relaying)
                try_park (c);
            break;
        case MSG_RELEASE: /* freed after this batch: its events may follow */
            tlsrelay_list_del (c);
            c->dead_next = w->dead;
            w->dead = c;
            break;
        }
    }
    free (msgs);
}

/* New connections and messages from the loop: each connection starts
 * its handshake. */
static void take_inbox (struct worker *w)
{
    uint64_t n;
    ssize_t ignored = read (w->wake, &n, sizeof (n));
    (void)ignored;
    pthread_mutex_lock (&w->mu);
    struct tconn *c = w->inbox;
    w->inbox = w->inbox_tail = NULL;
    struct msg *msgs = w->msgs;
    size_t nmsgs = w->nmsgs;
    w->msgs = NULL;
    w->nmsgs = w->msgs_size = 0;
    pthread_mutex_unlock (&w->mu);
    while (c) {
        struct tconn *next = c->next;
        tlsrelay_list_add (&w->handshaking, c);
        if (session_new (w->tf, c) < 0) {
            atomic_fetch_add (&w->tf->failed, 1);
            conn_close (c);
        } else
            handshake_step (c);
        c = next;
    }
    take_msgs (w, msgs, nmsgs);
}

/* The earlier of 'next' (-1: none) and 'at' - 'now'. */
static int64_t sooner (int64_t next, int64_t at, int64_t now)
{
    int64_t d = at - now;
    return next < 0 || d < next ? d : next;
}

/* Handshakes past their time are cut (a peer that never sends its
 * ClientHello holds nothing for long), as are new connections that
 * waited as long for a relay, relays stalled as long, and parked
 * connections idle past [api] tcp_idle_timeout_s.  Returns the wait
 * until the next deadline, or -1; *cut: how many went. */
static int cut_late (struct worker *w, unsigned *cut)
{
    struct tlsfront *tf = w->tf;
    int64_t now = fmb_monotime_ms (), stall = tf->handshake_ms, next = -1;
    *cut = 0;
    struct conn_list *timed[] = {&w->handshaking, &w->waiting};
    for (size_t i = 0; i < sizeof (timed) / sizeof (timed[0]); i++) {
        while (timed[i]->head && timed[i]->head->deadline_ms <= now) {
            atomic_fetch_add (&tf->timed_out, 1);
            conn_close (timed[i]->head);
            ++*cut;
        }
        if (timed[i]->head)
            next = sooner (next, timed[i]->head->deadline_ms, now);
    }
    /* a peer (or the loop) that takes nothing for as long: the connection
     * goes, and with it what it holds (its slot at the loop, too) */
    while (w->stalled_head && w->stalled_head->stalled_since_ms + stall <= now)
        if (!tlsrelay_stalled_moved (w->stalled_head)) {
            conn_close (w->stalled_head);
            ++*cut;
        }
    if (w->stalled_head)
        next = sooner (next, w->stalled_head->stalled_since_ms + stall, now);
    while (tf->idle_ms && w->parked.head &&
           w->parked.head->parked_ms + tf->idle_ms <= now)
        conn_close (w->parked.head);
    if (tf->idle_ms && w->parked.head)
        next = sooner (next, w->parked.head->parked_ms + tf->idle_ms, now);
    return (int)(next > 60000 ? 60000 : next);
}

/* One event on a connection, by the phase it is in. */
static void conn_event (struct worker *w, struct tconn *c, uint64_t data, uint32_t ev)
{
    bool plain_side = data & 1;
    if (c->on == &w->relaying) {
        if (!plain_side || ((data >> 1) & 1) == (c->gen & 1))
            relay (c, plain_side, ev);
    } else if (plain_side)
        return; /* of a relay closed in this batch */
    else if (c->on == &w->handshaking)
        handshake_step (c);
    else if (c->on == &w->parked)
        unpark (c);
    else if (ev & (EPOLLHUP | EPOLLERR)) /* waiting for a relay: the peer went */
        conn_close (c);
}

static void *worker_main (void *arg)
{
    struct worker *w = arg;
    struct epoll_event ev[EVENTS_MAX];
    (void)setpriority (PRIO_PROCESS, (id_t)syscall (SYS_gettid), WORKER_NICE);
    while (!atomic_load (&w->tf->stopping)) {
        /* cuts free relays, the relays given out may stall: until
         * neither changes the other */
        unsigned cut;
        int timeout;
        do {
            serve_waiting (w);
            timeout = cut_late (w, &cut);
        } while (cut);
        int n = epoll_wait (w->ep, ev, EVENTS_MAX, timeout);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 0) {
                take_inbox (w);
                continue;
            }
            if (ev[i].data.u64 & 4) {
                closing_event (
                    (struct closing *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)7));
                continue;
            }
            struct tconn *c =
                (struct tconn *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)3);
            if (c->dead) /* closed by an earlier event of this batch */
                continue;
            conn_event (w, c, ev[i].data.u64, ev[i].events);
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
                     const struct tlsfront_limits *lim,
                     struct tlsfront **ret,
                     struct fmb_error *error)
{
    struct tlsfront *tf = calloc (1, sizeof (*tf));
    if (!tf)
        return fmb_errorf (error, "out of memory");
    tf->done_fd = -1;
    pthread_mutex_init (&tf->mu, NULL);
    tf->handshake_ms = lim->handshake_ms;
    tf->idle_ms = lim->idle_ms;
    tf->nworkers = lim->threads < 1 ? 1 : lim->threads > 64 ? 64 : lim->threads;
    if (load_creds (tf, files, error) < 0)
        goto fail;
    if ((tf->done_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        !(tf->w = calloc (tf->nworkers, sizeof (*tf->w)))) {
        fmb_errorf (error, "TLS threads: %s", strerror (errno ? errno : ENOMEM));
        goto fail;
    }
    /* each worker its share of the relays, half of it for new
     * connections (at least 2 and 1: a worker always makes progress) */
    unsigned share = lim->relays ? lim->relays / tf->nworkers : UINT_MAX;
    for (unsigned i = 0; i < tf->nworkers; i++) { /* none closes fd 0 on a failure */
        tf->w[i].ep = tf->w[i].wake = -1;
        tf->w[i].relays_max = share < 2 ? 2 : share;
        tf->w[i].fresh_max = tf->w[i].relays_max / 2;
    }
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
    struct conn_list *lists[] = {&w->handshaking,
                                 &w->waiting,
                                 &w->waiting_kept,
                                 &w->relaying,
                                 &w->parked,
                                 &w->gone};
    for (size_t i = 0; i < sizeof (lists) / sizeof (lists[0]); i++)
        while (lists[i]->head) {
            struct tconn *c = lists[i]->head;
            tlsrelay_list_del (c);
            conn_free (c);
        }
    for (struct tconn *c = w->inbox, *next; c; c = next) {
        next = c->next;
        conn_free (c);
    }
    free_dead (w);
    while (w->closing)
        closing_free (w->closing);
    free (w->msgs);
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

/* A message for worker 'worker'; it is woken only if none waited (it
 * takes them all at once). */
static int post (struct tlsfront *tf, int worker, enum msg_kind kind, void *p)
{
    if (worker < 0 || (unsigned)worker >= tf->nworkers) {
        errno = EINVAL;
        return -1;
    }
    struct worker *w = &tf->w[worker];
    pthread_mutex_lock (&w->mu);
    if (w->nmsgs == w->msgs_size) {
        size_t size = w->msgs_size ? 2 * w->msgs_size : 16;
        struct msg *more = realloc (w->msgs, size * sizeof (*more));
        if (!more) {
            pthread_mutex_unlock (&w->mu);
            errno = ENOMEM;
            return -1;
        }
        w->msgs = more;
        w->msgs_size = size;
    }
    w->msgs[w->nmsgs++] = (struct msg){kind, p};
    bool first = w->nmsgs == 1;
    pthread_mutex_unlock (&w->mu);
    if (first)
        wake_fd (w->wake);
    return 0;
}

int tlsfront_cut (struct tlsfront *tf, int worker, void *tag)
{
    return post (tf, worker, MSG_CUT, tag);
}

int tlsfront_park (struct tlsfront *tf, int worker, void *handle)
{
    return post (tf, worker, MSG_PARK, handle);
}

void tlsfront_release (struct tlsfront *tf, int worker, void *handle)
{
    /* (out of memory: the record, a few hundred bytes, stays until the
     * front is destroyed) */
    (void)post (tf, worker, MSG_RELEASE, handle);
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
    st->parks = atomic_load (&tf->parks);
    st->unparks = atomic_load (&tf->unparks);
    st->parked = (unsigned long long)atomic_load (&tf->n_parked);
    st->relayed = (unsigned long long)atomic_load (&tf->n_relays);
    st->waiting = (unsigned long long)atomic_load (&tf->n_waiting);
}

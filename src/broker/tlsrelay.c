/* tlsrelay.c: what a TLS front's connection moves (tlsconn.h): records
 * from the peer, decrypted, to the loop's end of its socketpair, and the
 * loop's bytes, encrypted, to the peer, each side read only while the
 * other has taken what was read before; and the lists a worker keeps
 * its connections on. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "monotime.h"
#include "tlsconn.h"

/* ---- lists ---------------------------------------------------------- */

void tlsrelay_list_add (struct conn_list *l, struct tconn *c)
{
    c->on = l;
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

void tlsrelay_list_del (struct tconn *c)
{
    struct conn_list *l = c->on;
    if (!l)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
    c->on = NULL;
}

void tlsrelay_list_move (struct conn_list *to, struct tconn *c)
{
    tlsrelay_list_del (c);
    tlsrelay_list_add (to, c);
}

/* The stalled list: connections one of whose sides has not taken what
 * the other sent.  In the order they began waiting: the head is the
 * first to be cut. */
void tlsrelay_stalled_del (struct worker *w, struct tconn *c)
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

/* The side a stalled connection's bytes wait for: the peer while an
 * answer waits for it (the loop then waits too: it is not read meanwhile,
 * so the peer's reading is what moves both), else the loop.  Bytes that
 * went the other way (a peer that reads nothing trickling its own bytes
 * in) start no time again. */
static bool waits_for_peer (const struct tconn *c)
{
    return c->to_tls != NULL;
}

/* What the waited-for side's socket holds in the kernel, not yet taken:
 * bytes the front wrote before.  For TCP, those not yet acknowledged (a
 * peer's kernel that acknowledges while its program reads nothing fills
 * its window soon); a slow reader drains a 4 MB send buffer long before
 * the front's own writes go again.  A loop's end closed: nothing moves. */
static long kernel_queued (const struct tconn *c)
{
    int q = 0;
    if (waits_for_peer (c))
        (void)ioctl (c->tls_fd, SIOCOUTQ, &q);
    else if (!c->plain_hup)
        (void)ioctl (c->plain_fd, SIOCOUTQ, &q);
    return q;
}

static void stalled_add (struct tconn *c)
{
    struct worker *w = c->w;
    c->stalled_since_ms = fmb_monotime_ms ();
    c->stalled_on_peer = waits_for_peer (c);
    c->stalled_queued = kernel_queued (c);
    c->snext = NULL;
    c->sprev = w->stalled_tail;
    if (w->stalled_tail)
        w->stalled_tail->snext = c;
    else
        w->stalled_head = c;
    w->stalled_tail = c;
    c->stalled_listed = true;
}

/* On the list while bytes wait, with the time the side they wait for
 * last took some (or began to be waited for); off it once none wait.  A
 * side that takes some, even while more waits (a big answer to a peer
 * reading slowly, a backlog of pipelined requests being answered),
 * starts the time again at the list's tail. */
static void stalled_update (struct tconn *c)
{
    bool waiting = c->to_plain || c->to_tls, peer = waits_for_peer (c);
    bool moved = peer ? c->moved_tls : c->moved_plain;
    c->moved_tls = c->moved_plain = false;
    if (!waiting || moved || (c->stalled_listed && c->stalled_on_peer != peer))
        tlsrelay_stalled_del (c->w, c);
    if (waiting && !c->stalled_listed)
        stalled_add (c);
}

bool tlsrelay_stalled_moved (struct tconn *c)
{
    if (kernel_queued (c) >= c->stalled_queued)
        return false;
    tlsrelay_stalled_del (c->w, c);
    stalled_add (c);
    return true;
}

int tlsrelay_watch (
    struct tconn *c, int fd, uint32_t *have, uint32_t want, uintptr_t tag)
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
int tlsrelay_relay_events (struct tconn *c)
{
    uint32_t tls = (c->to_plain ? 0 : EPOLLIN) | (c->to_tls ? EPOLLOUT : 0);
    uint32_t plain = (c->to_tls ? 0 : EPOLLIN) | (c->to_plain ? EPOLLOUT : 0);
    stalled_update (c);
    if (tlsrelay_watch (c, c->tls_fd, &c->ev_tls, tls, 0) < 0 ||
        (!c->plain_hup &&
         tlsrelay_watch (c, c->plain_fd, &c->ev_plain, plain, 1 | (c->gen & 1) << 1) <
             0))
        return -1;
    return 0;
}

/* Keep buf[off..len) for later; -1 out of memory. */
int tlsrelay_keep (char **dst, size_t *dlen, size_t *doff, const char *buf, size_t len)
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
        c->moved_plain = true;
        c->to_plain_off += (size_t)n;
        if (c->to_plain_off == c->to_plain_len) {
            free (c->to_plain);
            c->to_plain = NULL;
        }
    }
    return 1;
}

/* Records from the peer, decrypted, to the loop's end. */
int tlsrelay_tls_to_plain (struct tconn *c)
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
        c->req_open = true;
        ssize_t w = send (c->plain_fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w < 0)
            w = 0;
        c->moved_plain |= w > 0;
        if (w < n) {
            if (tlsrelay_keep (&c->to_plain,
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
        c->moved_tls = true;
        c->to_tls_off += (size_t)n;
        if (c->to_tls_off >= c->to_tls_len) {
            free (c->to_tls);
            c->to_tls = NULL;
        }
    }
    return 1;
}

/* Bytes from the loop's end, encrypted, to the peer. */
int tlsrelay_plain_to_tls (struct tconn *c)
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
        c->req_open = false; /* its answer: a request since is a new one */
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t s = gnutls_record_send (c->s, buf + off, (size_t)n - off);
            if (s == GNUTLS_E_AGAIN || s == GNUTLS_E_INTERRUPTED) {
                if (tlsrelay_keep (&c->to_tls,
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
            c->moved_tls = true;
            off += (size_t)s;
        }
    }
}

/* The loop closed its end while the peer had not taken what it wrote:
 * epoll would report the hang-up at every wait (a side left unwatched
 * still reports it), so the loop's end leaves the set; what it wrote is
 * still read and sent, and end of file then closes the connection. */
void tlsrelay_plain_hung_up (struct tconn *c)
{
    c->plain_hup = true;
    (void)epoll_ctl (c->w->ep, EPOLL_CTL_DEL, c->plain_fd, NULL);
    c->ev_plain = UINT32_MAX;
}

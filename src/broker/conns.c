/* conns.c: the listening sockets and the connections on them (conns.h):
 * accepting with caps (per uid on the socket, per address on TCP),
 * handing each to libmicrohttpd, and the deadline of the request being
 * read. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "monotime.h"
#include "conns.h"
#include "fileutil.h"
#include "httpconn.h"
#include "log.h"
#include "metrics.h"
#include "netaddr.h"
#include "peers.h"
#include "roles.h"
#include "tlsfront.h"

#define ACCEPTS_PER_PASS 64 /* a flood of connects cannot hold the loop */
/* TCP: accepting costs the loop little (the TLS front does the
 * handshake), so a storm's queue is emptied in one go, up to this long
 * a pass; what is left waits one pass, not a SYN retry. */
#define TCP_ACCEPT_BUDGET_MS 5
#define TLS_TAKE_PER_PASS    512 /* handshaken connections handed to MHD */
/* An authenticated TCP connection kept idle (a node service's) is
 * probed: a node that died is noticed in about 4 minutes. */
#define KEEPALIVE_IDLE_S  120
#define KEEPALIVE_INTVL_S 30
#define KEEPALIVE_CNT     4
/* Descriptors: a TCP connection holds its socket, and while it has a
 * request (or, new, until its first is done) the socketpair between the
 * TLS front and libmicrohttpd: 2 more.  An idle kept one is parked
 * (tlsfront.h): 1.  The socketpairs at once are bounded (TCP_RELAYS_MAX,
 * or a quarter of what the file limit leaves for TCP): a full machine's
 * nodes all asking at once wait a few milliseconds for one rather than
 * the file limit deciding how many nodes the broker keeps. */
#define FDS_PER_RELAY 2
/* 10,000 nodes answered in ~1 s at ~0.1 ms each hold a few hundred
 * relays at once; 4,096 is far from limiting them, and costs 8,192
 * descriptors and at most 4,096 x 32 KiB of HTTP buffers. */
#define TCP_RELAYS_MAX 4096
/* Descriptors the broker holds besides API connections: the database and
 * its journal, the FM client's connections (counted apart), listeners,
 * epoll and signal fds, logs, key files read at reload. */
#define FDS_OWN         64
#define ACCEPT_PAUSE_MS 1000  /* after EMFILE/ENFILE: the loop does not spin */
#define ACCEPT_LOG_MS   60000 /* a repeated accept error: one line a minute */

/* Connections with a deadline, in the order it comes: each queue's
 * deadlines are one fixed time after their arming, so its head is the
 * earliest, and the loop's look at them is O(1) a pass however many
 * connections the nodes keep open. */
struct conn_queue {
    struct http_conn *head, *tail;
};

/* A TCP connection from its accept to its close, while it has shown no
 * credential on the 'unauth' list, oldest first: in the TLS front
 * ('worker' >= 0, no 'hc' yet) or at libmicrohttpd ('hc').  When the
 * guard is full a new connection takes the place of the list's head
 * (issue 51); an authenticated one leaves the list and is never
 * evicted. */
struct tcp_slot {
    struct tcp_slot *prev, *next;
    struct tcp_slot *all_prev, *all_next; /* every slot, to free at the end */
    bool listed;                          /* on 'unauth' */
    bool evicted; /* cut to make room; its slot comes back when closed */
    int worker;   /* the TLS front's worker that has its handshake */
    /* The TCP connection outlives its HTTP connections: one per request
     * burst, a parked connection has none (tlsfront.h).  What must
     * survive a park lives here: the slot is given back when the front
     * says the connection ended and its HTTP connection has closed. */
    struct http_conn *hc;        /* its HTTP connection now, or NULL */
    void *fconn;                 /* the front's handle, once handed over */
    bool front_gone;             /* the front said it ended */
    bool authed;                 /* a request on it showed a valid credential */
    struct tls_peer tls;         /* what its handshake learned of the peer */
    char key[TCPGUARD_ADDR_MAX]; /* the guard's: an IPv6 address's /64 */
};

struct conns {
    struct MHD_Daemon *unix_d;
    struct MHD_Daemon *tcp_d[64]; /* the TCP port's shards (http.c) */
    unsigned ntcp_d, next_tcp_d;
    char sock_path[FMB_UNIX_PATH_MAX];
    int unix_fd;         /* accepted here, so SO_PEERCRED decides first */
    struct peers *peers; /* the Unix socket's connections per uid */
    struct peer_limits limits;
    struct roles *roles;     /* privileged peers have their own share */
    struct metrics *metrics; /* TCP connections refused */
    unsigned request_timeout_ms;
    unsigned backlog;
    struct conn_queue requests; /* request_timeout_ms: a request being read */
    struct conn_queue idle;     /* tcp_idle_timeout_s: kept, between requests */
    struct {                    /* the accepted socket being handed to MHD */
        bool valid;
        int fd;
        uid_t uid;
        bool privileged;
        bool tcp;
        char addr[TCPGUARD_ADDR_MAX];
        struct tcp_slot *slot;
    } pending;
    int64_t refused_logged_ms;
    int tcp_fd;             /* accepted here too: counted per address first */
    struct tcpguard *guard; /* the TCP connections per address, failures */
    struct tlsfront *front; /* the TCP connections' TLS, on its threads */
    struct {                /* unauthenticated TCP connections, oldest first */
        struct tcp_slot *head, *tail;
        unsigned evicting; /* cut, slot not yet given back */
    } unauth;
    struct tcp_slot *slots; /* every TCP connection's */
    unsigned idle_ms;       /* an authenticated TCP connection's idle time; 0: kept */
    unsigned relays;        /* the front's socketpairs at most (fit_file_limit) */
    int64_t accept_paused_until_ms;
    struct { /* a repeated accept error, logged once a minute with a count */
        int err;
        unsigned count;
        int64_t logged_ms;
    } accept_err;
};

struct conns *conns_create (const struct fmb_config *cfg,
                            struct roles *roles,
                            struct metrics *metrics)
{
    struct conns *h = calloc (1, sizeof (*h));
    if (!h)
        return NULL;
    h->unix_fd = -1;
    h->tcp_fd = -1;
    h->roles = roles;
    h->metrics = metrics;
    h->limits.max_total = cfg->api_max_connections;
    h->limits.per_user = cfg->api_max_connections_per_user;
    h->limits.reserved = cfg->api_reserved_connections;
    h->request_timeout_ms = cfg->api_request_timeout_ms;
    h->backlog = cfg->api_listen_backlog;
    h->idle_ms = cfg->tcp_idle_timeout_s * 1000u;
    if (!(h->peers = peers_create (&h->limits))) {
        free (h);
        return NULL;
    }
    return h;
}

void conns_destroy (struct conns *h)
{
    if (h) {
        if (h->unix_fd >= 0)
            close (h->unix_fd);
        if (h->tcp_fd >= 0)
            close (h->tcp_fd);
        peers_destroy (h->peers);
        tlsfront_destroy (h->front); /* before the guard its slots count in */
        while (h->slots) {           /* those the front or MHD still had */
            struct tcp_slot *s = h->slots;
            h->slots = s->all_next;
            if (s->hc)
                s->hc->slot = NULL;
            free (s);
        }
        tcpguard_destroy (h->guard);
        if (h->sock_path[0])
            unlink (h->sock_path);
        free (h);
    }
}

unsigned conns_max_unix (const struct conns *h)
{
    return h->limits.max_total;
}

struct tcpguard *conns_guard (const struct conns *h)
{
    return h->guard;
}

void conns_add_daemon (struct conns *h, bool tcp, struct MHD_Daemon *d)
{
    if (!tcp)
        h->unix_d = d;
    else if (h->ntcp_d < sizeof (h->tcp_d) / sizeof (h->tcp_d[0]))
        h->tcp_d[h->ntcp_d++] = d;
}

/* ---- connections: fair share and request deadlines ------------------ */

static void queue_del (struct http_conn *c)
{
    struct conn_queue *q = c->q;
    if (!q)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        q->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        q->tail = c->prev;
    c->prev = c->next = NULL;
    c->q = NULL;
}

/* On 'q' with its deadline 'ms' from now (the queue's own delay). */
static void queue_add (struct conn_queue *q, struct http_conn *c, unsigned ms)
{
    queue_del (c);
    c->deadline_ms = fmb_monotime_ms () + ms;
    c->prev = q->tail;
    c->next = NULL;
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    c->q = q;
}

static void unauth_del (struct conns *h, struct tcp_slot *s)
{
    if (!s->listed)
        return;
    if (s->prev)
        s->prev->next = s->next;
    else
        h->unauth.head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        h->unauth.tail = s->prev;
    s->prev = s->next = NULL;
    s->listed = false;
}

static struct tcp_slot *slot_new (struct conns *h, const char *key)
{
    struct tcp_slot *s = calloc (1, sizeof (*s));
    if (!s)
        return NULL;
    snprintf (s->key, sizeof (s->key), "%s", key);
    s->worker = -1;
    s->all_next = h->slots;
    if (h->slots)
        h->slots->all_prev = s;
    h->slots = s;
    s->prev = h->unauth.tail;
    if (h->unauth.tail)
        h->unauth.tail->next = s;
    else
        h->unauth.head = s;
    h->unauth.tail = s;
    s->listed = true;
    return s;
}

/* The connection is gone: its place in the guard given back, the
 * front's record of it released. */
static void slot_free (struct conns *h, struct tcp_slot *s)
{
    unauth_del (h, s);
    if (s->evicted && h->unauth.evicting)
        h->unauth.evicting--;
    tcpguard_release (h->guard, s->key, s->authed);
    if (s->fconn)
        tlsfront_release (h->front, s->worker, s->fconn);
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        h->slots = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    free (s);
}

/* Make room for a connection from key 'key' (counted already): the
 * oldest connection that has shown no credential and whose address
 * holds more such connections than 'key' now does is cut (a handshake
 * by the TLS front, a connection at libmicrohttpd by shutting its end
 * down).  So a node's new connection (its address's one) takes the place
 * of a flood's, a flood's never takes a node's, and addresses holding
 * as many as each other do not cut each other in turn (which a
 * reconnecting flood would make a race the nodes lose).  False when
 * there is none among the TCPGUARD_EVICT_SCAN oldest, or too many cuts
 * are still on their way. */
static bool evict_for (struct conns *h, const char *key)
{
    if (h->unauth.evicting >= TCPGUARD_EVICTING_MAX)
        return false;
    unsigned mine = tcpguard_unauth_of (h->guard, key), looked = 0;
    struct tcp_slot *s = h->unauth.head;
    for (; s && looked < TCPGUARD_EVICT_SCAN; s = s->next, looked++)
        if (tcpguard_unauth_of (h->guard, s->key) > mine)
            break;
    if (!s || looked == TCPGUARD_EVICT_SCAN)
        return false;
    unauth_del (h, s);
    s->evicted = true;
    h->unauth.evicting++;
    metrics_add (h->metrics, METRIC_TCP_EVICTED, 1);
    if (s->hc) {
        if (!s->hc->cut) {
            s->hc->cut = true;
            shutdown (s->hc->fd, SHUT_RDWR);
        }
    } else if (tlsfront_cut (h->front, s->worker, s) < 0) {
        s->evicted = false; /* (out of memory) it ends at its deadline */
        h->unauth.evicting--;
    }
    return true;
}

void conns_authenticated (struct http_conn *c)
{
    if (!c->tcp || c->authed)
        return;
    c->authed = true;
    if (c->slot) {
        c->slot->authed = true;
        unauth_del (c->cs, c->slot);
        tcpguard_authenticated (c->cs->guard, c->slot->key);
    }
}

void conns_arm (struct http_conn *c)
{
    queue_add (&c->cs->requests, c, c->cs->request_timeout_ms);
}

/* Between requests: an authenticated TCP connection (a node service's,
 * kept so that a job's launch costs it no handshake) stays as long as
 * [api] tcp_idle_timeout_s (0: while its peer lives; keepalive finds a
 * dead one); any other gets the request timeout to send its next one. */
void conns_arm_idle (struct http_conn *c)
{
    if (!(c->tcp && c->authed))
        conns_arm (c);
    else if (c->cs->idle_ms)
        queue_add (&c->cs->idle, c, c->cs->idle_ms);
    else {
        queue_del (c);
        c->deadline_ms = 0;
    }
}

/* A request on an authenticated TCP connection is done and answered:
 * the front parks the connection once the answer went (tlsfront_park),
 * unless its next request has begun.  A parked node costs the broker its
 * TLS socket and session, not a socketpair and an HTTP connection. */
void conns_park (struct http_conn *c)
{
    struct tcp_slot *s = c->slot;
    if (!c->tcp || !c->authed || c->cut || !s || s->hc != c || !s->fconn ||
        s->front_gone)
        return;
    (void)tlsfront_park (c->cs->front, s->worker, s->fconn); /* else kept as is */
}

/* The request is read: what remains is the broker's work, not the peer's. */
void conns_disarm (struct MHD_Connection *mc)
{
    struct http_conn *c = conn_of (mc);
    if (c) {
        queue_del (c);
        c->deadline_ms = 0;
    }
}

void conns_started (struct conns *h, bool tcp, struct MHD_Connection *mc, void **ctx)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct http_conn *c = calloc (1, sizeof (*c));
    if (!c || !ci) { /* untracked: the accept path gives its slot back */
        free (c);
        return;
    }
    c->cs = h;
    c->fd = ci->connect_fd;
    if (h->pending.valid && h->pending.fd == c->fd && h->pending.tcp == tcp) {
        c->counted = true; /* the slot taken at accept is now this one's */
        c->uid = h->pending.uid;
        c->privileged = h->pending.privileged;
        c->tcp = h->pending.tcp;
        snprintf (c->addr, sizeof (c->addr), "%s", h->pending.addr);
        c->slot = c->tcp ? h->pending.slot : NULL;
        h->pending.slot = NULL;
        if (c->slot) {
            /* a parked connection's next request: who it is stays */
            if (c->slot->hc) /* the HTTP connection it left is closing */
                c->slot->hc->slot = NULL;
            c->slot->hc = c;
            c->authed = c->slot->authed;
            c->tls = c->slot->tls;
        }
        if (c->slot && c->slot->evicted) {
            /* cut while the front finished its handshake: cut here */
            c->cut = true;
            shutdown (c->fd, SHUT_RDWR);
        }
        h->pending.valid = false;
    }
    conns_arm (c);
    *ctx = c;
}

void conns_closed (struct conns *h, void **ctx)
{
    struct http_conn *c = *ctx;
    if (!c)
        return;
    queue_del (c);
    if (c->counted && c->tcp) {
        /* parked, or its end at the front closing: the slot goes once
         * the front says the connection ended too */
        if (c->slot && c->slot->hc == c)
            c->slot->hc = NULL;
        if (c->slot && c->slot->front_gone)
            slot_free (h, c->slot);
    } else if (c->counted)
        peers_release (h->peers, c->uid, c->privileged);
    free (c);
    *ctx = NULL;
}

/* Cut connections whose request is late: shutting the socket down makes
 * libmicrohttpd read end-of-file, close it, and free its slot. */
void conns_cut_late (struct conns *h)
{
    int64_t now = fmb_monotime_ms ();
    struct conn_queue *qs[] = {&h->requests, &h->idle};
    for (size_t i = 0; i < sizeof (qs) / sizeof (qs[0]); i++)
        while (qs[i]->head && qs[i]->head->deadline_ms <= now) {
            struct http_conn *c = qs[i]->head;
            queue_del (c);
            c->deadline_ms = 0;
            if (!c->cut) {
                c->cut = true;
                shutdown (c->fd, SHUT_RDWR);
            }
        }
}

int conns_next_deadline_ms (const struct conns *h)
{
    int64_t best = -1, now = fmb_monotime_ms ();
    const struct http_conn *heads[] = {h->requests.head, h->idle.head};
    for (size_t i = 0; i < sizeof (heads) / sizeof (heads[0]); i++)
        if (heads[i] && (best < 0 || heads[i]->deadline_ms < best))
            best = heads[i]->deadline_ms;
    if (best < 0)
        return -1;
    return best <= now ? 0 : (int)(best - now > 60000 ? 60000 : best - now);
}

/* Over its limit: a short problem document, then close.  Never blocks. */
static void refuse (struct conns *h, int fd, uid_t uid, const char *why)
{
    char body[256], msg[512];
    int blen = snprintf (body,
                         sizeof (body),
                         "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\","
                         "\"status\":503,\"detail\":\"too many connections from uid "
                         "%u ([api] %s)\"}",
                         (unsigned)uid,
                         why);
    int mlen = snprintf (msg,
                         sizeof (msg),
                         "HTTP/1.1 503 Service Unavailable\r\n"
                         "Content-Type: application/problem+json\r\n"
                         "Retry-After: 1\r\nConnection: close\r\n"
                         "Content-Length: %d\r\n\r\n%s",
                         blen,
                         body);
    ssize_t ignored = send (fd, msg, (size_t)mlen, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    close (fd);
    int64_t now = fmb_monotime_ms ();
    if (now - h->refused_logged_ms >= 10000) { /* a flood is one line per 10 s */
        h->refused_logged_ms = now;
        fmb_log (LOG_WARNING,
                 "api: refusing connections from uid %u: [api] %s reached",
                 (unsigned)uid,
                 why);
    }
}

/* An accept that failed for another reason than "nothing there": out of
 * descriptors (EMFILE, ENFILE) or memory pauses accepting for
 * ACCEPT_PAUSE_MS (the listening sockets leave the poll set, so the loop
 * sleeps rather than spins on a queue it cannot take from); the error is
 * logged once, then once a minute with how often it happened. */
static void accept_failed (struct conns *h, const char *which, int err)
{
    int64_t now = fmb_monotime_ms ();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
        h->accept_paused_until_ms = now + ACCEPT_PAUSE_MS;
    h->accept_err.count++;
    if (h->accept_err.err != err || now - h->accept_err.logged_ms >= ACCEPT_LOG_MS) {
        fmb_log (LOG_WARNING,
                 "api: accept on the %s: %s (%u time%s since the last such line)%s",
                 which,
                 strerror (err),
                 h->accept_err.count,
                 h->accept_err.count == 1 ? "" : "s",
                 h->accept_paused_until_ms > now ? "; accepting paused for 1 s" : "");
        h->accept_err.err = err;
        h->accept_err.count = 0;
        h->accept_err.logged_ms = now;
    }
}

static bool accept_gone (int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED;
}

/* Hand an accepted socket, counted already, to the listener's MHD. */
static void hand_over (
    struct conns *h, bool tcp, int fd, const struct sockaddr *sa, socklen_t salen)
{
    h->pending.valid = true;
    h->pending.fd = fd;
    h->pending.tcp = tcp;
    struct MHD_Daemon *d = h->unix_d;
    if (tcp) /* round-robin over the shards */
        d = h->tcp_d[h->next_tcp_d++ % h->ntcp_d];
    MHD_add_connection (d, fd, sa, salen);
}

/* Accept on the Unix socket ourselves: the peer's uid is known before the
 * connection takes a slot, so one user's flood only fills that user's. */
static void accept_unix (struct conns *h)
{
    for (int i = 0; i < ACCEPTS_PER_PASS && h->unix_fd >= 0; i++) {
        struct sockaddr_un sa;
        socklen_t salen = sizeof (sa);
        int fd = accept4 (
            h->unix_fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (!accept_gone (errno))
                accept_failed (h, "socket", errno);
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof (cred);
        if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            close (fd);
            continue;
        }
        bool privileged =
            roles_of (h->roles, cred.uid, cred.gid) & (ROLE_RM | ROLE_ADMIN);
        const char *why = NULL;
        if (!peers_admit (h->peers, cred.uid, privileged, &why)) {
            refuse (h, fd, cred.uid, why);
            continue;
        }
        h->pending.uid = cred.uid;
        h->pending.privileged = privileged;
        hand_over (h, false, fd, (struct sockaddr *)&sa, salen);
        if (h->pending.valid) { /* not taken over by a tracked connection */
            h->pending.valid = false;
            peers_release (h->peers, cred.uid, privileged);
        }
    }
}

/* Accept on the TCP port ourselves too: counted per address, in all, and
 * while unauthenticated (tcpguard.h) before TLS costs anything; over a
 * limit the connection is closed at once (a TLS client cannot read a
 * plain 503). */
static void keepalive (int fd)
{
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S,
        cnt = KEEPALIVE_CNT;
    (void)setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof (one));
    (void)setsockopt (fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof (idle));
    (void)setsockopt (fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof (intvl));
    (void)setsockopt (fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof (cnt));
}

static void accept_tcp (struct conns *h)
{
    int64_t until = fmb_monotime_ms () + TCP_ACCEPT_BUDGET_MS;
    for (int i = 0; h->tcp_fd >= 0; i++) {
        if (i % ACCEPTS_PER_PASS == ACCEPTS_PER_PASS - 1 && fmb_monotime_ms () >= until)
            return; /* the rest next pass: the socket stays readable */
        struct sockaddr_storage sa;
        socklen_t salen = sizeof (sa);
        int fd = accept4 (
            h->tcp_fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (!accept_gone (errno))
                accept_failed (h, "TCP port", errno);
            return;
        }
        /* The TLS handshake's flights and the answers are small writes
         * in a row: with Nagle's algorithm each later one waits for the
         * client's delayed ACK, 40 ms per job launch's RUN. */
        int one = 1;
        (void)setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
        char addr[TCPGUARD_ADDR_MAX], key[TCPGUARD_ADDR_MAX];
        fmb_format_addr ((struct sockaddr *)&sa, addr, sizeof (addr));
        fmb_addr_guess_key (addr, key, sizeof (key));
        const char *why = NULL;
        enum tcpguard_admission adm = tcpguard_admit (h->guard, key, &why);
        struct tcp_slot *slot = NULL;
        if (adm != TCPGUARD_REFUSED && !(slot = slot_new (h, key))) {
            tcpguard_release (h->guard, key, false);
            adm = TCPGUARD_REFUSED;
            why = "tcp_max_connections (out of memory)";
        }
        /* full: this one takes the place of an older one that showed
         * no credential (evict_for), or, with none to take, is refused */
        if (adm == TCPGUARD_EVICT && !evict_for (h, key)) {
            slot_free (h, slot);
            adm = TCPGUARD_REFUSED;
        }
        if (adm == TCPGUARD_REFUSED) {
            close (fd);
            metrics_add (h->metrics, METRIC_TCP_REFUSED, 1);
            int64_t now = fmb_monotime_ms ();
            if (now - h->refused_logged_ms >= 10000) {
                h->refused_logged_ms = now;
                fmb_log (LOG_WARNING,
                         "api: refusing TCP connections from %s: [api] %s reached",
                         addr,
                         why);
            }
            continue;
        }
        keepalive (fd);
        slot->worker =
            tlsfront_add (h->front, fd, (struct sockaddr *)&sa, salen, addr, slot);
        if (slot->worker < 0) {
            close (fd);
            slot_free (h, slot);
        }
    }
}

/* A connection the front has ended: its slot goes now, or when its
 * HTTP connection closes (it reads end of file). */
static void front_gone (struct conns *h, struct tcp_slot *slot, void *handle)
{
    slot->fconn = handle;
    slot->front_gone = true;
    if (!slot->hc)
        slot_free (h, slot);
}

/* What the TLS front has for the loop (tlsfront.h): connections to hand
 * to libmicrohttpd, with what the handshake learned (a parked one's next
 * request keeps what its slot holds), and connections that ended. */
static void take_tls (struct conns *h)
{
    struct tlsfront_conn done[64];
    for (int taken = 0; taken < TLS_TAKE_PER_PASS;) {
        int n = tlsfront_take (h->front, done, 64);
        for (int i = 0; i < n; i++) {
            struct tlsfront_conn *c = &done[i];
            struct tcp_slot *slot = c->tag;
            if (c->fd < 0 && !c->handle) { /* a handshake that failed */
                slot_free (h, slot);
                continue;
            }
            if (c->fd < 0) {
                front_gone (h, slot, c->handle);
                continue;
            }
            if (!c->kept)
                slot->tls = c->peer;
            slot->fconn = c->handle;
            snprintf (h->pending.addr, sizeof (h->pending.addr), "%s", c->addr);
            h->pending.slot = slot;
            hand_over (h, true, c->fd, (struct sockaddr *)&c->sa, c->salen);
            /* not taken (libmicrohttpd closed it): the front reads end of
             * file, ends the connection and says so */
            h->pending.valid = false;
            h->pending.slot = NULL;
        }
        if (n < 64)
            break;
        taken += n;
    }
}

static bool accepting (const struct conns *h)
{
    return h->accept_paused_until_ms <= fmb_monotime_ms ();
}

int64_t conns_accept_paused_ms (const struct conns *h)
{
    return accepting (h) ? -1 : h->accept_paused_until_ms - fmb_monotime_ms ();
}

int conns_pollfds (struct conns *h, struct pollfd *fds, int max)
{
    int n = 0;
    if (h->front && n < max) { /* handshakes done, even while not accepting */
        fds[n].fd = tlsfront_pollfd (h->front);
        fds[n].events = POLLIN;
        fds[n].revents = 0;
        n++;
    }
    int listeners[2] = {h->unix_fd, h->tcp_fd};
    for (int i = 0; i < 2 && n < max; i++)
        if (listeners[i] >= 0 && accepting (h)) {
            fds[n].fd = listeners[i];
            fds[n].events = POLLIN;
            fds[n].revents = 0;
            n++;
        }
    return n;
}

void conns_accept (struct conns *h, const struct pollfd *fds, int n)
{
    for (int i = 0; fds && i < n; i++) {
        if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP)))
            continue;
        if (h->front && fds[i].fd == tlsfront_pollfd (h->front))
            take_tls (h);
        else if (fds[i].fd == h->unix_fd && h->unix_fd >= 0 && accepting (h))
            accept_unix (h);
        else if (fds[i].fd == h->tcp_fd && h->tcp_fd >= 0 && accepting (h))
            accept_tcp (h);
    }
}

void conns_quiesce (struct conns *h)
{
    if (h->unix_fd >= 0)
        close (h->unix_fd);
    h->unix_fd = -1;
    if (h->tcp_fd >= 0)
        close (h->tcp_fd);
    h->tcp_fd = -1;
    if (h->sock_path[0])
        unlink (h->sock_path);
    h->sock_path[0] = '\0';
}

/* ---- listening sockets ---------------------------------------------- */

/* The socket's directory, made if missing. */
static int socket_dir (const char *path, struct fmb_error *error)
{
    char dir[FMB_UNIX_PATH_MAX];
    snprintf (dir, sizeof (dir), "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        struct stat before;
        *slash = '\0';
        bool made = stat (dir, &before) < 0;
        if (fmb_mkdir_p (dir, 0755, error) < 0)
            return fmb_error_prefix (error, "[api] socket");
        /* Made under the daemon's umask 077: every local user must reach
         * the socket (it is 0666; roles decide).  A directory the admin
         * made keeps its mode (0750 and a group may be the point). */
        if (made && chmod (dir, 0755) < 0)
            return fmb_errorf (
                error, "[api] socket: chmod 0755 %s: %s", dir, strerror (errno));
    }
    return 0;
}

int conns_listen_unix (struct conns *h, const char *path, struct fmb_error *error)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "[api] socket: path too long");
    }
    if (socket_dir (path, error) < 0)
        return -1;
    strcpy (sa.sun_path, path);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fmb_errorf (error, "socket: %s", strerror (errno));
    /* A socket file left by a previous run: if nobody answers on it, it
     * is stale and may go; if someone does, another broker is running. */
    struct stat sb;
    if (lstat (path, &sb) == 0) {
        if (!S_ISSOCK (sb.st_mode)) {
            close (fd);
            errno = EEXIST;
            return fmb_errorf (
                error, "[api] socket %s: exists and is not a socket", path);
        }
        int probe = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect (probe, (struct sockaddr *)&sa, sizeof (sa)) == 0) {
            close (probe);
            close (fd);
            errno = EADDRINUSE;
            return fmb_errorf (
                error, "[api] socket %s: another broker is listening", path);
        }
        if (probe >= 0)
            close (probe);
        unlink (path);
    }
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (fd, (int)h->backlog) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] socket %s: %s", path, strerror (errno));
    }
    /* Everyone may connect; SO_PEERCRED decides what they may do. */
    if (chmod (path, 0666) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] socket %s: chmod: %s", path, strerror (errno));
    }
    snprintf (h->sock_path, sizeof (h->sock_path), "%s", path);
    h->unix_fd = fd;
    return 0;
}

/* The TCP listener's bounds fit the file limit: its soft limit raised to
 * the hard one, what the socket's connections, the FM client and the
 * broker's own files need set apart, then the relays' (TCP_RELAYS_MAX,
 * at most a quarter of the rest), the rest for TCP connections, one
 * descriptor each.  A configured tcp_max_connections above that is
 * lowered, saying so. */
static void fit_file_limit (const struct fmb_config *cfg,
                            struct tcpguard_limits *lim,
                            unsigned *relays)
{
    struct rlimit rl;
    rlim_t have = 1024;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65536 : rl.rlim_max;
            struct rlimit raised = {want, rl.rlim_max};
            if (setrlimit (RLIMIT_NOFILE, &raised) == 0)
                rl.rlim_cur = want;
        }
        have = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    }
    rlim_t own = (rlim_t)cfg->api_max_connections + cfg->fm_max_connections + FDS_OWN;
    /* too little left: 16 connections, each may have its relay */
    rlim_t tcp = have > own + 64 ? have - own : 16 * (1 + FDS_PER_RELAY);
    rlim_t pairs = have > own + 64 ? tcp / 4 / FDS_PER_RELAY : 16;
    *relays = (unsigned)(pairs > TCP_RELAYS_MAX ? TCP_RELAYS_MAX : pairs);
    rlim_t left = tcp - (rlim_t)*relays * FDS_PER_RELAY;
    if (have < own + 16)
        fmb_log (LOG_WARNING,
                 "api: the file limit (%lu) leaves too little beside [api] "
                 "max_connections (%u); raise LimitNOFILE= or lower it",
                 (unsigned long)have,
                 cfg->api_max_connections);
    lim->max_total = cfg->tcp_max_connections ? cfg->tcp_max_connections
                                              : (unsigned)(left > 65536 ? 65536 : left);
    if (lim->max_total > left) {
        fmb_log (LOG_WARNING,
                 "api: [api] tcp_max_connections %u lowered to %lu: the file limit "
                 "is %lu, the socket's max_connections take %u, the TLS relays %u "
                 "and each TCP connection 1 (raise LimitNOFILE=)",
                 lim->max_total,
                 (unsigned long)left,
                 (unsigned long)have,
                 cfg->api_max_connections,
                 *relays * FDS_PER_RELAY);
        lim->max_total = (unsigned)left;
    }
    lim->max_unauth = cfg->tcp_max_unauthenticated ? cfg->tcp_max_unauthenticated
                                                   : (lim->max_total + 1) / 2;
    if (lim->max_unauth > lim->max_total)
        lim->max_unauth = lim->max_total;
    lim->per_addr = cfg->api_max_connections_per_user;
    lim->per_addr_unauth = cfg->tcp_max_unauthenticated_per_address;
    fmb_log (LOG_INFO,
             "api: file limit %lu: TCP takes at most %u connections (%u "
             "unauthenticated, %u per address, %u of them unauthenticated), "
             "%u of them with a request at once",
             (unsigned long)have,
             lim->max_total,
             lim->max_unauth,
             lim->per_addr,
             lim->per_addr_unauth,
             *relays);
}

/* The kernel's cap on any listen backlog (net.core.somaxconn); 0 if
 * it cannot be read. */
static unsigned somaxconn (void)
{
    char *text = NULL;
    unsigned v = 0;
    if (fmb_read_file ("/proc/sys/net/core/somaxconn", 64, false, &text, NULL, NULL) ==
        0)
        v = (unsigned)strtoul (text, NULL, 10);
    free (text);
    return v;
}

/* The TCP port's backlog: [api] tcp_listen_backlog, or (0) the most the
 * kernel takes.  A whole machine's nodes connect at once when a job
 * starts on all of them; a SYN the queue has no room for is retried by
 * the node after 1 s, then 3 s.  Above somaxconn the kernel silently
 * takes less: said once. */
static unsigned tcp_backlog (const struct fmb_config *cfg)
{
    unsigned cap = somaxconn ();
    unsigned want = cfg->tcp_listen_backlog ? cfg->tcp_listen_backlog
                    : cap                   ? cap
                                            : 4096;
    if (cap && want > cap) {
        fmb_log (LOG_WARNING,
                 "api: [api] tcp_listen_backlog %u is above net.core.somaxconn (%u), "
                 "which caps it: raise it (sysctl -w net.core.somaxconn=%u) or the "
                 "nodes of a large job may wait for SYN retries",
                 want,
                 cap,
                 want);
        want = cap;
    }
    return want;
}

/* A listening TCP socket on 'cfg->tcp'. */
static int tcp_listen (const struct fmb_config *cfg,
                       unsigned backlog,
                       struct fmb_error *error)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (fmb_parse_hostport (cfg->tcp, &ss, &sslen) < 0) {
        errno = EINVAL;
        return fmb_errorf (error, "[api] tcp = %s: not an address", cfg->tcp);
    }
    int fd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0)
        return fmb_errorf (
            error, "[api] tcp = %s: socket: %s", cfg->tcp, strerror (errno));
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (bind (fd, (struct sockaddr *)&ss, sslen) < 0 || listen (fd, (int)backlog) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "[api] tcp = %s: %s", cfg->tcp, strerror (saved));
    }
    return fd;
}

int conns_listen_tcp (struct conns *h,
                      const struct fmb_config *cfg,
                      const struct tlsfront_files *tls,
                      unsigned *max_conns,
                      struct fmb_error *error)
{
    struct tcpguard_limits lim;
    fit_file_limit (cfg, &lim, &h->relays);
    if (!(h->guard = tcpguard_create (&lim)))
        return fmb_errorf (error, "out of memory");
    unsigned threads = cfg->tls_threads;
    if (!threads) {
        long cpus = sysconf (_SC_NPROCESSORS_ONLN);
        threads = cpus < 1 ? 1 : cpus > 8 ? 8 : (unsigned)cpus;
    }
    struct tlsfront_limits flim = {.threads = threads,
                                   .handshake_ms = h->request_timeout_ms,
                                   .idle_ms = h->idle_ms,
                                   .relays = h->relays};
    if (tlsfront_create (tls, &flim, &h->front, error) < 0)
        return fmb_error_prefix (error, "[api] tcp = %s", cfg->tcp);
    if ((h->tcp_fd = tcp_listen (cfg, tcp_backlog (cfg), error)) < 0)
        return -1;
    *max_conns = lim.max_total;
    return 0;
}

struct tlsfront *conns_front (const struct conns *h)
{
    return h->front;
}

/* httpconn.h: the HTTP files' own view of a connection and a request, as
 * the transport (http.c, conns.c) and the dispatcher (dispatch.c,
 * callerid.c) share them; handlers see only httpreq.h.  Not for other
 * files of the broker.
 */
#ifndef FMB_HTTPCONN_H
#define FMB_HTTPCONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <microhttpd.h>

#include "httpreq.h"
#include "tcpguard.h"
#include "tlsfront.h"
#include "validate.h"
#include "waitq.h"

struct metrics;
struct conn_queue;
struct tcp_slot;
struct refusallog;
struct route;

/* One connection, from libmicrohttpd's "started" to its "closed".  Its
 * deadline bounds how long the request being read may take in total: a
 * byte now and then does not extend it (libmicrohttpd's own timeout
 * would). */
struct http_conn {
    struct conns *cs;
    struct conn_queue *q; /* the deadline queue it is on (conns.c); NULL: none */
    struct http_conn *prev, *next;
    int fd;
    bool counted; /* holds a slot in peers for uid (or the tcpguard for addr) */
    bool privileged;
    bool cut;
    bool tcp;
    bool authed; /* TCP: a request on it showed a valid credential */
    uid_t uid;
    char addr[TCPGUARD_ADDR_MAX];
    struct tcp_slot *slot; /* TCP: its place in the guard's count (conns.c) */
    struct tls_peer tls;   /* TCP: what its handshake learned of the peer */
    int64_t deadline_ms;   /* 0 while a request is being handled, or kept idle */
};

/* What every request of one struct http shares (http.c owns it). */
struct http_shared {
    bool holding;            /* answers wait for the loop pass's commit */
    struct http_req *held;   /* those answers */
    bool quiesced;           /* shutting down: no answer is delayed any more */
    struct tcpguard *guard;  /* the TCP connections per address, failures */
    struct metrics *metrics; /* answers by status, failed authentications */
    struct refusallog *rlog; /* refusals and failures logged, per caller */
};

struct http_req {
    struct http *h; /* the transport (http.c): its tarpit */
    struct http_shared *sh;
    bool tcp; /* came on the TCP listener */
    struct MHD_Connection *conn;
    bool *resumed; /* its listener's: MHD_run it (httpreq_resume) */
    char method[16];
    char *body;
    size_t len;
    bool too_large;
    int early_status;     /* 414 or 431, found with the headers */
    bool headers_checked; /* dispatch_headers ran: 'route' is the request's */
    const struct route *route;
    bool handled;
    bool want_suspend;
    bool suspended;
    bool replied;
    int status;
    char *resp;
    const char *ctype;
    char allow[64];
    unsigned retry_after_s; /* 0: no Retry-After header */
    json_t *json;
    struct caller caller;
    struct api_params p;
    char query_buf[1024];
    struct waiter wait;
    bool held;
    bool no_hold;
    struct http_req *held_next;
    int64_t tarpit_until_ms; /* a failed authentication answered then */
    bool in_tarpit;
    struct http_req *tarpit_next;
};

/* The connection a request came on (NULL: not tracked). */
static inline struct http_conn *conn_of (struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info (mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* ---- httpreq.c, for the transport and the dispatcher ---------------- */

/* Let a suspended request's connection go on (its answer is ready). */
void httpreq_resume (struct http_req *req);
/* Send the answers held for the pass's commit, or, if it did not commit,
 * 503s that give 'why'; returns how many went. */
int httpreq_release (struct http_shared *sh, bool committed, const char *why);
/* One more line of the refusal log about this request's caller, unless
 * its budget (refusallog.h) is spent (then counted, and said when the
 * window ends). */
bool httpreq_refusal_log_due (struct http_req *req);

#endif

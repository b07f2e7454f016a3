/* waitq.h: requests that wait (suspended) for something to happen.
 *
 * Every kind of waiting request -- an event long-poll reader, a step
 * cleanup waiting for its FM call, a RUN waiting for its reservation --
 * sits in one wait queue through the 'struct waiter' its request carries
 * (http_wait()).  A request is in at most one queue; waitq_remove takes
 * it out of whichever that is, so a request that goes away (its client
 * hung up) is forgotten in one place.
 */
#ifndef FMB_WAITQ_H
#define FMB_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

struct http_req;
struct waitq;

struct waiter {
    struct http_req *req; /* the request this link belongs to (set by http.c) */
    struct waitq *queue;  /* the queue it waits in, or NULL */
    struct waiter *next, **pprev;
    int64_t deadline_ms; /* monotonic: when the wait runs out (0: never) */
    int64_t after;       /* events: the reader's cursor */
    int64_t key;         /* what it waits for (an outbox id; RUN: 1 = created) */
    uint64_t pass;       /* the loop pass whose writes it waits on */
};

struct waitq {
    struct waiter *first;
};

void waitq_add (struct waitq *q, struct waiter *w);
/* Out of its queue (if any); safe to call for any waiter, twice too. */
void waitq_remove (struct waiter *w);
bool waitq_empty (const struct waitq *q);
/* Ms from 'now' until the earliest deadline (0: passed), or -1 if none. */
int64_t waitq_next_deadline_ms (const struct waitq *q, int64_t now);

/* Call 'fn' for every waiter in 'q'; 'fn' may remove (and answer) the
 * waiter it is given, nothing else. */
typedef void (*waitq_each_f) (struct waiter *w, void *arg);
void waitq_each (struct waitq *q, waitq_each_f fn, void *arg);

#endif

/* waitq.c: one wait queue for every kind of waiting request (waitq.h). */
#include <stddef.h>

#include "waitq.h"

void waitq_add (struct waitq *q, struct waiter *w)
{
    waitq_remove (w);
    w->queue = q;
    w->next = q->first;
    if (w->next)
        w->next->pprev = &w->next;
    w->pprev = &q->first;
    q->first = w;
}

void waitq_remove (struct waiter *w)
{
    if (!w->queue)
        return;
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    w->queue = NULL;
    w->next = NULL;
    w->pprev = NULL;
}

bool waitq_empty (const struct waitq *q)
{
    return q->first == NULL;
}

void waitq_each (struct waitq *q, waitq_each_f fn, void *arg)
{
    struct waiter *next;
    for (struct waiter *w = q->first; w; w = next) {
        next = w->next;
        fn (w, arg);
    }
}

int64_t waitq_next_deadline_ms (const struct waitq *q, int64_t now)
{
    int64_t first = INT64_MAX;
    for (const struct waiter *w = q->first; w; w = w->next)
        if (w->deadline_ms && w->deadline_ms < first)
            first = w->deadline_ms;
    if (first == INT64_MAX)
        return -1;
    return first <= now ? 0 : first - now;
}

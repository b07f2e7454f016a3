/* timer.c: the broker's timers (timer.h).  A handful of them, each alive
 * for the broker's whole life: an array scanned in order is enough. */
#include <stdlib.h>

#include "monotime.h"
#include "timer.h"

#define TIMERS_MAX 16

struct timer {
    const char *name;
    int64_t due; /* monotonic ms; INT64_MAX: idle */
    timer_f fn;
    void *arg;
    int64_t woken; /* a wake during its own run: the earliest due asked for */
    int running;
};

struct timers {
    struct timer timer[TIMERS_MAX];
    int n;
};

struct timers *timers_create (void)
{
    return calloc (1, sizeof (struct timers));
}

void timers_destroy (struct timers *t)
{
    free (t);
}

static int64_t due_after (int64_t now, int64_t delay_ms)
{
    return delay_ms < 0 ? INT64_MAX : now + delay_ms;
}

struct timer *timer_add (
    struct timers *t, const char *name, int64_t delay_ms, timer_f fn, void *arg)
{
    if (!t || t->n == TIMERS_MAX)
        return NULL;
    struct timer *tm = &t->timer[t->n++];
    tm->name = name;
    tm->fn = fn;
    tm->arg = arg;
    tm->due = due_after (fmb_monotime_ms (), delay_ms);
    tm->woken = INT64_MAX;
    return tm;
}

void timer_wake (struct timer *tm, int64_t delay_ms)
{
    if (!tm || delay_ms < 0)
        return;
    int64_t due = fmb_monotime_ms () + delay_ms;
    if (tm->running) {
        if (due < tm->woken)
            tm->woken = due;
    } else if (due < tm->due)
        tm->due = due;
}

void timer_set (struct timer *tm, int64_t delay_ms)
{
    if (!tm)
        return;
    tm->due = due_after (fmb_monotime_ms (), delay_ms);
    if (tm->running) /* the earlier of this and what its callback returns */
        tm->woken = tm->due;
}

int timers_run (struct timers *t, int64_t now)
{
    int ran = 0;
    for (int i = 0; i < t->n; i++) {
        struct timer *tm = &t->timer[i];
        if (tm->due > now)
            continue;
        tm->running = 1;
        tm->woken = INT64_MAX;
        int64_t next = due_after (now, tm->fn (tm->arg, now));
        tm->running = 0;
        tm->due = tm->woken < next ? tm->woken : next;
        ran++;
    }
    return ran;
}

int64_t timers_next_ms (const struct timers *t, int64_t now)
{
    int64_t due = INT64_MAX;
    for (int i = 0; i < t->n; i++)
        if (t->timer[i].due < due)
            due = t->timer[i].due;
    if (due == INT64_MAX)
        return -1;
    return due <= now ? 0 : due - now;
}

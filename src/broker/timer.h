/* timer.h: the broker's timers, in the spirit of Redis's ae time events.
 *
 * A timer is a callback with a due time.  The loop runs the due ones
 * once per pass (timers_run, inside the pass's transaction) and sleeps
 * until the earliest (timers_next_ms).  A callback returns its next
 * delay in ms, or TIMER_IDLE to sleep until someone wakes it
 * (timer_wake: "run no later than in this many ms") -- so work that
 * something else makes due (an outbox entry, an event for a long-poll
 * reader) runs in the same pass, and nothing is polled for nothing.
 *
 * Times are monotonic ms (fmb_monotime_ms).
 */
#ifndef FMB_TIMER_H
#define FMB_TIMER_H

#include <stdint.h>

#define TIMER_IDLE (-1)

struct timers;
struct timer;

/* 'now': monotonic ms; returns the next delay in ms or TIMER_IDLE. */
typedef int64_t (*timer_f) (void *arg, int64_t now);

struct timers *timers_create (void);
void timers_destroy (struct timers *t);

/* A timer first due in 'delay_ms' (TIMER_IDLE: when woken); owned by
 * 't'.  NULL if out of memory. */
struct timer *timer_add (
    struct timers *t, const char *name, int64_t delay_ms, timer_f fn, void *arg);
/* Due no later than 'delay_ms' from now (an earlier due time stays).
 * NULL is ignored: a module whose timers are not set up has nothing due. */
void timer_wake (struct timer *tm, int64_t delay_ms);
/* Due exactly 'delay_ms' from now (TIMER_IDLE: not until woken). */
void timer_set (struct timer *tm, int64_t delay_ms);

/* Run every timer due at 'now' (each at most once); returns how many ran. */
int timers_run (struct timers *t, int64_t now);
/* Ms from 'now' until the earliest due timer (0 if one is due), or -1. */
int64_t timers_next_ms (const struct timers *t, int64_t now);

#endif

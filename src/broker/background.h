/* background.h: background work done in slices (retention,
 * reconciliation): one shape for both, and its timing in one place.
 *
 * A slice runs from its own timer when the work says it is due, and
 * waits while the loop pass serves requests (pass_defer_background: one
 * slice a pass, put off at most PASS_BACKGROUND_DEFER_MAX_MS in a row);
 * how long it has waited is kept here.  The work says when it is due and
 * does one slice; each returns a delay as a timer callback does.
 */
#ifndef FMB_BACKGROUND_H
#define FMB_BACKGROUND_H

#include <stdint.h>

/* Background work (retention, reconciliation) runs in slices of about
 * this much time, one a pass, each put off while its pass holds answers
 * to requests (pass_defer_background, at most 25 ms in a row), so that a
 * request never waits long behind it: a slice's pass also commits what
 * it wrote, and under the disk traffic of a backlog that commit took
 * 5-20 ms (bench 5). */
#define BACKGROUND_SLICE_US 2000
/* Between slices of a reconciliation: requests get the loop, and the
 * listing is still matched at about a third of the loop's time. */
#define BACKGROUND_PAUSE_MS 3

struct pass;
struct timers;
struct background;

struct background_ops {
    /* Ms until a slice is due (0: now; TIMER_IDLE: until woken).  NULL:
     * always due when the timer runs. */
    int64_t (*due) (void *arg, int64_t now_ms);
    /* One slice (inside the pass); ms until the next (TIMER_IDLE: none
     * until woken). */
    int64_t (*slice) (void *arg, int64_t now_ms);
};

/* Its timer ('name') first runs in 'first_ms' (TIMER_IDLE: when woken);
 * 'ops' is copied, 'arg' borrowed.  NULL if out of memory. */
struct background *background_create (struct pass *pass,
                                      struct timers *timers,
                                      const char *name,
                                      int64_t first_ms,
                                      const struct background_ops *ops,
                                      void *arg);
/* (Its timer goes with the timers.) */
void background_destroy (struct background *bg);
/* A slice may be due: look no later than 'delay_ms' from now. */
void background_wake (struct background *bg, int64_t delay_ms);

#endif

/* monotime.h: clocks.  Timers use the monotonic clock; stored timestamps
 * use wall-clock milliseconds since the epoch. */
#ifndef FMB_MONOTIME_H
#define FMB_MONOTIME_H

#include <stdint.h>

int64_t fmb_monotime_ms (void);
int64_t fmb_realtime_ms (void);
/* Monotonic microseconds: for measuring short stretches of work. */
int64_t fmb_monotime_us (void);

#endif

/* monotime.c: see monotime.h. */
#include <time.h>

#include "monotime.h"

static int64_t clock_ms (clockid_t id)
{
    struct timespec ts;
    clock_gettime (id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t fmb_monotime_ms (void)
{
    return clock_ms (CLOCK_MONOTONIC);
}

int64_t fmb_monotime_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t fmb_realtime_ms (void)
{
    return clock_ms (CLOCK_REALTIME);
}

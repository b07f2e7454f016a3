/* benchutil.h: what the benchmark programs share (header-only: each is
 * one source file). */
#ifndef FMB_BENCHUTIL_H
#define FMB_BENCHUTIL_H

#include <stddef.h>
#include <time.h>

/* Monotonic seconds. */
static inline double bench_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wall clock milliseconds (for logs that other processes' times meet). */
static inline double bench_wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A curl write callback that drops the answer. */
static inline size_t bench_discard (char *d, size_t s, size_t n, void *u)
{
    (void)d;
    (void)u;
    return s * n;
}

/* qsort order of doubles, for percentiles. */
static inline int bench_cmp_double (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif

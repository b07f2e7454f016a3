/* ratelimit.h: token buckets keyed by a short string (a job id), for
 * step cleanups: one job's token holder cannot make the broker call the
 * FM faster than the bucket allows, so other jobs' RUNs keep their pace.
 *
 * The table has a fixed number of slots; when all are taken, the bucket
 * idle longest is recycled (it was full again anyway unless its job is
 * busy, and a busy job keeps its slot).
 */
#ifndef FMB_RATELIMIT_H
#define FMB_RATELIMIT_H

#include <stdint.h>

struct ratelimit;

/* 'rate' tokens per second, at most 'burst' kept; NULL if out of memory. */
struct ratelimit *ratelimit_create (unsigned rate, unsigned burst, unsigned slots);
void ratelimit_destroy (struct ratelimit *rl);

/* Take one token from 'key''s bucket at 'now_ms' (monotonic).  Returns 0
 * when taken, otherwise the milliseconds until one will be there. */
int64_t ratelimit_take (struct ratelimit *rl, const char *key, int64_t now_ms);

#endif

/* metrics.h: the broker's counters, a context of their own.  Their owners
 * count through the verbs below (nobody writes the counters directly);
 * status.c prints them after the store's gauges, for /metrics. */
#ifndef FMB_METRICS_H
#define FMB_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "fmclient.h"

struct metrics;

/* The named counters (and one gauge), in the order /metrics prints them. */
enum metric {
    METRIC_RECONCILE_RUNS,
    METRIC_ORPHANS_RELEASED,
    METRIC_FOREIGN_RESERVATIONS, /* a gauge: at the last reconciliation */
    METRIC_FOREIGN_REAPED,
    METRIC_AUTH_FAILURES, /* TCP credentials refused */
    METRIC_AUTH_DELAYED,  /* ...of those, answered late (tarpit) */
    METRIC_TCP_REFUSED,   /* TCP connections closed at accept */
    METRIC_TCP_EVICTED,   /* unauthenticated ones cut to make room */
    METRIC_RESERVATIONS_LOST,
    METRIC_PRUNED_JOBS, /* [broker] retain_days */
    METRIC_PRUNED_EVENTS,
    METRIC_PRUNE_SLICES,     /* loop passes that pruned something */
    METRIC_RECONCILE_SLICES, /* loop passes that matched a listing */
    METRIC_COUNT
};

struct metrics *metrics_create (void);
void metrics_destroy (struct metrics *m);

/* An API answer went out with 'status': counted by its class. */
void metrics_count_status (struct metrics *m, int status);
/* An FM call completed: counted by call and result, its latency. */
void metrics_fm_call (struct metrics *m, const struct fmc_result *res);
/* The loop spent 'us' in one turn, 'commit_us' of it committing, at
 * monotonic 'now_ms': the pass histogram and the stall metrics. */
void metrics_pass (struct metrics *m, int64_t us, int64_t commit_us, int64_t now_ms);
/* Add 'n' to a named counter; set a gauge. */
void metrics_add (struct metrics *m, enum metric which, unsigned long n);
void metrics_set (struct metrics *m, enum metric which, unsigned long value);

/* Prometheus text: the FM calls' counts and latency histograms; the
 * broker's own counters (answers, reconciliation, retention, stalls). */
void metrics_print_fm (const struct metrics *m, FILE *f);
void metrics_print_counters (const struct metrics *m, FILE *f);

#endif

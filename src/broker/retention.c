/* retention.c: the jobs' background upkeep (retention.h): quarantined
 * VNIs whose time came go back to the pool, and released jobs and events
 * older than [broker] retain_days are deleted, in slices.
 */
#include <stdlib.h>

#include "background.h"
#include "broker.h"
#include "metrics.h"
#include "store.h"
#include "timer.h"
#include "log.h"
#include "monotime.h"
#include "retention.h"

struct retention {
    struct broker *b;
    unsigned long prune_round[2]; /* jobs, events deleted in this round */
    struct background *pruning;
};

/* Rows per table per statement: a slice stops at the first statement
 * that ends after BACKGROUND_SLICE_US, so this bounds how far past it a
 * slice can go.  A released job takes its nodes and steps with it (7
 * nodes on average, 256 for a large job): at 64, slices of benchmark 5's
 * store of realistic jobs ran to 8-18 ms (76 over 8 ms in one run); at 8,
 * 3 did, none over 13 ms, and the prune of 250,000 jobs took 84-88 s
 * instead of 71. */
#define PRUNE_ROWS        8
#define PRUNE_INTERVAL_MS (3600 * 1000) /* between rounds */
#define PRUNE_FIRST_MS    (10 * 1000)   /* after start: reconcile first */
/* Between slices of a backlog: history can wait.  A slice in 22 ms
 * (~10,000 jobs a second here with the old benchmark's bare jobs, ~3,000
 * with realistic ones) keeps the disk traffic of deleting a quarter of
 * 1,000,000 jobs from slowing RUNs' commits: their p99 went from 15-37
 * ms to about 7 ms against 3-6 ms idle (bench 5, bare jobs). */
#define PRUNE_PAUSE_MS 20
#define DAY_MS         (86400LL * 1000)

/* Retention is off ([broker] retain_days = 0): look again later. */
static int64_t prune_due (void *arg, int64_t mono)
{
    struct retention *rt = arg;
    (void)mono;
    return rt->b->cfg.retain_days == 0 ? PRUNE_INTERVAL_MS : 0;
}

/* One slice of retention (first PRUNE_FIRST_MS after start): batches of
 * PRUNE_ROWS until the backlog is gone or the slice's time is up; the
 * rest waits for the next slice.  Returns when to come back. */
static int64_t prune_history (void *arg, int64_t mono)
{
    struct retention *rt = arg;
    struct broker *b = rt->b;
    unsigned jobs = 0, events = 0, nj, ne;
    struct fmb_error e;
    (void)mono;
    int64_t before = now_wall () - (int64_t)b->cfg.retain_days * DAY_MS;
    int64_t end = fmb_monotime_us () + BACKGROUND_SLICE_US;
    bool more;
    do {
        if (store_prune (b->st, before, before, PRUNE_ROWS, &nj, &ne, &e) < 0) {
            broker_log_store_error (b, "retention", &e);
            return PRUNE_INTERVAL_MS;
        }
        jobs += nj;
        events += ne;
        more = nj == PRUNE_ROWS || ne == PRUNE_ROWS; /* a full batch: more due */
    } while (more && fmb_monotime_us () < end);
    metrics_add (b->metrics, METRIC_PRUNED_JOBS, jobs);
    metrics_add (b->metrics, METRIC_PRUNED_EVENTS, events);
    if (jobs || events)
        metrics_add (b->metrics, METRIC_PRUNE_SLICES, 1);
    rt->prune_round[0] += jobs;
    rt->prune_round[1] += events;
    if (more)
        return PRUNE_PAUSE_MS;
    if (rt->prune_round[0] || rt->prune_round[1])
        fmb_log (LOG_INFO,
                 "retention: deleted %lu released jobs and %lu events older than %u "
                 "days",
                 rt->prune_round[0],
                 rt->prune_round[1],
                 b->cfg.retain_days);
    rt->prune_round[0] = rt->prune_round[1] = 0;
    return PRUNE_INTERVAL_MS;
}

/* Free quarantined VNIs whose time came; log. */
static void expire_vnis (struct broker *b)
{
    unsigned freed = 0;
    struct fmb_error e;
    if (store_vni_expire (b->st, now_wall (), &freed, &e) < 0)
        broker_log_store_error (b, "quarantine expiry", &e);
    else if (freed)
        fmb_log (
            LOG_INFO, "%u VNIs left quarantine ([vni] quarantine_s passed)", freed);
}

static int64_t expire_quarantine (void *arg, int64_t mono)
{
    struct retention *rt = arg;
    (void)mono;
    expire_vnis (rt->b);
    return 1000;
}

struct retention *retention_create (struct broker *b)
{
    struct retention *rt = calloc (1, sizeof (*rt));
    if (!rt)
        return NULL;
    static const struct background_ops pruning = {prune_due, prune_history};
    rt->b = b;
    if (!timer_add (b->timers, "quarantine expiry", 0, expire_quarantine, rt) ||
        !(rt->pruning = background_create (
              b->pass, b->timers, "retention", PRUNE_FIRST_MS, &pruning, rt))) {
        free (rt);
        return NULL;
    }
    return rt;
}

/* (Its timers go with the broker's.) */
void retention_destroy (struct retention *rt)
{
    if (!rt)
        return;
    background_destroy (rt->pruning);
    free (rt);
}

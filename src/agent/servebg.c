/* servebg.c: the node service's bookkeeping with the broker, on a
 * thread of its own (servestate.h): the nodes' reports and the steps'
 * ends deferred until no caller came for a moment, kept reports tried
 * again with back-off, the kept connection opened ahead of jobs. */
#include "servestate.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monotime.h"
#include "spool.h"

void serve_wake_background (struct service *svc)
{
    (void)!write (svc->wake[1], "", 1);
}

/* Bookkeeping for the background thread: a report kept, or a step's
 * end.  Under svc->mu. */
void serve_defer_locked (struct service *svc)
{
    if (svc->d.since_ms == 0)
        svc->d.since_ms = fmb_monotime_ms ();
    serve_wake_background (svc);
}

void serve_report_kept (struct service *svc, bool kept)
{
    if (!kept)
        return;
    pthread_mutex_lock (&svc->mu);
    svc->d.reports = true;
    serve_defer_locked (svc);
    pthread_mutex_unlock (&svc->mu);
}

/* A wait of about 'ms': somewhere in [ms/2, 3ms/2). */
static int64_t jittered (int64_t ms)
{
    return ms / 2 + (int64_t)(random () % (ms > 0 ? ms : 1));
}

/* Kept reports left: tried again after a back-off; none: reset. */
void serve_schedule_retry (struct deferred *d, bool left)
{
    if (!left) {
        d->retry_at_ms = d->retry_delay_ms = 0;
        return;
    }
    d->retry_delay_ms =
        d->retry_delay_ms ? d->retry_delay_ms * 2 : REPORT_RETRY_FIRST_MS;
    if (d->retry_delay_ms > REPORT_RETRY_MAX_MS)
        d->retry_delay_ms = REPORT_RETRY_MAX_MS;
    d->retry_at_ms = fmb_monotime_ms () + jittered (d->retry_delay_ms);
}

static int spooled_one (const struct spooled_report *r, void *arg)
{
    (void)r;
    *(bool *)arg = true;
    return 1;
}

bool serve_reports_kept (const char *state_dir)
{
    bool any = false;
    (void)spool_each (state_dir, spooled_one, &any, NULL);
    return any;
}

/* Until 'at' (0: never): -1, or the ms left (0: due). */
static int64_t until (int64_t at)
{
    if (at == 0)
        return -1;
    int64_t left = at - fmb_monotime_ms ();
    return left < 0 ? 0 : left;
}

static int64_t sooner (int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* How long the background thread sleeps before the deferred work, a
 * retry of kept reports or opening the broker's connection: -1 forever.
 * Under svc->mu. */
static int64_t wait_ms (const struct service *svc)
{
    const struct deferred *d = &svc->d;
    int64_t ms = sooner (until (d->retry_at_ms), until (d->warm_at_ms));
    if (d->since_ms == 0)
        return ms;
    int64_t now = fmb_monotime_ms ();
    int64_t idle = svc->nworkers ? IDLE_MS : svc->last_caller_ms + IDLE_MS - now;
    int64_t cap = d->since_ms + DEFER_MAX_MS - now;
    int64_t left = idle < cap ? idle : cap;
    return sooner (ms, left < 0 ? 0 : left);
}

/* The deferred work, one try each; stops at a broker away.  Kept
 * reports left are tried again after a back-off. */
static void run_deferred (struct service *svc)
{
    static char steps[STEPS_MAX][300]; /* the background thread's alone */
    pthread_mutex_lock (&svc->mu);
    struct deferred *d = &svc->d;
    unsigned nsteps = d->nsteps;
    bool reports = d->reports;
    memcpy (steps, d->steps, sizeof (steps[0]) * nsteps);
    d->nsteps = 0;
    d->reports = false;
    d->since_ms = 0;
    pthread_mutex_unlock (&svc->mu);
    bool away = false;
    unsigned left = reports;
    for (unsigned i = 0; i < nsteps && !away; i++)
        engine_step_end (svc->eng, steps[i], &away);
    if (reports && !away)
        left = engine_deliver (svc->eng);
    /* (a batch of step ends alone must not cancel the kept reports'
     * retry: what is on disk says) */
    bool kept = left > 0 || (!reports && serve_reports_kept (svc->state_dir));
    pthread_mutex_lock (&svc->mu);
    if (reports || !kept || !d->retry_at_ms) /* a retry due stays as it is */
        serve_schedule_retry (d, kept);
    pthread_mutex_unlock (&svc->mu);
}

/* The kept connection to the broker, opened before a job needs it; when
 * the broker closed it, again at a moment of this node's. */
static void warm (struct service *svc, bool closed)
{
    bool local;
    pthread_mutex_lock (&svc->mu);
    struct deferred *d = &svc->d;
    bool due = d->warm_at_ms && until (d->warm_at_ms) == 0;
    if (closed && !d->warm_at_ms && !d->local_broker)
        d->warm_at_ms = fmb_monotime_ms () + (int64_t)(random () % WARM_SPREAD_MS);
    if (due)
        d->warm_at_ms = 0;
    pthread_mutex_unlock (&svc->mu);
    if (!due)
        return;
    engine_warm (svc->eng, &local);
    pthread_mutex_lock (&svc->mu);
    d->local_broker = local;
    pthread_mutex_unlock (&svc->mu);
}

/* The background thread: the broker's bookkeeping, the kept reports'
 * retries, the warm connection; until the service stops and nothing is
 * deferred. */
void *serve_background (void *arg)
{
    struct service *svc = arg;
    char drain[64];
    for (;;) {
        pthread_mutex_lock (&svc->mu);
        int64_t ms = wait_ms (svc);
        bool stopping = svc->stopping, local = svc->d.local_broker;
        pthread_mutex_unlock (&svc->mu);
        if (stopping)
            break;
        struct pollfd p[2] = {
            {.fd = svc->wake[0], .events = POLLIN},
            {.fd = local ? -1 : engine_idle_fd (svc->eng), .events = POLLIN}};
        int n = poll (p, 2, ms < 0 || ms > INT32_MAX ? -1 : (int)ms);
        if (n > 0 && p[0].revents)
            (void)!read (svc->wake[0], drain, sizeof (drain));
        pthread_mutex_lock (&svc->mu);
        struct deferred *d = &svc->d;
        if (d->retry_at_ms && until (d->retry_at_ms) == 0) {
            d->reports = true; /* the kept reports' turn */
            if (!d->since_ms)
                d->since_ms = fmb_monotime_ms ();
        }
        bool due = d->since_ms && wait_ms (svc) == 0;
        pthread_mutex_unlock (&svc->mu);
        if (due)
            run_deferred (svc);
        warm (svc, n > 0 && p[1].fd >= 0 && p[1].revents);
    }
    pthread_mutex_lock (&svc->mu);
    bool left = svc->d.since_ms != 0;
    pthread_mutex_unlock (&svc->mu);
    if (left)
        run_deferred (svc);
    return NULL;
}

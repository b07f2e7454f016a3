/* reconcile.h: matching the FM's listing of jobs with the store.
 *
 * The store's active and lost jobs are read, then a listing is matched
 * with them, a slice at a time (BACKGROUND_SLICE_US each, a short pause
 * apart), each slice inside its loop pass; a slice whose pass does not
 * commit is rewound and done again.  Listings are asked for
 * at start (the FM session's probes are listings too), after every
 * reconnect, every [broker] reconcile_interval_s, and on request.
 */
#ifndef FMB_RECONCILE_H
#define FMB_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct broker;
struct reconciler;

struct reconciler *reconcile_create (struct broker *b);
void reconcile_destroy (struct reconciler *rc);

/* What reconciliation asks of the jobs (jobs.c sets them at start, so
 * that reconciliation, which jobs.c calls, does not call back into it).
 * Unset, no reservation is in flight and no job is marked lost. */
struct reconcile_hooks {
    /* Is a reservation of 'job' being made right now? */
    bool (*reserving) (struct broker *b, const char *job);
    /* A listing taken at 'listed_at' (wall ms) lacks 'job''s reservation:
     * the job's transition, inside the pass; 1 if it was marked lost. */
    int (*lost) (struct broker *b,
                 const char *job,
                 int64_t listed_at,
                 struct fmb_error *error);
};
void reconcile_set_hooks (struct reconciler *rc, const struct reconcile_hooks *hooks);
/* Start the FM session (its first probe is the first listing). */
void reconcile_start (struct broker *b);
/* A listing now; 'reap_foreign': that pass also deletes reservations with
 * our prefix that this broker has no record of (normally only reported). */
void reconcile_now (struct reconciler *rc, bool reap_foreign);
/* [broker] reconcile_interval_s changed (reload): the next listing in
 * that much time (0: none until asked for) -- unless the last one failed:
 * its retry stays as it was. */
void reconcile_reschedule (struct reconciler *rc, unsigned interval_s);

#endif

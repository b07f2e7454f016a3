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

#include <jansson.h>

struct fmb_config;
struct fmc;
struct fmsession;
struct metrics;
struct outbox;
struct pass;
struct reservations;
struct store;
struct timers;
struct reconciler;

/* The handles it uses, borrowed for its life ('fmc' NULL: VNI-only;
 * '*stopping' true: the broker is shutting down, nothing new starts). */
struct reconciler *reconcile_create (const struct fmb_config *cfg,
                                     struct store *st,
                                     struct fmc *fmc,
                                     struct pass *pass,
                                     struct timers *timers,
                                     struct fmsession *fms,
                                     struct outbox *outbox,
                                     struct metrics *metrics,
                                     const bool *stopping);
void reconcile_destroy (struct reconciler *rc);

/* What reconciliation asks of the jobs (jobs.c sets them at start, with
 * the 'arg' each gets, so that reconciliation, which jobs.c calls, does
 * not call back into it).  Unset, no reservation is in flight, no job is
 * marked lost and no event is logged. */
struct reconcile_hooks {
    /* Is a reservation of 'job' being made right now? */
    bool (*reserving) (void *arg, const char *job);
    /* A listing taken at 'listed_at' (wall ms) lacks 'job''s reservation:
     * the job's transition, inside the pass; 1 if it was marked lost. */
    int (*lost) (void *arg,
                 const char *job,
                 int64_t listed_at,
                 struct fmb_error *error);
    /* Append event 'type' (of 'job', NULL: none; 'detail' stolen) inside
     * the pass: a foreign reservation. */
    int (*event) (void *arg,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error);
};
void reconcile_set_hooks (struct reconciler *rc,
                          const struct reconcile_hooks *hooks,
                          void *arg);
/* Start the FM session (its first probe is the first listing); a
 * reservation the FM made for no job ('rsv' reports it) asks for a
 * listing. */
void reconcile_start (struct reconciler *rc, struct reservations *rsv);
/* A listing now; 'reap_foreign': that pass also deletes reservations with
 * our prefix that this broker has no record of (normally only reported). */
void reconcile_now (struct reconciler *rc, bool reap_foreign);
/* [broker] reconcile_interval_s changed (reload): the next listing in
 * that much time (0: none until asked for) -- unless the last one failed:
 * its retry stays as it was. */
void reconcile_reschedule (struct reconciler *rc, unsigned interval_s);

#endif

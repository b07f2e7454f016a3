/* reconcile.h: matching the FM's listing of jobs with the store.
 *
 * A listing is matched a slice at a time (BACKGROUND_SLICE_US each, a
 * short pause apart), each slice inside its loop pass; a slice whose pass
 * does not commit is rewound and matched again.  Listings are asked for
 * at start (the FM session's probes are listings too), after every
 * reconnect, every [broker] reconcile_interval_s, and on request.
 */
#ifndef FMB_RECONCILE_H
#define FMB_RECONCILE_H

#include <stdbool.h>

struct broker;
struct reconciler;

struct reconciler *reconcile_create (struct broker *b);
void reconcile_destroy (struct reconciler *rc);
/* Start the FM session (its first probe is the first listing). */
void reconcile_start (struct broker *b);
/* A listing now; 'reap_foreign': that pass also deletes reservations with
 * our prefix that this broker has no record of (normally only reported). */
void reconcile_now (struct reconciler *rc, bool reap_foreign);
/* [broker] reconcile_interval_s changed (reload): the next listing in
 * that much time (0: none until asked for). */
void reconcile_reschedule (struct reconciler *rc, unsigned interval_s);

#endif

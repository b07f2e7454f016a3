/* lifecycle.h: the broker's contexts made and freed in the one order in
 * which each needs the last: fmbrokerd (main.c) and the unit tests'
 * broker (tests/unit/brokerfix.c) both start and stop through here. */
#ifndef FMB_LIFECYCLE_H
#define FMB_LIFECYCLE_H

#include "error.h"

struct broker;

/* What the store needs at its opening (the events its damage hook
 * reports to), and what has no other dependency: timers, events, roles,
 * metrics.  -1 (ENOMEM) if one cannot be had. */
int broker_create_early (struct broker *b);
/* The store, open, reports damage to the events and records the
 * broker's clock. */
void broker_attach_store (struct broker *b);
/* Everything the broker serves with, once b->cfg is set and b->st is
 * open and attached: the FM client, HTTP, the pass, the FM session, the
 * outbox, reservations, reconciliation and the jobs' contexts; then the
 * interrupted reservations' recovery and the first reconciliation.  -1
 * with the reason in 'error'. */
int broker_create_serving (struct broker *b, struct fmb_error *error);
/* Stop taking work: no new FM session probes, no new requests read. */
void broker_quiesce (struct broker *b);
/* Free every context there is (NULL ones skipped); not the state lock,
 * which outlives the store (main.c releases it). */
void broker_destroy (struct broker *b);

#endif

/* events.h: the event log (appended inside the caller's transaction),
 * its long-poll readers, and the events that report session tokens the
 * store could not decrypt (kept until the pass that writes them commits).
 */
#ifndef FMB_EVENTS_H
#define FMB_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"

struct events;
struct http_req;
struct pass;
struct store;
struct timers;

/* Its timers (readers' deadlines, damage reports) on 'timers'. */
struct events *events_create (struct timers *timers);
void events_destroy (struct events *ev);
/* The store it appends to and reads, and the loop pass whose commit makes
 * a damage report durable: once both exist (before any append). */
void events_attach (struct events *ev, struct store *st, struct pass *pass);

/* Append an event inside the caller's transaction; 'detail' is stolen.
 * Readers that wait for news are woken. */
int events_append (struct events *ev,
                   const char *type,
                   const char *job,
                   json_t *detail,
                   struct fmb_error *error);
/* Answer long-poll readers that have news, and those whose wait ran out
 * ('all': every one, at shutdown). */
void events_wake (struct events *ev, bool all);
/* Suspend 'req' until an event after 'after' (at most 'limit' of them)
 * or 'wait_s' pass; answers at once if there is news. */
void events_wait (struct events *ev,
                  struct http_req *req,
                  int64_t after,
                  unsigned limit,
                  unsigned wait_s);
/* The store's damage hook (store_set_damage_hook; 'arg' is the events):
 * logged at once, a token_damaged event in the next pass. */
void events_token_damaged (void *arg, const char *job, const char *why);

#endif

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

struct broker;
struct http_req;
struct events;

struct events *events_create (struct broker *b);
void events_destroy (struct events *ev);

/* Append an event inside the caller's transaction; 'detail' is stolen.
 * Readers that wait for news are woken. */
int broker_event (struct broker *b,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error);
/* Answer long-poll readers that have news, and those whose wait ran out
 * ('all': every one, at shutdown). */
void broker_events_wake (struct broker *b, bool all);
/* Suspend 'req' until an event after 'after' (at most 'limit' of them)
 * or 'wait_s' pass; answers at once if there is news. */
void broker_events_wait (struct broker *b,
                         struct http_req *req,
                         int64_t after,
                         unsigned limit,
                         unsigned wait_s);
/* The store's damage hook (store_set_damage_hook; 'arg' is the broker):
 * logged at once, a token_damaged event in the next pass. */
void broker_token_damaged (void *arg, const char *job, const char *why);
void broker_report_damage (struct broker *b);

#endif

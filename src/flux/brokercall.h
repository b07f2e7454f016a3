/* brokercall.h: fmbrokerd's REST API from inside a Flux broker's reactor.
 *
 * A jobtap plugin runs in the job-manager's thread: a blocking HTTP call
 * there would stall every job of the instance.  Each call runs
 * api_client_call() on a thread of its own; its answer comes back through
 * a pipe that the reactor watches, and the callback runs on the reactor
 * thread, where the Flux API may be used.  Destroying the context drops
 * the answers not yet delivered and waits for the calls still running
 * (each ends within its timeout), so that the plugin may be unloaded.
 */
#ifndef FMB_FLUX_BROKERCALL_H
#define FMB_FLUX_BROKERCALL_H

#include <flux/core.h>
#include <jansson.h>

#include "apiclient.h"
#include "apiretry.h"
#include "config.h"

struct brokercall;

/* The outcome of one call, for the callback. */
struct brokercall_result {
    int reached;              /* 1: the broker answered (status is its HTTP status) */
    long status;              /* HTTP status, 0 when not reached */
    json_t *body;             /* the answer, or NULL (owned by the result) */
    char error[512];          /* why not reached, or the broker's detail */
    enum api_outcome outcome; /* apiretry.h's judgement of it */
};

typedef void (*brokercall_f) (const struct brokercall_result *r, void *arg);

/* The target comes from 'cfg' ([api] broker_url with its token file, or
 * [api] socket), as the CLI reads it; the context keeps its own copy. */
struct brokercall *brokercall_create (flux_t *h,
                                      const struct fmb_config *cfg,
                                      long timeout_s,
                                      struct fmb_error *error);
void brokercall_destroy (struct brokercall *bc);

/* Start one call; 'cb' runs on the reactor with its result.  'bearer'
 * (may be NULL) replaces the configured token.  'arg' belongs to the
 * caller, who must keep it until the callback has run (a context
 * destroyed first never runs it). */
int brokercall_start (struct brokercall *bc,
                      const char *method,
                      const char *path,
                      const char *body,
                      const char *bearer,
                      brokercall_f cb,
                      void *arg);

/* Is a failed result worth another try later: no broker answered, or one
 * answered 408, 429 or 5xx (a failover, an overloaded broker)?  The rule
 * every client of the broker follows (apiretry.h). */
int brokercall_transient (const struct brokercall_result *r);

/* The broker's words for a refused or failed call, for a message. */
const char *brokercall_reason (const struct brokercall_result *r);

#endif

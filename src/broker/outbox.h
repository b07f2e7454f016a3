/* outbox.h: the FM changes the broker owes, durable in the store's outbox
 * and run from here: queueing (inside the caller's transaction), running
 * (concurrently, with back-off), and the step cleanups that wait for
 * theirs.  The outbox owns its kinds: nobody else writes or reads them.
 */
#ifndef FMB_OUTBOX_H
#define FMB_OUTBOX_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define OUTBOX_PARALLEL 64 /* FM operations from the outbox at once */
/* ...and at most this many a second (a bucket of OUTBOX_PARALLEL): each
 * costs the loop ~0.2 ms, and with an FM that answers at once a backlog
 * of 99,000 releases kept the loop busy for 17 s, every job start
 * waiting five times as long.  An FM taking 64 ms or more a call stays
 * under it anyway.  A backlog delays what is queued after it (a job's
 * release, a step's cleanup) by its length over the rate. */
#define OUTBOX_RATE 1000
#define OUTBOX_STEP 8 /* a backlog's calls leave this many at a time */
_Static_assert(OUTBOX_STEP * 1000 / OUTBOX_RATE >= 1, "a backlog's step is >= 1 ms");
#define OUTBOX_BACKOFF_MS     1000 /* first retry; doubles per attempt */
#define OUTBOX_BACKOFF_MAX_MS (5 * 60 * 1000)
#define OUTBOX_ALERT_ATTEMPTS 5 /* then a release_failed event */

#include <jansson.h>

struct fmb_config;
struct fmsession;
struct fmc;
struct http_req;
struct pass;
struct store;
struct timers;
struct timer;
struct outbox;

/* The handles it uses, borrowed for its life ('fmc' NULL: VNI-only;
 * '*stopping' true: the broker is shutting down, nothing new starts). */
struct outbox *outbox_create (const struct fmb_config *cfg,
                              struct store *st,
                              struct fmc *fmc,
                              struct pass *pass,
                              struct timers *timers,
                              struct fmsession *fms,
                              const bool *stopping);
void outbox_destroy (struct outbox *o);

/* What the outbox asks of the jobs (jobs.c sets them at start, with the
 * 'arg' each gets, so that the outbox, which jobs.c calls, does not call
 * back into it).  Unset, no reservation is in flight, a finished delete
 * changes no job and no event is logged. */
struct outbox_hooks {
    /* Is a reservation of 'job' being made right now?  Its delete waits. */
    bool (*reserving) (void *arg, const char *job);
    /* The delete of 'job''s FM reservation finished (200 or 404): the
     * job's transition, inside the pass. */
    int (*job_deleted) (void *arg, const char *job, struct fmb_error *error);
    /* Append event 'type' (of 'job', NULL: none; 'detail' stolen) inside
     * the pass: a release still failing. */
    int (*event) (void *arg,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error);
};
void outbox_set_hooks (struct outbox *o, const struct outbox_hooks *hooks, void *arg);

/* Queue the delete of an FM job (its reservation), due at wall clock
 * 'due_ms'; inside the caller's transaction. */
int outbox_queue_job_delete (struct outbox *o,
                             const char *fm_job_id,
                             int64_t due_ms,
                             struct fmb_error *error);
/* 1 if a change to FM job 'fm_job_id' is queued (its delete, or a
 * step's cleanup, not done yet), 0 if not, -1 if the store cannot tell. */
int outbox_fm_job_queued (struct outbox *o,
                          const char *fm_job_id,
                          struct fmb_error *error);
/* Queue the cleanup of one step of an FM job, due now; 'id' gets the
 * entry's id (for outbox_steps_wait). */
int outbox_queue_step_delete (struct outbox *o,
                              const char *fm_job_id,
                              const char *step,
                              int64_t *id,
                              struct fmb_error *error);
/* Something was queued: run it as soon as possible (NULL: nothing). */
void outbox_changed (struct outbox *o);
/* The timer that runs the outbox (for the session to wake when up). */
struct timer *outbox_timer_of (struct outbox *o);

/* Suspend step cleanup 'req' until entry 'id' finishes (200 "cleaned")
 * or 'wait_s' pass (202 "cleaning"); 503 if the pass does not commit. */
void outbox_steps_wait (struct outbox *o,
                        struct http_req *req,
                        int64_t id,
                        unsigned wait_s);
/* Shutdown: answer every step waiter now. */
void outbox_steps_answer_all (struct outbox *o);

#endif

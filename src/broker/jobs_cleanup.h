/* jobs_cleanup.h: CLEANUP, step cleanups and node reports (jobs_cleanup.c),
 * and the job state transitions the FM work observes. */
#ifndef FMB_JOBS_CLEANUP_H
#define FMB_JOBS_CLEANUP_H

#include <stdint.h>

#include "error.h"

struct broker;
struct http_req;
struct http_problem;
struct cleanups;

/* The step cleanups' rate per job: 'rate' a second, bursts of 'burst'
 * ([api] step_cleanup_rate, step_cleanup_burst; rate 0: no limit). */
struct cleanups *cleanups_create (unsigned rate, unsigned burst);
void cleanups_destroy (struct cleanups *c);

/* Route handlers (routes.c). */
int jobs_cleanup (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_step_cleanup (struct broker *b, struct http_req *req, struct http_problem *p);
int jobs_node_report (struct broker *b, struct http_req *req, struct http_problem *p);

/* The FM no longer holds 'job''s reservation (its delete ended 200 or
 * 404): releasing -> released, a held reservation -> released. */
int jobs_released (struct broker *b, const char *job, struct fmb_error *e);
/* A listing taken at 'listed_at' (wall ms) lacks the reservation of
 * 'job', still active with it: -> lost, with an event (1); else 0. */
int jobs_lost (struct broker *b,
               const char *job,
               int64_t listed_at,
               struct fmb_error *e);

#endif

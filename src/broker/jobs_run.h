/* jobs_run.h: RUN (jobs_run.c): the body's validation, the handler, and
 * the transition that records a reservation's outcome. */
#ifndef FMB_JOBS_RUN_H
#define FMB_JOBS_RUN_H

#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "error.h"

struct broker;
struct fmc_result;
struct http_req;
struct http_problem;

/* A RUN request body, validated (borrowed pointers into the body). */
struct run_request {
    json_int_t uid;
    const char *user;
    json_t *nodes;
    json_int_t node_count;
    json_int_t ncores;
    const char *hwcoll; /* auto | on | off */
    json_int_t vni_count;
    unsigned tcs; /* FMB_TC_* mask within [cxi] allowed_tcs; 0: not asked */
};

/* Validate a RUN body strictly (unknown keys, types, ranges); -1 with
 * the reason in 'why'.  A hostlist string in "nodes" is replaced in
 * 'body' by the array of names it expands to.  No I/O: fuzzed and
 * unit-tested on its own. */
int jobs_parse_run (const struct fmb_config *cfg,
                    json_t *body,
                    struct run_request *rr,
                    char *why,
                    size_t len);

/* Route handler (routes.c): PUT /v1/jobs/{job}. */
int jobs_run (struct broker *b, struct http_req *req, struct http_problem *p);

/* The reservation's outcome 'res' for 'job', in the store (inside the
 * loop pass): reserved, or unavailable with the FM delete queued. */
int jobs_record_outcome (struct broker *b,
                         const char *job,
                         const struct fmc_result *res,
                         struct fmb_error *e);

#endif

/* jobset.h: the set of every job the broker has not released, as clean
 * needs it: a service is destroyed only when no such job can own it, so
 * the set must be complete (every page of every unreleased state) or
 * clean does nothing. */
#ifndef FMB_JOBSET_H
#define FMB_JOBSET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cxi_abi.h"
#include "error.h"
#include "svc.h"
#include "validate.h"

/* The states clean asks for, in the order a job moves through them, so
 * that a job changing state during the listing is seen in one of them
 * or is released by the end. */
extern const char *const jobset_states[3];

struct job_set {
    struct job_facts *jobs;
    size_t n, cap;
};

/* Add one page of GET /v1/jobs ({"jobs":[...], "next_after"?}).
 * 'after' is the page's own ?after= ("" for the first); on return it
 * holds the next page's, or "" when this was the last.  -1 (EPROTO) with
 * a message when the answer is not a well-formed page (a job without
 * uid or VNIs, a next_after that does not move forward). */
int job_set_add_page (struct job_set *set,
                      const json_t *page,
                      char after[JOB_ID_MAX + 1],
                      struct fmb_error *error);

/* May service 'd' belong to a job in the set: its uid and VNI set, or
 * any VNI an unreleased job holds (VNIs are never shared, so a service
 * with one is not stale whoever it names)? */
bool job_set_claims (const struct job_set *set, const struct cxi_svc_desc *d);

void job_set_clear (struct job_set *set);

#endif

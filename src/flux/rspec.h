/* rspec.h: what fmbroker needs from a Flux job's R (RFC 20) and jobspec:
 * its node names and cores per node for the RUN, and the user's
 * attributes.system.fmbroker options.  Pure functions, unit-tested
 * without Flux. */
#ifndef FMB_FLUX_RSPEC_H
#define FMB_FLUX_RSPEC_H

#include <jansson.h>

#include "error.h"

/* The RUN body for a job of 'uid' allocated 'R': {"uid", "nodes",
 * "ncores"} plus what the user asked in jobspec attributes.system.fmbroker
 * (hwcoll: "on"/"off"/"auto", vnis: 0-4, tcs: a list), checked as every
 * client checks them (runopts.h; the broker checks tcs against [cxi]
 * allowed_tcs).  NULL with a message naming what is wrong. */
json_t *rspec_run_body (json_t *R, json_t *jobspec, unsigned uid, struct fmb_error *e);

/* How many ids an RFC 22 idset ("0-3,7") holds; -1 when it is not one. */
long rspec_idset_count (const char *s);

#endif

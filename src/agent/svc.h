/* svc.h: the CXI service recipe for a job, and how the agent recognises
 * its services later.
 *
 * One service per NIC: members = the job's uid (+ IGNORE); VNIs = the
 * job's; TCs = [cxi] tcs; resource limits from [cxi] limits: max =
 * min(configured max, device maximum), reserved = configured res or
 * def x allocated cores, capped at max; TLE max = reserved.  Services are
 * matched by uid and exact VNI set, never by svc id (the driver reuses ids).
 */
#ifndef FMB_SVC_H
#define FMB_SVC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "cxi_abi.h"
#include "cxilib.h"

struct job_facts {
    char id[129];
    uint32_t uid;
    uint16_t vnis[CXI_SVC_MAX_VNIS];
    unsigned nvnis;
    unsigned ncores; /* allocated on this node; 0: unknown, counts as 1 */
    unsigned tcs;    /* SLINGSHOT_TCS mask */
    bool ended;      /* the broker has the job releasing or released */
};

void svc_recipe (const struct fmb_config *cfg,
                 const struct cxil_devinfo *dev,
                 const struct job_facts *job,
                 struct cxi_svc_desc *out);

/* Is 'd' this job's service (non-system, not the default, uid member and
 * the same VNI set)? */
bool svc_is_job (const struct cxi_svc_desc *d,
                 uint32_t uid,
                 const uint16_t *vnis,
                 unsigned nvnis);

/* After -ENOSPC: lower the first short reservation to what fail_info says
 * is free (or drop a pool-bound one).  Returns false if nothing is left
 * to lower.  'what' describes the change for a warning. */
bool svc_scale_back (struct cxi_svc_desc *d,
                     const struct cxi_svc_fail_info *fi,
                     char *what,
                     size_t len);

/* The device maximum of resource type t from devinfo. */
uint16_t svc_dev_max (const struct cxil_devinfo *dev, int t);

/* Human-readable descriptor (for --dry-run and errors). */
void svc_print (FILE *f, const char *devname, const struct cxi_svc_desc *d);

extern const char *const svc_rsrc_names[CXI_RSRC_TYPE_MAX];

#endif

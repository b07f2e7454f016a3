/* jobrecord.h: the node's job record, the job's task environment.
 *
 * <state_dir>/<job>.env : the job's task environment on this node.
 * Written atomically by the root prolog after the CXI services exist,
 * owned by the job's uid, mode 0400, in a root-owned 0755 state dir;
 * nobody else can read it.  The root-only <job>.json record (services,
 * used for destruction) is separate and stays 0600 root.
 *
 * Readers (fmbroker-cxi env, the Slurm SPANK plugin) take the job's
 * variables from here instead of asking the broker once per task.  The
 * file is JSON:
 *   {"version":1,"job":"42","uid":1000,"services":2,
 *    "env":{"SLINGSHOT_VNIS":"1024","SLINGSHOT_DEVICES":"cxi0,cxi1",
 *           "SLINGSHOT_SVC_IDS":"5,6","SLINGSHOT_TCS":"0xa",...},
 *    "reason":"..."}
 * 'env' holds only devices with a service for the job, SLINGSHOT_DEVICES
 * and SLINGSHOT_SVC_IDS aligned; with services == 0 it holds neither
 * and 'reason' says why.  FI_CXI_COLL_JOB_STEP_ID is never in it (the
 * launcher adds it per step).  Writing and reading apply the same
 * checks, so a record that was written can always be read.
 */
#ifndef FMB_JOBRECORD_H
#define FMB_JOBRECORD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define JOBRECORD_DIR_DEFAULT "/run/fmbroker-cxi"
/* The node service's socket (fmbroker-cxi serve), in the state dir: the
 * Prolog= program and the SPANK plugin find it beside the records. */
#define JOBRECORD_SERVICE_SOCKET "service.sock"
#define JOBRECORD_VERSION        1
#define JOBRECORD_VARS_MAX       64    /* variables in env */
#define JOBRECORD_NAME_MAX       64    /* bytes of a variable name */
#define JOBRECORD_VALUE_MAX      4096  /* bytes of a value */
#define JOBRECORD_FILE_MAX       65536 /* bytes of the whole file */
#define JOBRECORD_SERVICES_MAX   64    /* NICs on a node */

struct jobrecord {
    char job[129];
    uint32_t uid;
    unsigned nservices; /* devices with a service for the job here */
    json_t *env;        /* object: NAME -> string value, owned */
    char reason[256];   /* why there is no service, when nservices==0 */
};

/* "<state_dir>/<job>.env"; -1 with EINVAL for a bad job id, ENAMETOOLONG. */
int jobrecord_path (char *out, size_t len, const char *state_dir, const char *job);

/* "<state_dir>/<job>.json": root's record of the job's facts and services
 * on this node (the node agent's, 0600); as jobrecord_path. */
int jobrecord_facts_path (char *out,
                          size_t len,
                          const char *state_dir,
                          const char *job);

/* Write the record atomically, owned by r->uid, mode 0400; creates
 * state_dir (0755) if needed.  Refuses a record jobrecord_read would
 * refuse (EINVAL, message naming the variable). */
int jobrecord_write (const char *state_dir,
                     const struct jobrecord *r,
                     struct fmb_error *e);

/* The record of a job that has no service on this node, and why (what
 * its steps tell its user; control characters shown as '?'). */
int jobrecord_write_reason (const char *state_dir,
                            const char *job,
                            uint32_t uid,
                            const char *reason,
                            struct fmb_error *e);

/* Read and check the record of 'job' into *r (cleared first; the caller
 * calls jobrecord_clear).  -1 with ENOENT when there is none, EACCES
 * when this user may not read it, EPERM when its owner or mode is not
 * what the prolog writes, EINVAL when its content is bad; the message
 * names the file. */
int jobrecord_read (const char *state_dir,
                    const char *job,
                    struct jobrecord *r,
                    struct fmb_error *e);

void jobrecord_clear (struct jobrecord *r); /* frees env */

/* Removes <job>.env (epilog).  0 if it was not there. */
int jobrecord_remove (const char *state_dir, const char *job, struct fmb_error *e);

/* Is 'name' a variable name a record may hold ([A-Z_][A-Z0-9_]*, at
 * most JOBRECORD_NAME_MAX bytes)? */
int jobrecord_valid_name (const char *name);

#endif

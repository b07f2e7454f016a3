/* facts.h: a job's facts on this node (uid, VNIs, cores, TCs), from the
 * flags, this node's record of the job (STATE_DIR/JOB.json, written by
 * the prolog before it creates anything, so that a crash leaves enough
 * to clean up), or the broker, in that order. */
#ifndef FMB_AGENT_FACTS_H
#define FMB_AGENT_FACTS_H

#include <stddef.h>

#include <jansson.h>

#include "agent.h"
#include "svc.h"

/* STATE_DIR/JOB.json */
void facts_record_path (struct agent *ag, char *out, size_t len);

/* *f from the flags, the record or the broker (prolog --run: the RUN
 * made from this node first).  *env (may be NULL) gets the broker's env
 * map when it was asked.  -1 with errno and a message. */
int facts_get (struct agent *ag,
               struct job_facts *f,
               json_t **env,
               struct fmb_error *error);

/* Write this node's record of the job with its services (a JSON array
 * of {device, svc_id}); logs and returns -1 if it cannot. */
int facts_write_record (struct agent *ag, const struct job_facts *f, json_t *services);

#endif

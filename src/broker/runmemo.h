/* runmemo.h: RUN bodies already taken, so a node's repeated RUN costs O(1).
 *
 * Under Slurm's launch setup every node of a job RUNs it when the job's
 * first step starts there: 10,000 identical requests for a full-machine
 * job.  Checking each against the stored request means expanding and
 * comparing the whole node list (O(nodes) a call, O(nodes^2) a job).
 * The memo remembers, per job, the exact body of a RUN that matched the
 * stored request, and the job's creation time: a body byte for byte the
 * same, for the same live job, is the same request.  It is a hint only:
 * whatever it says is checked against the store's row (its creation
 * time, its state), and a miss costs one full check.  Bounded: one slot
 * per job id hash, small bodies only.
 */
#ifndef FMB_RUNMEMO_H
#define FMB_RUNMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUNMEMO_BODY_MAX 1024 /* a hostlist body; expanded lists are not kept */

struct runmemo;

struct runmemo *runmemo_create (unsigned slots);
void runmemo_destroy (struct runmemo *m);

/* Was 'body' taken as job 'job''s RUN while the job created at
 * 'created_ms' was live? */
bool runmemo_has (const struct runmemo *m,
                  const char *job,
                  int64_t created_ms,
                  const char *body,
                  size_t len);
/* 'body' matched the stored request of 'job' (created at 'created_ms'). */
void runmemo_put (struct runmemo *m,
                  const char *job,
                  int64_t created_ms,
                  const char *body,
                  size_t len);

#endif

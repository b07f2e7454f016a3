/* spool.h: node reports the broker did not get yet.
 *
 * A report ("the services of job J on node N are created / destroyed /
 * failed") that cannot be delivered is kept in STATE_DIR/reports/J@N.json
 * (0600, in a 0700 directory), and the next agent run, or
 * `fmbroker-cxi report --pending` from a timer, delivers it.  One file per
 * job and node: a later report supersedes an earlier one, as it does at
 * the broker.  Without this a VNI would stay quarantined until someone
 * ran the epilog again by hand. */
#ifndef FMB_AGENT_SPOOL_H
#define FMB_AGENT_SPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct spooled_report {
    char job[129];
    char node[65];
    char cxi[16];     /* created, destroyed, failed */
    char detail[513]; /* "" if none */
    int64_t at_ms;    /* when the agent made it */
    /* a 'failed' that ends services this node reported made, with that
     * 'created' not delivered yet: sent after it (the broker reads a
     * live job's failure after 'created' as the end's, which drains the
     * node, and after nothing as the setup's) */
    bool after_created;
};

/* What is done with one job's report on this node (kept, sent, dropped)
 * happens under its lock, across the node service's threads and the
 * agent's processes: a kept 'created' sent by one must never overtake the
 * 'destroyed' another just sent, nor a drop lose a report kept since.
 * Other jobs' reports do not wait for it: each job and node locks one
 * byte of STATE_DIR/reports/.lock (an open file description's lock; two
 * pairs may share a byte, which only serialises them), so a job's setup
 * never waits behind another job's delivery to a slow broker.  Returns
 * the lock's fd; -EAGAIN when 'wait' is false and another holds it;
 * another -errno when there is no lock to be had (callers go on
 * without: a report is worth more than its order). */
int spool_lock (const char *state_dir, const char *job, const char *node, bool wait);
void spool_unlock (int lock);

/* Keep 'r', replacing any report of the same job and node. */
int spool_put (const char *state_dir,
               const struct spooled_report *r,
               struct fmb_error *error);

/* The kept report of job and node into 'r': 1, or 0 when there is
 * none (or none this agent could read). */
int spool_get (const char *state_dir,
               const char *job,
               const char *node,
               struct spooled_report *r,
               struct fmb_error *error);

/* Forget the report of job and node (delivered or superseded); 0 if
 * there was none. */
int spool_drop (const char *state_dir,
                const char *job,
                const char *node,
                struct fmb_error *error);

/* Call cb for each kept report, oldest first; stops when cb returns
 * non-zero and returns that.  A file that is not a valid report is
 * renamed to NAME.bad (kept for a look, never delivered) with a warning. */
typedef int (*spool_f) (const struct spooled_report *r, void *arg);
int spool_each (const char *state_dir, spool_f cb, void *arg, struct fmb_error *error);

#endif

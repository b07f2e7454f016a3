/* spankcore.h: the Slurm-independent part of the fmbroker SPANK plugin,
 * so that it can be unit-tested without Slurm: the plugstack.conf
 * arguments, the user options and what a step gets from the node's job
 * record.
 *
 * The plugin itself (fmbroker_spank.c) only moves values between these
 * functions and Slurm.
 */
#ifndef FMB_SPANKCORE_H
#define FMB_SPANKCORE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "jobrecord.h"

enum spank_policy { SPANK_FAIL_CLOSED, SPANK_FAIL_OPEN };

#define SPANK_HWCOLL_MAX 8 /* "auto" */

/* plugstack.conf: "required fmbroker_spank.so [KEY=VALUE ...]" */
struct spank_conf {
    enum spank_policy policy; /* policy=fail_closed|fail_open */
    unsigned allowed_tcs;     /* tcs=LIST: classes users may ask for */
    char config[1024];        /* config=FILE: fmbroker.conf (step cleanup) */
    char state_dir[1024];     /* state_dir=DIR: the node's job records, as
                               * the node prolog's --state-dir */
    unsigned step_timeout_s;  /* step_timeout=S: step cleanup, 1..30 */
};

#define SPANK_DEFAULT_TCS 0xe /* LOW_LATENCY, BULK_DATA, BEST_EFFORT */
/* The node epilog: slurm.conf's Epilog= (named in the message that
 * refuses a plugstack.conf of the plugin's old hooks). */
#define SPANK_EPILOG_PATH "/usr/sbin/fmbroker-slurm-prolog"

/* Defaults, then each "key=value" of argv; -1 with EINVAL and a message
 * naming the argument for an unknown key or a bad value. */
int spank_conf_parse (struct spank_conf *c, int argc, char **argv, struct fmb_error *e);

/* The user options.  Each returns -1 with EINVAL and a message that says
 * what the option takes. */
int spank_parse_hwcoll (const char *arg,
                        char out[SPANK_HWCOLL_MAX],
                        struct fmb_error *e);
int spank_parse_vni_count (const char *arg, unsigned *count, struct fmb_error *e);
/* A traffic-class list ("LOW_LATENCY,BEST_EFFORT", as [cxi] tcs) that
 * must lie within 'allowed'; *mask gets the classes. */
int spank_parse_tcs (const char *arg,
                     unsigned allowed,
                     unsigned *mask,
                     struct fmb_error *e);

/* What the step gets on this node.  Reads the job's record into *r:
 *   1  the job has its CXI services here: r->env is the environment;
 *   0  the job has no VNIs because the user asked for none (vni_count_zero);
 *  -1  no isolation (no record, a bad one, or no service here): 'e' says
 *      why, naming the file or giving the prolog's reason.
 * The caller clears *r in every case. */
int spank_step_record (const char *state_dir,
                       const char *job,
                       bool vni_count_zero,
                       struct jobrecord *r,
                       struct fmb_error *e);

/* The isolation verdict, taken as root from the prolog's root-only
 * record <state_dir>/<job>.json (the <job>.env record belongs to the
 * job's user, who could rewrite it, and a step's --fmb-vnis is the
 * user's word too).  0: the job has services here, or has no VNIs at
 * all; -1 with 'e' saying why: no record (the prolog did not run or
 * failed early), a record others could change, or VNIs without a
 * service. */
int spank_root_verdict (const char *state_dir, const char *job, struct fmb_error *e);

/* How many CPUs a Slurm CPU list names ("0-3,8,10-11": 7), as the step's
 * credential gives this node's (S_JOB_ALLOC_CORES); -1 for anything else
 * (an empty list, a range backwards, a number past 1048575). */
int spank_cpu_count (const char *list);

#endif

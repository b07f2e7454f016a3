/* runopts.h: a RUN request's user options (PUT /v1/jobs/{job}), typed,
 * and the one place their values are checked.  Every caller of RUN reads
 * them in its own spelling: the CLI's run-job (--vni-count 2), the SPANK
 * plugin (--fmb-vnis=2), slurmd's Prolog= (SPANK_FMB_VNIS=2, slurmhook.c),
 * the Flux jobtap plugin (attributes.system.fmbroker.vnis); each hands
 * the strings and its own names here, and a refusal names the option as
 * that caller's user wrote it.  The broker (jobs_run.c) reads typed JSON
 * and words its own refusals, so it uses the rules alone
 * (run_hwcoll_parse, run_vni_count_ok, run_ncores_ok and
 * fmb_config_parse_tcs_within).
 *
 * Pure: jansson and src/common, no I/O, no OpenSSL; the broker and the
 * SPANK plugin (which never calls the broker itself) link it. */
#ifndef FMB_RUNOPTS_H
#define FMB_RUNOPTS_H

#include <stdbool.h>

#include <jansson.h>

#include "error.h"

#define RUN_VNI_COUNT_MAX 4       /* the API's bound; [vni] max_per_job may be lower */
#define RUN_NCORES_MAX    1000000 /* cores per node; the broker's bound */
#define RUN_TCS_ALL       0xf     /* every traffic class: the broker checks its own */

enum run_hwcoll {
    RUN_HWCOLL_UNSET, /* not asked: the broker's [hwcoll] mode decides */
    RUN_HWCOLL_AUTO,
    RUN_HWCOLL_ON,
    RUN_HWCOLL_OFF,
};

/* The options, in the order a RUN body lists them. */
enum run_opt {
    RUN_OPT_NODES,     /* a hostlist, sent as given (compressed) */
    RUN_OPT_NCORES,    /* cores per node; 0: not known */
    RUN_OPT_HWCOLL,    /* on, off or auto */
    RUN_OPT_VNI_COUNT, /* 0..vni_max */
    RUN_OPT_TCS,       /* traffic-class names or a 0xN mask */
    RUN_OPT_COUNT
};

struct run_options {
    const char
        *nodes; /* borrowed: the caller keeps it until to_json; NULL: not given */
    unsigned node_count; /* the names 'nodes' expands to */
    unsigned ncores;     /* 0: not given */
    enum run_hwcoll hwcoll;
    int vni_count;    /* -1: not given */
    unsigned tcs;     /* a traffic-class mask; 0: not given */
    unsigned vni_max; /* bounds the checks use (run_options_init) */
    unsigned allowed_tcs;
};

/* Nothing given; vni_count checked against 'vni_max' (at most
 * RUN_VNI_COUNT_MAX), tcs against 'allowed_tcs' (RUN_TCS_ALL when the
 * caller does not know the cluster's). */
void run_options_init (struct run_options *o, unsigned vni_max, unsigned allowed_tcs);

/* One option's text into 'o'.  'name' is how the caller's user spells
 * the option, separator included ("--fmb-vnis=", "--vni-count "): a bad
 * value is -EINVAL (errno too) with "NAME VALUE: what it takes" in
 * 'error', and 'o' unchanged. */
int run_option_parse (struct run_options *o,
                      enum run_opt which,
                      const char *value,
                      const char *name,
                      struct fmb_error *error);

/* Every option of 'values' that is not NULL, in order; the first bad one
 * is the error, as run_option_parse's. */
int run_options_parse (struct run_options *o,
                       const char *const values[RUN_OPT_COUNT],
                       const char *const names[RUN_OPT_COUNT],
                       struct fmb_error *error);

/* The options given into the RUN body 'body' ("nodes", "ncores",
 * "hwcoll", "vni_count", "tcs" as a 0xN mask); -ENOMEM. */
int run_options_to_json (const struct run_options *o,
                         json_t *body,
                         struct fmb_error *error);

/* The rules alone, for the broker. */
int run_hwcoll_parse (const char *s);            /* an enum run_hwcoll, or -1 */
const char *run_hwcoll_name (enum run_hwcoll h); /* NULL for UNSET */
bool run_vni_count_ok (long long n, unsigned vni_max);
bool run_ncores_ok (long long n);

#endif

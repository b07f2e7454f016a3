/* stepclean.h: the SPANK plugin's step-end call to the broker, built as a
 * module of its own, fmbroker_spank_clean.so, next to the plugin.
 *
 * Why apart: OpenSSL, which the call needs for a broker reached over
 * TLS, costs every process that loads it a few milliseconds (libcurl,
 * which this used before, tens: bench/RESULTS.md, Slurm launch cost), and
 * every srun, sbatch, salloc and slurmstepd loads the plugin; only node 0
 * of a step of a job with a multicast reservation needs it, once, when
 * the step ends (and only when no node service takes the step's end).
 * The plugin dlopen()s this module then. */
#ifndef FMB_SPANK_STEPCLEAN_H
#define FMB_SPANK_STEPCLEAN_H

#include <stddef.h>

#define SPANK_CLEAN_MODULE "fmbroker_spank_clean.so"
#define SPANK_CLEAN_SYMBOL "fmb_spank_clean_step"

/* DELETE /v1/jobs/JOB/steps/STEP at the broker that CONFIG names (its
 * socket, or its TLS URL with the node's agent token), within timeout_s.
 * 0 when the broker took it; -1 with why (what follows "step cleanup").
 * 'config' may be missing: the built-in defaults apply. */
typedef int (*spank_clean_step_fn) (const char *config,
                                    const char *job,
                                    const char *step,
                                    unsigned timeout_s,
                                    char *why,
                                    size_t len);
int fmb_spank_clean_step (const char *config,
                          const char *job,
                          const char *step,
                          unsigned timeout_s,
                          char *why,
                          size_t len);

#endif

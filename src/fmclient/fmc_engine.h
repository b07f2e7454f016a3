/* fmc_engine.h: the request engine around the curl multi handle
 * (engine.c); fmclient's own.  The loop-facing verbs are public
 * (fmclient.h: fmc_pollfds, fmc_process, fmc_hold, ...). */
#ifndef FMB_FMC_ENGINE_H
#define FMB_FMC_ENGINE_H

#include "fmclient_private.h"

/* libcurl's process-wide set-up, once. */
int fmc_engine_global_init (struct fmb_error *error);
/* fmc's multi handle, its socket and timer callbacks and connection
 * caps; fmc_engine_cleanup frees it with every request still live. */
int fmc_engine_init (struct fmc *fmc, struct fmb_error *error);
void fmc_engine_cleanup (struct fmc *fmc);

/* Hand a new request ('r' NULL: out of memory) to the engine; it now
 * counts as in flight.  It leaves at once, unless it would change the FM
 * while the caller holds such calls back ('follow_up': the next step of
 * a call already let go). */
int fmc_req_submit (struct fmc_req *r, bool follow_up, struct fmb_error *error);

#endif

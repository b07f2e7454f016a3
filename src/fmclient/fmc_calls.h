/* fmc_calls.h: the FM dialect's requests (calls.c); fmclient's own. */
#ifndef FMB_FMC_CALLS_H
#define FMB_FMC_CALLS_H

#include "fmclient_private.h"

/* A job id fit for the URL path: [A-Za-z0-9._-], 1..256 bytes. */
int fmc_check_id (const char *id, struct fmb_error *error);

/* The POST body that creates 'fm_job_id' (malloc'd), NULL when out of
 * memory. */
char *fmc_create_body (const char *fm_job_id, unsigned mcast_limit);

#endif

/* fmc_session.h: the FM session, credentials and token (session.c);
 * fmclient's own. */
#ifndef FMB_FMC_SESSION_H
#define FMB_FMC_SESSION_H

#include <jansson.h>

#include "fmclient_private.h"

/* At fmc_create: the credential files for fmc->cfg.auth, readable and
 * private; basic's password kept in fmc->passwd. */
int fmc_session_check (struct fmc *fmc, struct fmb_error *error);

/* Run 'r' now, or park it until a token is there (fetching one).  On
 * failure the request is completed with FMC_RETRYABLE rather than lost. */
void fmc_req_dispatch (struct fmc_req *r);

/* The token endpoint's answer to a fetch: the token kept, or the fetch
 * failed; completes 'r'. */
void fmc_session_token_answer (struct fmc_req *r,
                               long http,
                               json_t *body,
                               struct fmc_result *res);

/* Complete the calls parked for a token whose deadline passed. */
void fmc_session_expire_waiting (struct fmc *fmc);

#endif

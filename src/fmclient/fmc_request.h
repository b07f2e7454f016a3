/* fmc_request.h: one FM request over libcurl (request.c); fmclient's own. */
#ifndef FMB_FMC_REQUEST_H
#define FMB_FMC_REQUEST_H

#include "fmclient_private.h"

/* Zero a secret string, then free it (NULL is fine). */
void fmc_wipe_free (char *s);

/* A request for 'op' on 'path' (relative to the base URL; for messages
 * when it is the token endpoint or the login), taking 'body' (even on
 * failure); NULL when out of memory.  It is in fmc's books at once. */
struct fmc_req *fmc_req_new (struct fmc *fmc,
                             enum fmc_op op,
                             const char *method,
                             const char *path,
                             char *body,
                             fmc_done_f cb,
                             void *arg);
/* Out of the books, its easy handle kept for reuse; NULL is fine. */
void fmc_req_free (struct fmc_req *r);
/* Give an easy handle back (off the multi, reset and kept, or freed). */
void fmc_easy_put (struct fmc *fmc, CURL *e);

/* Put its easy handle on the multi, with every option; -1 if curl
 * cannot. */
int fmc_req_start (struct fmc_req *r, struct fmb_error *error);

/* Complete it: 'res' filled with the status, the HTTP status and the
 * error text (any token in it masked), the observer and the callback
 * run, the request freed. */
void fmc_req_finish (struct fmc_req *r,
                     enum fmc_status status,
                     long http,
                     const char *error_text,
                     struct fmc_result *res);

/* Append 'r' to the queue 'head'/'tail' ('waiting', 'held' or 'kept'). */
void fmc_req_enqueue (struct fmc_req **head, struct fmc_req **tail, struct fmc_req *r);

#endif

/* fmc_reply.h: what the FM's answers mean (reply.c); fmclient's own.
 * The pure parsers are public (fmclient.h: fmc_reply_job,
 * fmc_reply_list). */
#ifndef FMB_FMC_REPLY_H
#define FMB_FMC_REPLY_H

#include <jansson.h>

#include "fmclient_private.h"

/* Complete 'r' (not a token fetch, not a listing handed to the parser
 * thread) from the FM's answer: 'http' and its JSON 'body' (NULL if
 * none or not JSON). */
void fmc_reply_answer (struct fmc_req *r,
                       long http,
                       json_t *body,
                       struct fmc_result *res);

/* A listing's answer into r->list_*: pure, so that it runs on the parser
 * thread as well as inline.  fmc_reply_list_finish, on the loop: call
 * back with what it found. */
void fmc_reply_list_parse (struct fmc_req *r, json_t *body);
void fmc_reply_list_finish (struct fmc_req *r);

#endif

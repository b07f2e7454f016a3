/* apiclient.h: one call to fmbrokerd's REST API over its Unix socket,
 * for the programs that talk to it (fmbroker, fmbroker-cxi). */
#ifndef FMB_APICLIENT_H
#define FMB_APICLIENT_H

#include <jansson.h>

#include "error.h"

struct api_reply {
    long status;  /* the HTTP status */
    json_t *body; /* the JSON answer (owned), or NULL */
};

/* 0 when the broker answered (any status: the caller judges it); -1 with
 * EHOSTUNREACH and a message naming the socket when it could not be
 * reached.  'bearer' (may be NULL) is sent as Authorization: Bearer. */
int api_client_call (const char *socket,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error);

#endif

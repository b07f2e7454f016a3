/* apiclient.h: one call to fmbrokerd's REST API, over its Unix socket or,
 * from hosts without it (compute nodes), over its TLS listener with a
 * bearer token; for the programs that talk to it (fmbroker, fmbroker-cxi). */
#ifndef FMB_APICLIENT_H
#define FMB_APICLIENT_H

#include <jansson.h>

#include "config.h"
#include "error.h"

#define API_TOKEN_MAX 255

/* Where the broker is. */
struct api_target {
    const char *socket; /* the Unix socket, unless url is set */
    /* https://HOST:PORT, or an ordered comma-separated list of them (an
     * active broker and its standbys; config.c normalised it), or NULL */
    const char *url;
    const char *ca_file; /* verifies the broker's certificate; NULL: system CAs */
    char token[API_TOKEN_MAX + 1]; /* for url: [api] client_token_file */
    /* Why there is no token: a user who may not read the file can still
     * call with a bearer of their own (a job's session token); other
     * calls fail with it. */
    char token_problem[FMB_ERROR_TEXT_MAX];
};

/* From the configuration: 'socket' if not NULL (a command-line override),
 * else [api] broker_url with the token of [api] client_token_file (which
 * must be private to its owner and hold one token; one this user may not
 * read, or that is not so, is not an error until a call needs it: the
 * call fails, saying why), else [api] socket. */
void api_target_init (struct api_target *t,
                      const struct fmb_config *cfg,
                      const char *socket);
/* A --broker-url option: 'urls' (one https URL or an ordered comma list)
 * replaces [api] broker_url in 'cfg', checked as the configuration is. */
int api_config_broker_url (struct fmb_config *cfg,
                           const char *urls,
                           struct fmb_error *error);
/* Wipe the token. */
void api_target_clear (struct api_target *t);

struct api_reply {
    long status;  /* the HTTP status */
    json_t *body; /* the JSON answer (owned), a JSON string holding an
                   * answer that is not JSON (/metrics), or NULL */
};

/* 0 when the broker answered (any status: the caller judges it); -1 with
 * EHOSTUNREACH and a message naming the socket or URL when it could not
 * be reached.  With a list of URLs, the brokers are tried in order within
 * the one timeout: the next after a failure to connect (or a connection
 * that died before the answer), each with an equal share of the time left
 * to connect; the message names every one tried.  'bearer' (may be NULL) is sent as
 * Authorization: Bearer, in place of the target's token. */
int api_client_call (const struct api_target *t,
                     long timeout_s,
                     const char *method,
                     const char *path,
                     const char *body,
                     const char *bearer,
                     struct api_reply *ret,
                     struct fmb_error *error);

/* How many URLs the target's list holds (0 for the socket), and the i-th. */
unsigned api_target_url_count (const struct api_target *t);
int api_target_url (const struct api_target *t, unsigned i, char *out, size_t len);

#endif

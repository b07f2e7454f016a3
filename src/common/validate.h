/* validate.h: checks for everything that enters through the REST API.
 * Pure functions (no broker state), unit-tested and fuzzed. */
#ifndef FMB_VALIDATE_H
#define FMB_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#define JOB_ID_MAX    128 /* job ids end up in FM URLs */
#define STEP_ID_MAX   256 /* bytes of valid UTF-8 (Flux job-id paths contain '/') */
#define NODE_NAME_MAX 64
#define USER_NAME_MAX 256 /* directories' names: user@a.long.domain */
#define NODES_MAX     65536
#define UID_MAX_VALID 4294967294u /* (uid_t)-1 is "no uid" */

/* [A-Za-z0-9._-]{1,128}, and not "." or "..". */
bool valid_job_id (const char *s);
/* 1..256 bytes of valid UTF-8 (no overlongs, no surrogates), without
 * control characters (C0, DEL, C1). */
bool valid_step_id (const char *s, size_t len);
/* A host name: [A-Za-z0-9._-]{1,64}, not starting with '.' or '-'. */
bool valid_node_name (const char *s);
/* A user name: [A-Za-z0-9._@\\+$-]{1,256} (user@domain, DOMAIN\\user). */
bool valid_user_name (const char *s);
/* Valid UTF-8 of 'len' bytes. */
bool valid_utf8 (const char *s, size_t len);

/* Percent-decode 'in' (strictly: '%' needs two hex digits; %00 refused)
 * into 'out' of 'outsize' bytes, NUL-terminated.  Returns the decoded
 * length, or -1 if malformed or too long. */
long percent_decode (const char *in, size_t inlen, char *out, size_t outsize);

/* Path parameters of an API route, percent-decoded and validated. */
struct api_params {
    char job[JOB_ID_MAX + 1];
    char step[STEP_ID_MAX + 1];
    size_t step_len;
    char node[NODE_NAME_MAX + 1];
};

/* Match a raw (undecoded) URL path against a route pattern such as
 * "/v1/jobs/{job}/steps/{step}": split on '/' first, then decode each
 * parameter, so an encoded '/' can never change the route.  {step}, when
 * last, takes the rest of the path.  1: match (params filled); 0: no
 * match; -1: the shape matches but a parameter is invalid ('why' says). */
int api_match_path (const char *pattern,
                    const char *path,
                    struct api_params *params,
                    char *why,
                    size_t whylen);

#endif

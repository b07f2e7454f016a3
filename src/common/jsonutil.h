/* jsonutil.h: small helpers over jansson used by every component. */
#ifndef FMB_JSONUTIL_H
#define FMB_JSONUTIL_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"

/* Parse 'len' bytes as a JSON document whose top level is an object.
 * Duplicate keys are refused (two values for one key is ambiguous input,
 * not something to resolve silently).  Returns a new reference or NULL
 * with EINVAL and a message naming line and column. */
json_t *fmb_json_load_object (const char *buf, size_t len, struct fmb_error *error);

/* Read 'fd' to its end (at most 'cap' bytes: EFBIG beyond) in a few
 * read(2)s and parse it as fmb_json_load_object does.  Why not
 * json_loadfd: it reads one byte per read(2), some 500 system calls for
 * a job record, in every step's slurmstepd before the tasks start. */
json_t *fmb_json_load_fd (int fd, size_t cap, struct fmb_error *error);

/* Compact, key-sorted serialisation (stable for comparisons and logs).
 * Returns a malloc'd string or NULL with ENOMEM. */
char *fmb_json_dump (const json_t *value);

#endif

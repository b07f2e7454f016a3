/* error.h: the error convention shared by every fmbroker library.
 *
 * A failing function returns -1 (or NULL) with errno set and, when the
 * caller passed a struct fmb_error, a human-readable message in it.  The
 * innermost layer states the fact; each outer layer puts its context in
 * front ("job '42': store: disk I/O error").
 */
#ifndef FMB_ERROR_H
#define FMB_ERROR_H

#define FMB_ERROR_TEXT_MAX 256

struct fmb_error {
    char text[FMB_ERROR_TEXT_MAX];
};

/* Fill 'e' (may be NULL) from a printf format.  Keeps errno, returns -1,
 * and marks a truncated message with a trailing "+". */
int fmb_errorf (struct fmb_error *e, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Put a prefix in front of the text already in 'e'.  Keeps errno, returns -1. */
int fmb_error_prefix (struct fmb_error *e, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

#endif

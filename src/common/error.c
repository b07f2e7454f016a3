/* error.c: fill and prefix struct fmb_error; see error.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static void mark_truncated (struct fmb_error *e, int n)
{
    if (n >= (int)sizeof (e->text))
        e->text[sizeof (e->text) - 2] = '+';
}

int fmb_errorf (struct fmb_error *e, const char *fmt, ...)
{
    int saved = errno;
    if (e) {
        va_list ap;
        va_start (ap, fmt);
        int n = vsnprintf (e->text, sizeof (e->text), fmt, ap);
        va_end (ap);
        mark_truncated (e, n);
    }
    errno = saved;
    return -1;
}

int fmb_error_prefix (struct fmb_error *e, const char *fmt, ...)
{
    int saved = errno;
    if (e) {
        char prefix[FMB_ERROR_TEXT_MAX];
        char inner[FMB_ERROR_TEXT_MAX];
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (prefix, sizeof (prefix), fmt, ap);
        va_end (ap);
        memcpy (inner, e->text, sizeof (inner));
        int n = snprintf (e->text, sizeof (e->text), "%s: %s", prefix, inner);
        mark_truncated (e, n);
    }
    errno = saved;
    return -1;
}

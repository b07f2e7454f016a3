/* fakejournal.c: a stand-in libsystemd.so.0 for tests (LD_LIBRARY_PATH).
 *
 * Our programs load libsystemd only when their stderr is the journal
 * (src/common/log.c); a test machine has no journald to receive the
 * records.  This library's sd_journal_send appends each record's fields,
 * one per line and a blank line after, to $FAKEJOURNAL_FILE, so that a
 * test can check what would have reached the journal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sd_journal_send (const char *format, ...);

int sd_journal_send (const char *format, ...)
{
    const char *path = getenv ("FAKEJOURNAL_FILE");
    FILE *f = path ? fopen (path, "a") : NULL;
    if (!f)
        return -2; /* -ENOENT: as if journald were not there */
    va_list ap;
    va_start (ap, format);
    /* the fields come as (format, argument) pairs up to a NULL format;
     * ours use one conversion each (%s or %d) */
    for (const char *fmt = format; fmt; fmt = va_arg (ap, const char *)) {
        va_list one;
        va_copy (one, ap);
        vfprintf (f, fmt, one);
        va_end (one);
        fputc ('\n', f);
        /* skip the argument the format used */
        const char *pct = strchr (fmt, '%');
        if (pct && pct[1] == 'd')
            (void)va_arg (ap, int);
        else if (pct)
            (void)va_arg (ap, const char *);
    }
    va_end (ap);
    fputc ('\n', f);
    fclose (f);
    return 0;
}

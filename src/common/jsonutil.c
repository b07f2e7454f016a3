/* jsonutil.c: see jsonutil.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonutil.h"

json_t *fmb_json_load_object (const char *buf, size_t len, struct fmb_error *error)
{
    json_error_t jerr;
    json_t *v = json_loadb (buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        errno = EINVAL;
        fmb_errorf (error,
                    "invalid JSON at line %d column %d: %s",
                    jerr.line,
                    jerr.column,
                    jerr.text);
        return NULL;
    }
    if (!json_is_object (v)) {
        json_decref (v);
        errno = EINVAL;
        fmb_errorf (error, "invalid JSON: top level must be an object");
        return NULL;
    }
    return v;
}

json_t *fmb_json_load_fd (int fd, size_t cap, struct fmb_error *error)
{
    size_t len = 0, size = 4096;
    char *buf = malloc (size);
    if (!buf) {
        errno = ENOMEM;
        fmb_errorf (error, "out of memory");
        return NULL;
    }
    for (;;) {
        if (len == size) {
            if (size > cap)
                break; /* too large: said below */
            char *bigger = realloc (buf, size * 2);
            if (!bigger) {
                free (buf);
                errno = ENOMEM;
                fmb_errorf (error, "out of memory");
                return NULL;
            }
            buf = bigger;
            size *= 2;
        }
        ssize_t n = read (fd, buf + len, size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            free (buf);
            errno = saved;
            fmb_errorf (error, "cannot read: %s", strerror (errno));
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > cap) {
        free (buf);
        errno = EFBIG;
        fmb_errorf (error, "larger than %zu bytes", cap);
        return NULL;
    }
    json_t *v = fmb_json_load_object (buf, len, error);
    free (buf);
    return v;
}

char *fmb_json_dump (const json_t *value)
{
    char *s = json_dumps (value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s)
        errno = ENOMEM;
    return s;
}

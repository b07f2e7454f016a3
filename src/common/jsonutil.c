/* jsonutil.c: see jsonutil.h. */
#include <errno.h>
#include <stdlib.h>

#include "fileutil.h"
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
    char *buf;
    size_t len;
    if (fmb_read_fd (fd, cap, &buf, &len, error) < 0)
        return NULL;
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

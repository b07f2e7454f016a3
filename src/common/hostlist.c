/* hostlist.c: see hostlist.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

#define NAME_MAX_LEN 256

/* Expand one item (no top-level commas) with prefix 'done' so far. */
static int expand_item (const char *item,
                        const char *done,
                        json_t *out,
                        struct fmb_error *error)
{
    const char *open = strchr (item, '[');
    char name[NAME_MAX_LEN];
    if (!open) {
        if (snprintf (name, sizeof (name), "%s%s", done, item) >= (int)sizeof (name) ||
            !*name) {
            errno = EINVAL;
            return fmb_errorf (error, "host name too long or empty");
        }
        if (json_array_size (out) >= HOSTLIST_MAX) {
            errno = E2BIG;
            return fmb_errorf (error, "more than %d hosts", HOSTLIST_MAX);
        }
        return json_array_append_new (out, json_string (name));
    }
    const char *close = strchr (open, ']');
    if (!close) {
        errno = EINVAL;
        return fmb_errorf (error, "'%s': unbalanced '['", item);
    }
    char prefix[NAME_MAX_LEN], ranges[NAME_MAX_LEN];
    if (snprintf (prefix, sizeof (prefix), "%s%.*s", done, (int)(open - item), item) >=
            (int)sizeof (prefix) ||
        snprintf (ranges, sizeof (ranges), "%.*s", (int)(close - open - 1), open + 1) >=
            (int)sizeof (ranges)) {
        errno = EINVAL;
        return fmb_errorf (error, "'%s': too long", item);
    }
    char *save = NULL;
    for (char *r = strtok_r (ranges, ",", &save); r; r = strtok_r (NULL, ",", &save)) {
        char *dash = strchr (r, '-'), *end;
        int width = (int)(dash ? (size_t)(dash - r) : strlen (r));
        unsigned long lo = strtoul (r, &end, 10), hi = lo;
        if (end == r || (dash ? end != dash : *end != '\0')) {
            errno = EINVAL;
            return fmb_errorf (error, "'%s': bad range '%s'", item, r);
        }
        if (dash) {
            hi = strtoul (dash + 1, &end, 10);
            if (end == dash + 1 || *end || hi < lo) {
                errno = EINVAL;
                return fmb_errorf (error, "'%s': bad range '%s'", item, r);
            }
        }
        if (hi - lo >= HOSTLIST_MAX) {
            errno = E2BIG;
            return fmb_errorf (error, "'%s': range too large", item);
        }
        for (unsigned long n = lo; n <= hi; n++) {
            char next[NAME_MAX_LEN];
            if (width > 20 ||
                snprintf (next, sizeof (next), "%s%0*lu", prefix, width, n) >=
                    (int)sizeof (next)) {
                errno = EINVAL;
                return fmb_errorf (error, "'%s': host name too long", item);
            }
            if (expand_item (close + 1, next, out, error) < 0)
                return -1;
        }
    }
    return 0;
}

int hostlist_expand (const char *text, json_t *out, struct fmb_error *error)
{
    /* Split on commas outside brackets. */
    size_t len = strlen (text);
    char *item = malloc (len + 1);
    int depth = 0, rc = 0;
    size_t n = 0;
    if (!item)
        return fmb_errorf (error, "out of memory");
    for (size_t i = 0; i <= len && rc == 0; i++) {
        char c = text[i];
        if (c == '[')
            depth++;
        else if (c == ']')
            depth--;
        if ((c == ',' && depth == 0) || c == '\0') {
            item[n] = '\0';
            if (n > 0)
                rc = expand_item (item, "", out, error);
            n = 0;
            continue;
        }
        item[n++] = c;
    }
    free (item);
    if (rc == 0 && depth != 0) {
        errno = EINVAL;
        return fmb_errorf (error, "'%s': unbalanced brackets", text);
    }
    return rc;
}

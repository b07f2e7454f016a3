/* hostlist.c: see hostlist.h.
 *
 * Each comma-separated item is parsed whole first (literals and bracket
 * groups of ranges), its name count computed, and only then expanded, so
 * the work is bounded by the names produced: an item such as
 * "a[0-99]b[0-99]c[]" is refused at once rather than walked through. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostlist.h"

#define NAME_MAX_LEN 256
#define GROUPS_MAX   8  /* bracket groups in one name */
#define RANGES_MAX   64 /* ranges in one bracket group */
#define WIDTH_MAX    20

struct range {
    unsigned long lo, hi;
    int width; /* zero padding, from the first number's digits */
};

struct group {
    char prefix[NAME_MAX_LEN]; /* literal text before the '[' */
    struct range ranges[RANGES_MAX];
    int nranges;
    unsigned long count;
};

struct item {
    struct group groups[GROUPS_MAX];
    int ngroups;
    char suffix[NAME_MAX_LEN]; /* literal text after the last ']' */
    unsigned long count;       /* names it produces */
};

#define refuse(err, ...) (errno = EINVAL, fmb_errorf ((err), __VA_ARGS__))

/* A literal part of a name: no brackets. */
static int copy_literal (char *out, const char *s, size_t len, struct fmb_error *error)
{
    if (len >= NAME_MAX_LEN)
        return refuse (error, "host name too long");
    if (memchr (s, ']', len) || memchr (s, '[', len))
        return refuse (error, "unbalanced brackets in '%.*s'", (int)len, s);
    memcpy (out, s, len);
    out[len] = '\0';
    return 0;
}

/* "N" or "N-M", digits only. */
static int parse_range (const char *s,
                        size_t len,
                        struct range *r,
                        struct fmb_error *error)
{
    char buf[2 * WIDTH_MAX + 2], *end;
    if (len == 0 || len >= sizeof (buf))
        return refuse (error, "bad range '%.*s'", (int)len, s);
    memcpy (buf, s, len);
    buf[len] = '\0';
    char *dash = strchr (buf, '-');
    if (dash)
        *dash = '\0';
    r->width = (int)strlen (buf);
    if (buf[0] < '0' || buf[0] > '9' || r->width > WIDTH_MAX)
        return refuse (error, "bad range '%.*s'", (int)len, s);
    errno = 0;
    r->lo = r->hi = strtoul (buf, &end, 10);
    if (*end || errno)
        return refuse (error, "bad range '%.*s'", (int)len, s);
    if (dash) {
        if (dash[1] < '0' || dash[1] > '9')
            return refuse (error, "bad range '%.*s'", (int)len, s);
        r->hi = strtoul (dash + 1, &end, 10);
        if (*end || errno || r->hi < r->lo)
            return refuse (error, "bad range '%.*s'", (int)len, s);
    }
    if (r->hi - r->lo >= HOSTLIST_MAX)
        return refuse (error, "range '%.*s' too large", (int)len, s);
    return 0;
}

static int parse_item (const char *s,
                       size_t len,
                       struct item *it,
                       struct fmb_error *error)
{
    const char *end = s + len;
    it->ngroups = 0;
    it->count = 1;
    while (true) {
        const char *open = memchr (s, '[', (size_t)(end - s));
        if (!open)
            return copy_literal (it->suffix, s, (size_t)(end - s), error);
        if (it->ngroups == GROUPS_MAX)
            return refuse (
                error, "more than %d bracket groups in one name", GROUPS_MAX);
        struct group *g = &it->groups[it->ngroups++];
        if (copy_literal (g->prefix, s, (size_t)(open - s), error) < 0)
            return -1;
        const char *close = memchr (open, ']', (size_t)(end - open));
        if (!close)
            return refuse (error, "unbalanced '['");
        g->nranges = 0;
        g->count = 0;
        for (const char *r = open + 1; r <= close;) {
            const char *comma = memchr (r, ',', (size_t)(close - r));
            const char *rend = comma ? comma : close;
            if (memchr (r, '[', (size_t)(rend - r)))
                return refuse (error, "nested '['");
            if (g->nranges == RANGES_MAX)
                return refuse (error, "more than %d ranges in one bracket", RANGES_MAX);
            struct range *rg = &g->ranges[g->nranges++];
            if (parse_range (r, (size_t)(rend - r), rg, error) < 0)
                return -1;
            g->count += rg->hi - rg->lo + 1;
            r = rend + 1;
        }
        /* counts stay below 2^32 * 2^16 before this check: no overflow */
        if (g->count > HOSTLIST_MAX || it->count * g->count > HOSTLIST_MAX)
            return refuse (error, "more than %d hosts", HOSTLIST_MAX);
        it->count *= g->count;
        s = close + 1;
    }
}

/* The name for position 'pos[]' (a range and an offset per group). */
static int format_name (const struct item *it,
                        const int *rng,
                        const unsigned long *off,
                        char *out,
                        struct fmb_error *error)
{
    size_t n = 0;
    for (int i = 0; i < it->ngroups; i++) {
        const struct group *g = &it->groups[i];
        const struct range *r = &g->ranges[rng[i]];
        int w = snprintf (
            out + n, NAME_MAX_LEN - n, "%s%0*lu", g->prefix, r->width, r->lo + off[i]);
        if (w < 0 || (size_t)w >= NAME_MAX_LEN - n)
            return refuse (error, "host name too long");
        n += (size_t)w;
    }
    int w = snprintf (out + n, NAME_MAX_LEN - n, "%s", it->suffix);
    if (w < 0 || (size_t)w >= NAME_MAX_LEN - n)
        return refuse (error, "host name too long");
    if (n + (size_t)w == 0)
        return refuse (error, "empty host name");
    return 0;
}

static int expand_item (const struct item *it, json_t *out, struct fmb_error *error)
{
    int rng[GROUPS_MAX] = {0};
    unsigned long off[GROUPS_MAX] = {0};
    char name[NAME_MAX_LEN];
    if (json_array_size (out) + it->count > HOSTLIST_MAX) {
        errno = E2BIG;
        return fmb_errorf (error, "more than %d hosts", HOSTLIST_MAX);
    }
    for (unsigned long k = 0; k < it->count; k++) {
        if (format_name (it, rng, off, name, error) < 0)
            return -1;
        if (json_array_append_new (out, json_string (name)) < 0) {
            errno = ENOMEM;
            return fmb_errorf (error, "out of memory");
        }
        /* next position: the last group varies fastest, as Slurm's do */
        for (int i = it->ngroups - 1; i >= 0; i--) {
            const struct group *g = &it->groups[i];
            if (g->ranges[rng[i]].lo + ++off[i] <= g->ranges[rng[i]].hi)
                break;
            off[i] = 0;
            if (++rng[i] < g->nranges)
                break;
            rng[i] = 0;
        }
    }
    return 0;
}

int hostlist_expand (const char *text, json_t *out, struct fmb_error *error)
{
    struct item *it = malloc (sizeof (*it));
    if (!it) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    const char *s = text;
    int rc = 0;
    while (rc == 0 && *s) {
        /* an item ends at a comma outside brackets */
        const char *e = s;
        int depth = 0;
        for (; *e && !(*e == ',' && depth == 0); e++) {
            if (*e == '[')
                depth++;
            else if (*e == ']' && --depth < 0)
                break;
        }
        if (depth != 0) {
            errno = EINVAL;
            rc = fmb_errorf (error, "'%.64s': unbalanced brackets", text);
            break;
        }
        if (e > s) {
            rc = parse_item (s, (size_t)(e - s), it, error);
            if (rc == 0)
                rc = expand_item (it, out, error);
            else
                fmb_error_prefix (error, "'%.64s'", text);
        }
        s = *e ? e + 1 : e;
    }
    free (it);
    return rc;
}

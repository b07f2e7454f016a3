/* nodeproto.c: the node service's request, typed and on the wire
 * (nodeproto.h). */
#include "nodeproto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {
    [NODE_OP_NONE] = "?",
    [NODE_OP_SETUP] = "setup",
    [NODE_OP_END] = "end",
    [NODE_OP_STEP_END] = "step-end",
    [NODE_OP_WAIT] = "wait",
};

#define NOPS (sizeof (op_names) / sizeof (op_names[0]))

const char *node_op_name (enum node_op op)
{
    return (unsigned)op < NOPS ? op_names[op] : "?";
}

/* The string members, by key: one table for both directions. */
struct field {
    const char *key;
    size_t offset;
    size_t size;
};

#define FIELD(k, m)                                                                  \
    {                                                                                \
        k, offsetof (struct node_request, m), sizeof (((struct node_request *)0)->m) \
    }
static const struct field fields[] = {
    FIELD ("job", job),
    FIELD ("step", step),
    FIELD ("node", node),
    FIELD ("user", user),
    FIELD ("nodes", nodes),
    FIELD ("hwcoll", hwcoll),
    FIELD ("vni_count", vni_count),
    FIELD ("tcs", tcs),
};
#define NFIELDS (sizeof (fields) / sizeof (fields[0]))

struct out {
    char *buf;
    size_t len, used;
    bool full;
};

static void put (struct out *o, const char *key, const char *value)
{
    int n = snprintf (o->buf + o->used, o->len - o->used, "%s=%s\n", key, value);
    if (n < 0 || (size_t)n >= o->len - o->used)
        o->full = true;
    else
        o->used += (size_t)n;
}

int node_request_encode (const struct node_request *r,
                         char *buf,
                         size_t len,
                         struct fmb_error *e)
{
    struct out o = {.buf = buf, .len = len};
    char num[32];
    if (r->op == NODE_OP_NONE || (unsigned)r->op >= NOPS) {
        errno = EINVAL;
        return fmb_errorf (e, "a node service request without an operation");
    }
    int n = snprintf (buf, len, "%s %s\n", NODE_PROTO_MAGIC, op_names[r->op]);
    if (n < 0 || (size_t)n >= len)
        o.full = true;
    else
        o.used = (size_t)n;
    for (size_t i = 0; i < NFIELDS && !o.full; i++) {
        const char *v = (const char *)r + fields[i].offset;
        if (!*v)
            continue;
        if (strchr (v, '\n')) {
            /* the key only: a value may be the job's user's */
            errno = EINVAL;
            return fmb_errorf (
                e, "the node service request's %s holds a newline", fields[i].key);
        }
        put (&o, fields[i].key, v);
    }
    if (r->have_uid) {
        snprintf (num, sizeof (num), "%u", (unsigned)r->uid);
        put (&o, "uid", num);
    }
    if (r->ncores) {
        snprintf (num, sizeof (num), "%u", r->ncores);
        put (&o, "ncores", num);
    }
    if (r->early)
        put (&o, "early", "1");
    if (o.full || o.used + 2 > len) {
        errno = EMSGSIZE;
        return fmb_errorf (e, "the node service request is longer than %zu bytes", len);
    }
    buf[o.used++] = '\n';
    buf[o.used] = '\0';
    return (int)o.used;
}

static int number (const char *key,
                   const char *v,
                   unsigned long max,
                   unsigned long *out,
                   struct fmb_error *e)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul (v, &end, 10);
    if (!*v || *end || errno || n > max || *v == '-') {
        errno = EINVAL;
        return fmb_errorf (
            e, "the request's %s '%.32s' is not a number up to %lu", key, v, max);
    }
    *out = n;
    return 0;
}

/* One KEY=VALUE line into r. */
static int take (struct node_request *r,
                 const char *key,
                 const char *v,
                 struct fmb_error *e)
{
    unsigned long n;
    for (size_t i = 0; i < NFIELDS; i++) {
        if (strcmp (key, fields[i].key) != 0)
            continue;
        if (strlen (v) >= fields[i].size) {
            errno = EINVAL;
            return fmb_errorf (e,
                               "the request's %s is longer than %zu bytes",
                               key,
                               fields[i].size - 1);
        }
        memcpy ((char *)r + fields[i].offset, v, strlen (v) + 1);
        return 0;
    }
    if (strcmp (key, "uid") == 0) {
        if (number (key, v, 4294967294ul, &n, e) < 0)
            return -1;
        r->uid = (uint32_t)n;
        r->have_uid = true;
    } else if (strcmp (key, "ncores") == 0) {
        if (number (key, v, 1ul << 20, &n, e) < 0)
            return -1;
        r->ncores = (unsigned)n;
    } else if (strcmp (key, "early") == 0)
        r->early = strcmp (v, "1") == 0;
    return 0; /* unknown: a newer client's */
}

int node_request_decode (char *buf, struct node_request *r, struct fmb_error *e)
{
    memset (r, 0, sizeof (*r));
    char *line = buf, *nl = strchr (buf, '\n');
    size_t magic = strlen (NODE_PROTO_MAGIC);
    if (nl)
        *nl = '\0';
    if (strncmp (line, NODE_PROTO_MAGIC " ", magic + 1) != 0) {
        errno = EPROTO;
        return fmb_errorf (
            e, "not a node service request (%s expected)", NODE_PROTO_MAGIC);
    }
    for (unsigned i = 1; i < NOPS; i++)
        if (strcmp (line + magic + 1, op_names[i]) == 0)
            r->op = (enum node_op)i;
    if (r->op == NODE_OP_NONE) {
        errno = EPROTO;
        return fmb_errorf (
            e, "an unknown node service operation '%.32s'", line + magic + 1);
    }
    for (line = nl ? nl + 1 : NULL; line && *line; line = nl ? nl + 1 : NULL) {
        if ((nl = strchr (line, '\n')))
            *nl = '\0';
        char *eq = strchr (line, '=');
        if (!eq) {
            errno = EPROTO;
            return fmb_errorf (e, "a node service request line without '='");
        }
        *eq = '\0';
        if (take (r, line, eq + 1, e) < 0)
            return -1;
    }
    return 0;
}

/* runopts.c: a RUN request's user options (runopts.h). */
#include "runopts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hostlist.h"
#include "validate.h"

static const char *const hwcoll_names[] = {
    [RUN_HWCOLL_AUTO] = "auto",
    [RUN_HWCOLL_ON] = "on",
    [RUN_HWCOLL_OFF] = "off",
};

int run_hwcoll_parse (const char *s)
{
    for (int h = RUN_HWCOLL_AUTO; h <= RUN_HWCOLL_OFF; h++)
        if (s && strcmp (s, hwcoll_names[h]) == 0)
            return h;
    return -1;
}

const char *run_hwcoll_name (enum run_hwcoll h)
{
    return h >= RUN_HWCOLL_AUTO && h <= RUN_HWCOLL_OFF ? hwcoll_names[h] : NULL;
}

bool run_vni_count_ok (long long n, unsigned vni_max)
{
    return n >= 0 && n <= (long long)vni_max && n <= RUN_VNI_COUNT_MAX;
}

bool run_ncores_ok (long long n)
{
    return n >= 0 && n <= RUN_NCORES_MAX;
}

void run_options_init (struct run_options *o, unsigned vni_max, unsigned allowed_tcs)
{
    *o = (struct run_options){
        .vni_count = -1,
        .vni_max = vni_max < RUN_VNI_COUNT_MAX ? vni_max : RUN_VNI_COUNT_MAX,
        .allowed_tcs = allowed_tcs,
    };
}

/* "NAME VALUE: why" into 'error'; returns -EINVAL with errno set. */
static int bad (struct fmb_error *error,
                const char *name,
                const char *value,
                const char *fmt,
                ...) __attribute__ ((format (printf, 4, 5)));
static int bad (
    struct fmb_error *error, const char *name, const char *value, const char *fmt, ...)
{
    char why[FMB_ERROR_TEXT_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    fmb_errorf (error, "%s%.64s: %s", name ? name : "", value, why);
    errno = EINVAL;
    return -EINVAL;
}

/* A whole decimal number: no sign, no space, no "12abc", no "". */
static bool whole_number (const char *s, long long max, long long *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    long long v = strtoll (s, &end, 10);
    if (*end || errno || v > max)
        return false;
    *out = v;
    return true;
}

/* The names a hostlist expands to: valid, NODES_MAX at most, none twice
 * (the broker refuses the same, in its own words). */
static int parse_nodes (const char *value, unsigned *count, char *why, size_t len)
{
    struct fmb_error e;
    json_t *names = json_array (), *seen = json_object (), *v;
    size_t i;
    int rc = -1;
    if (!names || !seen)
        snprintf (why, len, "out of memory");
    else if (hostlist_expand (value, names, &e) < 0)
        snprintf (why, len, "%s", e.text);
    else if (json_array_size (names) == 0 || json_array_size (names) > NODES_MAX)
        snprintf (why, len, "a host list of 1..%d nodes", NODES_MAX);
    else
        rc = 0;
    json_array_foreach (names, i, v)
    {
        const char *name = json_string_value (v);
        if (rc < 0)
            break;
        if (!valid_node_name (name))
            rc = -1, snprintf (why,
                               len,
                               "'%.64s': node names are 1-64 characters of "
                               "[A-Za-z0-9._-]",
                               name);
        else if (json_object_get (seen, name))
            rc = -1, snprintf (why, len, "'%.64s' listed twice", name);
        else
            json_object_set_new (seen, name, json_true ());
    }
    if (rc == 0)
        *count = (unsigned)json_array_size (names);
    json_decref (names);
    json_decref (seen);
    return rc;
}

int run_option_parse (struct run_options *o,
                      enum run_opt which,
                      const char *value,
                      const char *name,
                      struct fmb_error *error)
{
    char why[FMB_ERROR_TEXT_MAX];
    struct fmb_error e;
    long long n;
    int h;
    if (!value)
        value = "";
    switch (which) {
    case RUN_OPT_NODES:
        if (parse_nodes (value, &o->node_count, why, sizeof (why)) < 0)
            return bad (error, name, value, "%s", why);
        o->nodes = value;
        return 0;
    case RUN_OPT_NCORES:
        if (!whole_number (value, RUN_NCORES_MAX, &n) || !run_ncores_ok (n))
            return bad (error, name, value, "cores per node, 0..%d", RUN_NCORES_MAX);
        o->ncores = (unsigned)n;
        return 0;
    case RUN_OPT_HWCOLL:
        if ((h = run_hwcoll_parse (value)) < 0)
            return bad (error, name, value, "on, off or auto (hardware collectives)");
        o->hwcoll = (enum run_hwcoll)h;
        return 0;
    case RUN_OPT_VNI_COUNT:
        if (!whole_number (value, RUN_VNI_COUNT_MAX, &n) ||
            !run_vni_count_ok (n, o->vni_max))
            return bad (error, name, value, "the job's VNI count, 0..%u", o->vni_max);
        o->vni_count = (int)n;
        return 0;
    case RUN_OPT_TCS:
        if (fmb_config_parse_tcs_within (value, o->allowed_tcs, &o->tcs, &e) < 0)
            return bad (error, name, value, "%s", e.text);
        return 0;
    case RUN_OPT_COUNT:
        break;
    }
    return bad (error, name, value, "not an option of RUN");
}

int run_options_parse (struct run_options *o,
                       const char *const values[RUN_OPT_COUNT],
                       const char *const names[RUN_OPT_COUNT],
                       struct fmb_error *error)
{
    struct run_options next = *o; /* 'o' unchanged when one is bad */
    for (int i = 0; i < RUN_OPT_COUNT; i++) {
        int rc;
        if (values[i] && (rc = run_option_parse (
                              &next, (enum run_opt)i, values[i], names[i], error)) < 0)
            return rc;
    }
    *o = next;
    return 0;
}

int run_options_to_json (const struct run_options *o,
                         json_t *body,
                         struct fmb_error *error)
{
    char tcs[8];
    int rc = 0;
    snprintf (tcs, sizeof (tcs), "0x%x", o->tcs & RUN_TCS_ALL);
    if (o->nodes)
        rc |= json_object_set_new (body, "nodes", json_string (o->nodes));
    if (o->ncores > 0)
        rc |= json_object_set_new (body, "ncores", json_integer (o->ncores));
    if (o->hwcoll != RUN_HWCOLL_UNSET)
        rc |= json_object_set_new (
            body, "hwcoll", json_string (run_hwcoll_name (o->hwcoll)));
    if (o->vni_count >= 0)
        rc |= json_object_set_new (body, "vni_count", json_integer (o->vni_count));
    if (o->tcs)
        rc |= json_object_set_new (body, "tcs", json_string (tcs));
    if (rc) {
        fmb_errorf (error, "the RUN request: out of memory");
        errno = ENOMEM;
        return -ENOMEM;
    }
    return 0;
}

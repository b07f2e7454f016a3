/* rspec.c: node names and cores from a Flux R, user options from jobspec. */
#include "rspec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runopts.h"

long rspec_idset_count (const char *s)
{
    long total = 0;
    char *end;
    if (!s || !*s)
        return -1;
    while (*s) {
        errno = 0;
        long lo = strtol (s, &end, 10), hi = lo;
        if (end == s || errno || lo < 0)
            return -1;
        s = end;
        if (*s == '-') {
            hi = strtol (++s, &end, 10);
            if (end == s || errno || hi < lo)
                return -1;
            s = end;
        }
        total += hi - lo + 1;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return total;
}

/* Cores per node: those of the first R_lite entry (Flux gives every node
 * of a job the same shape unless asked otherwise; the broker takes one
 * figure). */
static long cores_per_node (json_t *R)
{
    json_t *lite = json_object_get (json_object_get (R, "execution"), "R_lite");
    json_t *first = json_array_get (lite, 0);
    const char *cores = json_string_value (
        json_object_get (json_object_get (first, "children"), "core"));
    return rspec_idset_count (cores);
}

static int user_options (json_t *jobspec, json_t *body, struct fmb_error *e)
{
    json_t *o = json_object_get (
        json_object_get (json_object_get (jobspec, "attributes"), "system"),
        "fmbroker");
    json_t *v;
    if (!o)
        return 0;
    if (!json_is_object (o))
        return fmb_errorf (e, "attributes.system.fmbroker: not an object");
    /* jobspec's values as text, checked as every client checks them
     * (runopts.h): vnis is a JSON number, the others strings */
    char vnis[24];
    const char *values[RUN_OPT_COUNT] = {NULL};
    static const char *const names[RUN_OPT_COUNT] = {
        [RUN_OPT_HWCOLL] = "system.fmbroker.hwcoll=",
        [RUN_OPT_VNI_COUNT] = "system.fmbroker.vnis=",
        [RUN_OPT_TCS] = "system.fmbroker.tcs=",
    };
    if ((v = json_object_get (o, "hwcoll")))
        values[RUN_OPT_HWCOLL] =
            json_is_string (v) ? json_string_value (v) : "(not a string)";
    if ((v = json_object_get (o, "vnis"))) {
        if (json_is_integer (v))
            snprintf (
                vnis, sizeof (vnis), "%" JSON_INTEGER_FORMAT, json_integer_value (v));
        else
            snprintf (vnis, sizeof (vnis), "(not a number)");
        values[RUN_OPT_VNI_COUNT] = vnis;
    }
    if ((v = json_object_get (o, "tcs")))
        values[RUN_OPT_TCS] =
            json_is_string (v) ? json_string_value (v) : "(not a string)";
    struct run_options opts;
    run_options_init (&opts, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    if (run_options_parse (&opts, values, names, e) < 0 ||
        run_options_to_json (&opts, body, e) < 0)
        return -1;
    return 0;
}

/* R's execution.nodelist (RFC 29 host lists) as one host list, as the
 * broker takes "nodes": a 10,000-node job's RUN then carries a few bytes,
 * not 120 KiB of names, and the broker expands it once. */
static char *nodelist_text (json_t *nodelist, struct fmb_error *e)
{
    json_t *item;
    size_t i, len = 1;
    if (!json_is_array (nodelist) || json_array_size (nodelist) == 0) {
        fmb_errorf (e, "R has no execution.nodelist");
        return NULL;
    }
    json_array_foreach (nodelist, i, item)
    {
        if (!json_string_value (item) || !*json_string_value (item)) {
            fmb_errorf (e, "R execution.nodelist[%zu] is not a host list", i);
            return NULL;
        }
        len += strlen (json_string_value (item)) + 1;
    }
    char *text = calloc (1, len);
    if (!text) {
        fmb_errorf (e, "out of memory");
        return NULL;
    }
    json_array_foreach (nodelist, i, item)
    {
        if (i)
            strcat (text, ",");
        strcat (text, json_string_value (item));
    }
    return text;
}

json_t *rspec_run_body (json_t *R, json_t *jobspec, unsigned uid, struct fmb_error *e)
{
    char *nodes = nodelist_text (
        json_object_get (json_object_get (R, "execution"), "nodelist"), e);
    if (!nodes)
        return NULL;
    json_t *body = json_pack ("{s:I s:s}", "uid", (json_int_t)uid, "nodes", nodes);
    free (nodes);
    if (!body) {
        fmb_errorf (e, "out of memory");
        return NULL;
    }
    long ncores = cores_per_node (R);
    if (ncores > 0)
        json_object_set_new (body, "ncores", json_integer (ncores));
    if (user_options (jobspec, body, e) < 0) {
        json_decref (body);
        return NULL;
    }
    return body;
}

/* env.c: the job's variables for its tasks (env.h). */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobrecord.h"
#include "log.h"

static void shell_quote (FILE *out, const char *s)
{
    fputc ('\'', out);
    for (; *s; s++) {
        if (*s == '\'')
            fputs ("'\\''", out);
        else
            fputc (*s, out);
    }
    fputc ('\'', out);
}

/* FI_LNX_PROV_LINKS for the devices with a service: "shm+cxi:cxi0|..." */
static json_t *lnx_links (const char *devices)
{
    char out[1024] = "";
    const char *p = devices;
    while (*p) {
        size_t n = strcspn (p, ",");
        size_t used = strlen (out);
        snprintf (out + used,
                  sizeof (out) - used,
                  "%sshm+cxi:%.*s",
                  used ? "|" : "",
                  (int)n,
                  p);
        p += n + (p[n] == ',');
    }
    return json_string (out);
}

/* NAME=value lines: SLINGSHOT_* first in a fixed order, then the rest
 * sorted.  Shell: the value single-quoted ('\'' for a quote), so no
 * value can end the word; Slurm's TaskProlog takes the rest of the line
 * literally, so there it is printed as is.  Either way the record
 * guarantees no value holds a newline or another control character, so
 * no value can add a line or a variable. */
static int by_name (const void *a, const void *b)
{
    return strcmp (*(const char *const *)a, *(const char *const *)b);
}

static void print_env (struct agent *ag, json_t *out)
{
    static const char *const first[] = {
        "SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS"};
    const char *names[JOBRECORD_VARS_MAX + 8], *k;
    size_t n = 0;
    json_t *v;
    for (size_t i = 0; i < 4; i++)
        if (json_object_get (out, first[i]))
            names[n++] = first[i];
    size_t nfirst = n;
    json_object_foreach (out, k, v)
    {
        bool listed = false;
        for (size_t i = 0; i < 4; i++)
            listed |= strcmp (k, first[i]) == 0;
        if (!listed && n < sizeof (names) / sizeof (names[0]))
            names[n++] = k;
    }
    qsort (names + nfirst, n - nfirst, sizeof (names[0]), by_name);
    for (size_t i = 0; i < n; i++) {
        const char *value = json_string_value (json_object_get (out, names[i]));
        printf ("export %s=", names[i]);
        if (ag->args.format == AGENT_FORMAT_SLURM)
            fputs (value, stdout);
        else
            shell_quote (stdout, value);
        putchar ('\n');
    }
}

/* The job's variables from this node's record (written by the prolog):
 * no broker, no libcxi, no token; the job's user can run it. */
int cmd_env (struct agent *ag)
{
    struct jobrecord r;
    struct fmb_error e;
    if (ag->args.have_facts) {
        fmb_log (LOG_ERR,
                 "env: --uid/--vnis are not taken: the job's variables come from "
                 "the record the prolog wrote");
        return EXIT_USAGE;
    }
    if (jobrecord_read (ag->args.state_dir, ag->args.job, &r, &e) < 0) {
        fmb_log (LOG_ERR,
                 "job %s: %s%s",
                 ag->args.job,
                 e.text,
                 errno == ENOENT ? " (did the prolog run here?)" : "");
        return EXIT_FAIL;
    }
    if (r.nservices == 0) {
        fmb_log (LOG_ERR,
                 "job %s has no CXI service on this node: %s",
                 ag->args.job,
                 r.reason);
        jobrecord_clear (&r);
        return EXIT_FAIL;
    }
    json_t *out = json_deep_copy (r.env);
    const char *devs = json_string_value (json_object_get (out, "SLINGSHOT_DEVICES"));
    if (ag->args.lnx && devs)
        json_object_set_new (out, "FI_LNX_PROV_LINKS", lnx_links (devs));
    if (ag->args.format == AGENT_FORMAT_JSON) {
        json_dumpf (out, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar ('\n');
    } else
        print_env (ag, out);
    json_decref (out);
    jobrecord_clear (&r);
    return 0;
}

/* slurmconf.c: see slurmconf.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "slurmconf.h"

/* The value of 'key' (case-insensitive, as Slurm reads it) on this line,
 * copied into out; false when the line does not set it. */
static bool line_value (const char *line, const char *key, char *out, size_t len)
{
    size_t klen = strlen (key);
    for (const char *p = line; *p; p++) {
        if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
            strncasecmp (p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1;
            size_t n = strcspn (v, " \t\r\n#");
            snprintf (out, len, "%.*s", (int)n, v);
            return true;
        }
    }
    return false;
}

/* "vnis=MIN-MAX" among SwitchParameters' comma-separated words. */
static void switch_vnis (const char *params, unsigned *lo, unsigned *hi)
{
    const char *p = params;
    while (p && *p) {
        if (strncasecmp (p, "vnis=", 5) == 0) {
            unsigned a, b;
            if (sscanf (p + 5, "%u-%u", &a, &b) == 2) {
                *lo = a;
                *hi = b;
            }
        }
        p = strchr (p, ',');
        p = p ? p + 1 : NULL;
    }
}

int slurmconf_check (
    const char *path, unsigned pool_min, unsigned pool_max, char *out, size_t len)
{
    FILE *f = fopen (path, "r");
    char line[4096], type[128] = "", params[2048] = "";
    if (!f)
        return -1;
    while (fgets (line, sizeof (line), f)) {
        line[strcspn (line, "#")] = '\0';
        line_value (line, "SwitchType", type, sizeof (type));
        line_value (line, "SwitchParameters", params, sizeof (params));
    }
    fclose (f);
    if (strcasecmp (type, "switch/hpe_slingshot") != 0)
        return 0;
    unsigned lo = 1024, hi = 65535; /* switch/hpe_slingshot's default */
    switch_vnis (params, &lo, &hi);
    bool overlap = lo <= pool_max && pool_min <= hi;
    bool fm = strstr (params, "fm_url=") != NULL;
    if (!overlap && !fm)
        return 0;
    char vnis[96] = "";
    if (overlap)
        snprintf (vnis,
                  sizeof (vnis),
                  " hands out VNIs %u-%u, overlapping [vni] pool %u-%u",
                  lo,
                  hi,
                  pool_min,
                  pool_max);
    snprintf (
        out,
        len,
        "%s: SwitchType=switch/hpe_slingshot%s%s%s: a VNI could go to two jobs; use "
        "SwitchType=switch/none with fmbroker (or at least a disjoint vnis= and no "
        "fm_url)",
        path,
        vnis,
        overlap && fm ? " and" : "",
        fm ? " reserves at the fabric manager itself (fm_url=)" : "");
    return 1;
}

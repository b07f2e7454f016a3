/* fields.c: the broker's answers as the CLI's tables print them. */
#include "fields.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

const char *cli_str (json_t *o, const char *k)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s ? s : "-";
}

long long cli_num (json_t *o, const char *k)
{
    return (long long)json_integer_value (json_object_get (o, k));
}

void cli_join_ints (json_t *a, char *out, size_t len)
{
    size_t i;
    json_t *v;
    out[0] = '\0';
    json_array_foreach (a, i, v)
    {
        snprintf (out + strlen (out),
                  len - strlen (out),
                  "%s%lld",
                  i ? "," : "",
                  (long long)json_integer_value (v));
    }
    if (!out[0])
        snprintf (out, len, "-");
}

/* ISO 8601 local time with its offset, e.g. 2026-11-23T10:15:00+01:00. */
void cli_iso_time (long long ms, char *out, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char zone[8];
    if (!localtime_r (&t, &tm) || strftime (out, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0 ||
        strftime (zone, sizeof (zone), "%z", &tm) != 5) {
        snprintf (out, len, "-");
        return;
    }
    size_t n = strlen (out);
    snprintf (out + n, len - n, "%.3s:%.2s", zone, zone + 3);
}

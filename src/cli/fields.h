/* fields.h: the broker's answers as the CLI's tables print them. */
#ifndef FMB_CLI_FIELDS_H
#define FMB_CLI_FIELDS_H

#include <stddef.h>

#include <jansson.h>

/* o[k] as a string, "-" when it is none. */
const char *cli_str (json_t *o, const char *k);

/* o[k] as an integer, 0 when it is none. */
long long cli_num (json_t *o, const char *k);

/* An array of integers as "1,2,3", "-" when empty. */
void cli_join_ints (json_t *a, char *out, size_t len);

/* ISO 8601 local time with its offset, e.g. 2026-11-23T10:15:00+01:00;
 * "-" if it cannot be had. */
void cli_iso_time (long long ms, char *out, size_t len);

#endif

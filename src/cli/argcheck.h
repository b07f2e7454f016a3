/* argcheck.h: a command's arguments checked before any request: numbers
 * parsed whole (no "12abc", no "1e3", no empty string) and job ids that
 * the broker could accept.  Each prints what is wrong. */
#ifndef FMB_CLI_ARGCHECK_H
#define FMB_CLI_ARGCHECK_H

#include <stdbool.h>

/* A whole decimal number in [min, max]: no sign unless min < 0, no
 * leading or trailing junk, not empty.  Prints what is wrong. */
bool cli_parse_number (
    const char *what, const char *text, long long min, long long max, long long *out);

/* A job id the broker could accept, and that cannot be taken for an
 * option. */
bool cli_check_job_id (const char *cmd, const char *job);

#endif

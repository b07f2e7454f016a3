/* argcheck.c: a command's arguments checked before any request. */
#include "argcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "validate.h"

bool cli_parse_number (
    const char *what, const char *text, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll (text, &end, 10);
    if (text[0] == '\0' || *end || errno || (text[0] == '-' && min >= 0) ||
        text[0] == '+' || text[0] == ' ' || v < min || v > max) {
        fprintf (stderr,
                 "fmbroker: %s '%s': expected a whole number %lld..%lld\n",
                 what,
                 text,
                 min,
                 max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_check_job_id (const char *cmd, const char *job)
{
    if (job && job[0] != '-' && valid_job_id (job))
        return true;
    fprintf (stderr,
             "fmbroker: %s: '%s' is not a job id ([A-Za-z0-9._-], 1-%d characters, "
             "not starting with '-')\n",
             cmd,
             job ? job : "",
             JOB_ID_MAX);
    return false;
}

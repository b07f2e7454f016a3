/* fmids.c: our FM job ids (fmids.h). */
#include <stdio.h>
#include <string.h>

#include "fmids.h"

void fmids_of_job (const char *cluster, const char *job, char *out, size_t len)
{
    snprintf (out, len, "%s-%s", cluster, job);
}

const char *fmids_local_job (const char *cluster, const char *fm_job_id)
{
    size_t n = strlen (cluster);
    if (strncmp (fm_job_id, cluster, n) != 0 || fm_job_id[n] != '-')
        return NULL;
    return fm_job_id + n + 1;
}

/* fmids.h: our FM job ids ("{cluster}-{job}"), the one rule both ways,
 * for the files that have the cluster's name but not the broker. */
#ifndef FMB_FMIDS_H
#define FMB_FMIDS_H

#include <stddef.h>

/* "cluster-job" for a job id. */
void fmids_of_job (const char *cluster, const char *job, char *out, size_t len);
/* The local job id of one of our FM job ids, or NULL if it is not ours. */
const char *fmids_local_job (const char *cluster, const char *fm_job_id);

#endif

/* jobs.h: fmbroker jobs and job: the job listing (a table whose
 * columns -o picks) and one job (show, release). */
#ifndef FMB_CLI_JOBS_H
#define FMB_CLI_JOBS_H

#include "cli.h"

/* The columns of `fmbroker jobs`, all and in the default order. */
#define JOBS_DEFAULT_COLS "JOB,STATE,UID,USER,NODES,VNIS,HWCOLL,REASON"

int cmd_jobs (struct cli *cli, int argc, char **argv);

/* job show JOB | job release JOB [--force] */
int cmd_job (struct cli *cli, int argc, char **argv);

#endif

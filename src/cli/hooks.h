/* hooks.h: the resource manager's hooks: run-job (RUN), end-job
 * (CLEANUP) and step-clean (a step's multicast trees).  A hook uses a
 * short timeout and is meant to be called so that a failure never holds
 * a job (the deploy/ hooks ignore it). */
#ifndef FMB_CLI_HOOKS_H
#define FMB_CLI_HOOKS_H

#include "cli.h"

int cmd_run_job (struct cli *cli, int argc, char **argv);
int cmd_end_job (struct cli *cli, int argc, char **argv);
int cmd_step_clean (struct cli *cli, int argc, char **argv);

#endif

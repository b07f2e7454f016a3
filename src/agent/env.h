/* env.h: fmbroker-cxi env: print the job's variables from the record
 * the prolog wrote (no broker, no libcxi, no token). */
#ifndef FMB_AGENT_ENV_H
#define FMB_AGENT_ENV_H

#include "agent.h"

/* Exit status: 0, EXIT_FAIL or EXIT_USAGE. */
int cmd_env (struct agent *ag);

#endif

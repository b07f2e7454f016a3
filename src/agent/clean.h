/* clean.h: fmbroker-cxi clean: destroy stale job services that no job
 * the broker has not released can own. */
#ifndef FMB_AGENT_CLEAN_H
#define FMB_AGENT_CLEAN_H

#include "agent.h"

/* Exit status: 0, EXIT_FAIL or EXIT_USAGE. */
int cmd_clean (struct agent *ag);

#endif

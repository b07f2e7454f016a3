/* list.h: fmbroker-cxi list: every NIC and its services, as a table or
 * JSON (--json). */
#ifndef FMB_AGENT_LIST_H
#define FMB_AGENT_LIST_H

#include "agent.h"

/* Exit status: 0, EXIT_FAIL or EXIT_USAGE. */
int cmd_list (struct agent *ag);

#endif

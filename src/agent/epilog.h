/* epilog.h: fmbroker-cxi epilog and housekeeping: destroy the job's CXI
 * services on this node (EBUSY retried within --retry-busy), report
 * 'destroyed', or 'failed' when some are left (the node should drain). */
#ifndef FMB_AGENT_EPILOG_H
#define FMB_AGENT_EPILOG_H

#include "agent.h"

/* Exit status: 0, EXIT_FAIL or EXIT_USAGE. */
int cmd_epilog (struct agent *ag);

#endif

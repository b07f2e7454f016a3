/* prolog.h: fmbroker-cxi prolog: the job's CXI services on every NIC of this
 * node, all or nothing, then its records (facts.h) and its report. */
#ifndef FMB_AGENT_PROLOG_H
#define FMB_AGENT_PROLOG_H

#include "agent.h"

/* Exit status: 0, EXIT_FAIL or EXIT_USAGE. */
int cmd_prolog (struct agent *ag);

#endif

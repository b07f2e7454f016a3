/* report.h: the node's reports to the broker (created, destroyed,
 * failed), durable: one the broker cannot take now is kept in
 * STATE_DIR/reports (spool.h) and delivered by a later run. */
#ifndef FMB_AGENT_REPORT_H
#define FMB_AGENT_REPORT_H

#include <stddef.h>

#include "agent.h"

/* This node's name for reports: --node, else the short host name. */
void report_this_node (struct agent *ag, char *node, size_t len);

/* Report the job's state on this node ("created", "destroyed",
 * "failed"); nothing with --no-report or --dry-run. */
void report_state (struct agent *ag, const char *cxi, const char *detail);

/* prolog --report-later: keep the report, deliver it from a detached
 * child after this process has exited. */
void report_after_exit (struct agent *ag, const char *cxi);

/* Deliver the reports kept by earlier runs; how many are still kept.
 * 'wait': for a report whose lock another run holds (spool.h), as the
 * background does; a hook run skips it rather than wait behind another
 * job's delivery. */
unsigned report_deliver_pending (struct agent *ag, bool wait);

/* report --pending: for a timer or housekeeping. */
int cmd_report (struct agent *ag);

#endif

/* status.h: fmbroker status and metrics: the broker's state, as a
 * monitoring check (the Nagios codes every command exits with, cli.h),
 * and its Prometheus text. */
#ifndef FMB_CLI_STATUS_H
#define FMB_CLI_STATUS_H

#include "cli.h"

/* status [--json]: exit EXIT_OK, _DEGRADED, _UNREACHABLE, _REFUSED or _USAGE. */
int cmd_status (struct cli *cli, int argc, char **argv);

/* metrics: GET /metrics as it came. */
int cmd_metrics (struct cli *cli, int argc, char **argv);

#endif

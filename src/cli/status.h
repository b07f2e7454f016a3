/* status.h: fmbroker status and metrics: the broker's state, as a
 * monitoring check (exit STATUS_*), and its Prometheus text. */
#ifndef FMB_CLI_STATUS_H
#define FMB_CLI_STATUS_H

#include "cli.h"

/* status [--json]: exit STATUS_OK, _DEGRADED, _UNREACHABLE or _USAGE. */
int cmd_status (struct cli *cli, int argc, char **argv);

/* metrics: GET /metrics as it came. */
int cmd_metrics (struct cli *cli, int argc, char **argv);

#endif

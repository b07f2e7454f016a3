/* events.h: fmbroker events: the event log, once or --follow. */
#ifndef FMB_CLI_EVENTS_H
#define FMB_CLI_EVENTS_H

#include "cli.h"

int cmd_events (struct cli *cli, int argc, char **argv);

#endif

/* admin.h: the admin commands that act on the broker's pools and its
 * FM view: reconcile, vni list. */
#ifndef FMB_CLI_ADMIN_H
#define FMB_CLI_ADMIN_H

#include "cli.h"

int cmd_reconcile (struct cli *cli, int argc, char **argv);
int cmd_vni (struct cli *cli, int argc, char **argv);

#endif

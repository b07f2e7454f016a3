/* cmdline.h: fmbrokerd's command line, its configuration, and the modes
 * that exit without serving (cmdline.c). */
#ifndef FMB_CMDLINE_H
#define FMB_CMDLINE_H

#include "config.h"
#include "error.h"

/* Options, the configuration into 'cfg', and --dump-config,
 * --check-config, --check-db, --recount, --node-token,
 * --rotate-node-key: the exit status when main should end here, -1 to go
 * on and serve. */
int cmdline_configure (int argc, char **argv, struct fmb_config *cfg);
/* The file and the --set overrides of the command line; every problem is
 * logged through 'report' when given (start, --check-config), else the
 * first is in 'error' (reload). */
int cmdline_load_config (struct fmb_config *cfg,
                         fmb_config_report_f report,
                         struct fmb_error *error);

#endif

/* fmcheck.h: fmbrokerd --check-config --fm: the FM session and one cheap
 * call on its collectives API, as the service makes them. */
#ifndef FMB_FMCHECK_H
#define FMB_FMCHECK_H

#include "config.h"
#include "svccheck.h"

/* Log in (OAuth: a token) and GET the jobs listing through fmclient, as
 * this process's user.  Prints what answered on stdout and returns 0, or
 * reports what is wrong (naming the key that fixes it: the URL's path or
 * port, the credentials, the CA) and returns 1.  No FM configured: 0. */
int fmcheck_run (const struct fmb_config *cfg, svccheck_report_f report, void *arg);

#endif

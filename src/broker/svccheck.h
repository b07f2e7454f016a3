/* svccheck.h: what the service needs of the file system, checked as the
 * user it runs as (--check-config and start). */
#ifndef FMB_SVCCHECK_H
#define FMB_SVCCHECK_H

#include <stdbool.h>

#include "config.h"
#include "error.h"

/* One problem found, as a whole message naming the thing. */
typedef void (*svccheck_report_f) (const char *problem, void *arg);

/* svccheck_paths' flags. */
enum {
    /* --check-config: a socket directory the unit makes (its
     * RuntimeDirectory=, SVCCHECK_UNIT_RUNTIME_DIR) is no problem when
     * it is missing: said on stdout instead (start as the service user
     * by hand, without it, still fails, naming it). */
    SVCCHECK_UNIT_DIRS = 1 << 0,
};
/* deploy/fmbrokerd.service's RuntimeDirectory=fmbroker */
#define SVCCHECK_UNIT_RUNTIME_DIR "/run/fmbroker"

/* The state directory (and its files) and the socket's directory, as
 * this process's uid and groups: each must exist and be usable, or be
 * creatable, since start creates them.  Every problem is reported, with
 * the key's file and line; returns how many. */
int svccheck_paths (const struct fmb_config *cfg,
                    unsigned flags,
                    svccheck_report_f report,
                    void *arg);

/* Does something accept connections on the Unix socket 'path'? */
bool svccheck_socket_listening (const char *path);

/* That the configuration file itself is readable (the service re-reads
 * it on reload): 0, or 1 after reporting. */
int svccheck_config_file (const struct fmb_config *cfg,
                          svccheck_report_f report,
                          void *arg);

/* Run fn(arg) in a child process with the user's uid, gid and groups
 * and return what it returned (0..125); -1 with 'error' when the user
 * does not exist or the child could not be made or changed user. */
int svccheck_run_as (const char *user,
                     int (*fn) (void *arg),
                     void *arg,
                     struct fmb_error *error);

/* The broker running as root over a state directory another user (the
 * service user) owns: what it creates there is root's and the service
 * then fails.  1 with the warning (and the chown line) in 'buf', else 0. */
int svccheck_root_over_state (const struct fmb_config *cfg, char *buf, size_t size);

/* "user NAME (uid N)" for this process's effective uid. */
void svccheck_whoami (char *buf, size_t size);

#endif

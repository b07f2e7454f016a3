/* statelock.h: one broker per state directory (promise 9).
 *
 * The broker holds an exclusive fcntl() lock on STATE_DIR/fmbrokerd.lock
 * for its whole life, taken before the database is opened.  The kernel
 * drops an fcntl lock when the process dies (SIGKILL included), so a
 * standby on the same (local or block-device) file system can take over
 * at once without a stale-lock timeout.  Not meant for NFS: a dead
 * host's lock stays until its lease expires or it reboots, and SQLite's
 * WAL needs memory shared on one host.  The file
 * names its holder (host and pid) so that a second broker, --check-config
 * and `fmbroker status` can say who it is. */
#ifndef FMB_STATELOCK_H
#define FMB_STATELOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define STATELOCK_FILE     "fmbrokerd.lock"
#define STATELOCK_HOST_MAX 256

struct statelock {
    int fd; /* -1: not held */
    char path[1024];
    char host[STATELOCK_HOST_MAX];
    long pid;
    int64_t since_ms; /* wall clock */
};

/* Take the lock of 'state_dir' (which must exist) and write this host
 * and pid into it.  -1 with EWOULDBLOCK and a message naming the holder
 * when another process holds it. */
int statelock_acquire (struct statelock *l,
                       const char *state_dir,
                       struct fmb_error *error);
/* Release it (the file stays, naming the last holder). */
void statelock_release (struct statelock *l);
/* Is 'state_dir' locked now, and by whom?  Changes nothing.  *held is
 * false (and 0 returned) when there is no lock file or nobody holds it;
 * 'holder' then names the last holder, if the file says. */
int statelock_probe (const char *state_dir,
                     bool *held,
                     char *holder,
                     size_t len,
                     struct fmb_error *error);

#endif

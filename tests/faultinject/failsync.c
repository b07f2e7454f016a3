/* failsync.c: an LD_PRELOAD library for tests.  While the file named by
 * FAILSYNC_TRIGGER exists, fsync(2) and fdatasync(2) fail with EIO, as
 * they do when a disk goes bad: SQLite's commit then fails, and the test
 * can watch what the broker does about it. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int failing (void)
{
    const char *trigger = getenv ("FAILSYNC_TRIGGER");
    return trigger && access (trigger, F_OK) == 0;
}

int fsync (int fd)
{
    static int (*real) (int);
    if (failing ()) {
        errno = EIO;
        return -1;
    }
    if (!real)
        real = (int (*) (int))dlsym (RTLD_NEXT, "fsync");
    return real (fd);
}

int fdatasync (int fd)
{
    static int (*real) (int);
    if (failing ()) {
        errno = EIO;
        return -1;
    }
    if (!real)
        real = (int (*) (int))dlsym (RTLD_NEXT, "fdatasync");
    return real (fd);
}

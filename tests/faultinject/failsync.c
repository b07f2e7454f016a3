/* failsync.c: an LD_PRELOAD library for tests.  While the file named by
 * FAILSYNC_TRIGGER exists, fsync(2) and fdatasync(2) fail with EIO, as
 * they do when a disk goes bad: SQLite's commit then fails, and the test
 * can watch what the broker does about it.  While the file named by
 * FAILSYNC_SLOW_TRIGGER exists, each one first sleeps FAILSYNC_SLOW_MS
 * (default 100): a disk that is slow, not bad. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*sync_f) (int);

/* EIO while the trigger exists, else the libc call 'name' (late while
 * the slow trigger exists). */
static int sync_or_fail (sync_f *real, const char *name, int fd)
{
    const char *trigger = getenv ("FAILSYNC_TRIGGER");
    if (trigger && access (trigger, F_OK) == 0) {
        errno = EIO;
        return -1;
    }
    const char *slow = getenv ("FAILSYNC_SLOW_TRIGGER");
    if (slow && access (slow, F_OK) == 0) {
        const char *ms = getenv ("FAILSYNC_SLOW_MS");
        usleep ((useconds_t)(ms ? atoi (ms) : 100) * 1000);
    }
    if (!*real)
        *real = (sync_f)dlsym (RTLD_NEXT, name);
    return (*real) (fd);
}

int fsync (int fd)
{
    static sync_f real;
    return sync_or_fail (&real, "fsync", fd);
}

int fdatasync (int fd)
{
    static sync_f real;
    return sync_or_fail (&real, "fdatasync", fd);
}

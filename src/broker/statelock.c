/* statelock.c: see statelock.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "statelock.h"

static void lock_path (char *out, size_t len, const char *state_dir)
{
    snprintf (out, len, "%s/%s", state_dir, STATELOCK_FILE);
}

static int64_t wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The file's one line, "host=H pid=P since_ms=S", as "host H, pid P"; an
 * unreadable or empty file gives "unknown holder".  Only a broker writes
 * it, but it is still printed only up to the first control character. */
static void read_holder (int fd, char *out, size_t len)
{
    char text[STATELOCK_HOST_MAX + 64] = "", host[STATELOCK_HOST_MAX];
    long pid = 0;
    ssize_t n = pread (fd, text, sizeof (text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (sscanf (text, "host=%255[!-~] pid=%ld", host, &pid) == 2)
        snprintf (out, len, "host %s, pid %ld", host, pid);
    else
        snprintf (out, len, "unknown holder");
}

int statelock_acquire (struct statelock *l,
                       const char *state_dir,
                       struct fmb_error *error)
{
    memset (l, 0, sizeof (*l));
    l->fd = -1;
    lock_path (l->path, sizeof (l->path), state_dir);
    int fd = open (l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fmb_errorf (error, "state lock %s: %s", l->path, strerror (errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl (fd, F_SETLK, &fl) < 0) {
        int err = errno;
        char holder[STATELOCK_HOST_MAX + 64];
        if (err != EAGAIN && err != EACCES) {
            close (fd);
            errno = err;
            return fmb_errorf (error, "state lock %s: %s", l->path, strerror (err));
        }
        read_holder (fd, holder, sizeof (holder));
        close (fd);
        errno = EWOULDBLOCK;
        return fmb_errorf (error,
                           "state directory %s is locked by another broker (%s); "
                           "only one broker may run on it",
                           state_dir,
                           holder);
    }
    if (gethostname (l->host, sizeof (l->host)) < 0)
        snprintf (l->host, sizeof (l->host), "unknown");
    l->host[sizeof (l->host) - 1] = '\0';
    l->pid = (long)getpid ();
    l->since_ms = wall_ms ();
    char line[STATELOCK_HOST_MAX + 64];
    int n = snprintf (line,
                      sizeof (line),
                      "host=%s pid=%ld since_ms=%lld\n",
                      l->host,
                      l->pid,
                      (long long)l->since_ms);
    if (ftruncate (fd, 0) < 0 || pwrite (fd, line, (size_t)n, 0) != n ||
        fsync (fd) < 0) {
        int err = errno;
        close (fd);
        errno = err;
        return fmb_errorf (error,
                           "state lock %s: cannot write the holder: %s",
                           l->path,
                           strerror (err));
    }
    l->fd = fd;
    return 0;
}

void statelock_release (struct statelock *l)
{
    if (l->fd >= 0)
        close (l->fd);
    l->fd = -1;
}

int statelock_probe (const char *state_dir,
                     bool *held,
                     char *holder,
                     size_t len,
                     struct fmb_error *error)
{
    char path[1024];
    lock_path (path, sizeof (path), state_dir);
    *held = false;
    snprintf (holder, len, "none");
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return fmb_errorf (error, "state lock %s: %s", path, strerror (errno));
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl (fd, F_GETLK, &fl) < 0) {
        int err = errno;
        close (fd);
        errno = err;
        return fmb_errorf (error, "state lock %s: %s", path, strerror (err));
    }
    *held = fl.l_type != F_UNLCK;
    read_holder (fd, holder, len);
    close (fd);
    return 0;
}

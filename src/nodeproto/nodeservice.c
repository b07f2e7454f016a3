/* nodeservice.c: requests to the node service (nodeservice.h). */
#include "nodeservice.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "jobrecord.h"
#include "monotime.h"
#include "nodeproto.h"

int node_service_connect (const char *path, bool nonblock)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy (sa.sun_path, path, strlen (path) + 1);
    int fd = socket (
        AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd >= 0 && connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        int err = errno;
        close (fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* send(MSG_NOSIGNAL), not write(): a service that died or closed first
 * is an error to report, not a SIGPIPE that kills the caller (the
 * prolog and epilog program, fmbroker-cxi, a plugin's process). */
int node_service_send (int fd, const char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t w = send (fd, buf + done, len - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

int node_service_answer (int fd, int timeout_ms, char *line, size_t len)
{
    int64_t deadline = fmb_monotime_ms () + timeout_ms;
    size_t n = 0;
    line[0] = '\0';
    while (n + 1 < len && !memchr (line, '\n', n)) {
        int64_t left = deadline - fmb_monotime_ms ();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        /* the time up: still take an answer already there */
        int ready = poll (&p, 1, left > 0 ? (int)left : 0);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0)
            errno = ETIMEDOUT;
        if (ready <= 0)
            return -1;
        ssize_t r = read (fd, line + n, len - 1 - n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            errno = ECONNRESET;
            return -1;
        }
        n += (size_t)r;
    }
    line[n] = '\0';
    line[strcspn (line, "\n")] = '\0';
    return 0;
}

/* A socket connected to STATE_DIR/service.sock (-1 with errno: ENOENT,
 * ECONNREFUSED when none listens); its path in 'path'. */
static int connect_in (const char *state_dir, bool nonblock, char *path, size_t len)
{
    int n = snprintf (path, len, "%s/%s", state_dir, JOBRECORD_SERVICE_SOCKET);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return node_service_connect (path, nonblock);
}

int node_service_call_start (struct node_service_call *c,
                             const char *state_dir,
                             const struct node_request *r,
                             struct fmb_error *e)
{
    static __thread char req[NODE_SERVICE_REQUEST_MAX]; /* large: off the stack */
    int n = node_request_encode (r, req, sizeof (req), e);
    c->fd = -1;
    if (n < 0)
        return -1;
    /* non-blocking: a full line of callers is an error, not a hang */
    c->fd = connect_in (state_dir, true, c->path, sizeof (c->path));
    if (c->fd < 0 && (errno == ENOENT || errno == ECONNREFUSED))
        return 0;
    if (c->fd < 0 && errno == EAGAIN)
        return fmb_errorf (
            e, "the node service at %s: its line of callers is full", c->path);
    if (c->fd < 0)
        return fmb_errorf (e, "the node service at %s: %s", c->path, strerror (errno));
    if (node_service_send (c->fd, req, (size_t)n) < 0) {
        int err = errno;
        close (c->fd);
        c->fd = -1;
        return fmb_errorf (e, "the node service at %s: %s", c->path, strerror (err));
    }
    return 1;
}

int node_service_call_finish (struct node_service_call *c,
                              int timeout_ms,
                              char *line,
                              size_t len,
                              struct fmb_error *e)
{
    int rc = node_service_answer (c->fd, timeout_ms, line, len);
    int err = errno;
    close (c->fd);
    c->fd = -1;
    if (rc == 0)
        return 0;
    if (err == ETIMEDOUT)
        return fmb_errorf (e,
                           "the node service at %s did not answer in %d s",
                           c->path,
                           timeout_ms / 1000);
    /* it went away mid-request (a crash, a kill) */
    return fmb_errorf (
        e, "the node service at %s closed the connection without an answer", c->path);
}

int node_service_wait (const char *state_dir,
                       const char *job,
                       int timeout_ms,
                       struct fmb_error *e)
{
    struct node_service_call c;
    struct node_request r = {.op = NODE_OP_WAIT};
    char line[64];
    if (strlen (job) >= sizeof (r.job)) {
        errno = EINVAL;
        return fmb_errorf (e, "job '%.32s': not a job id", job);
    }
    strcpy (r.job, job);
    int rc = node_service_call_start (&c, state_dir, &r, e);
    if (rc <= 0)
        return rc;
    /* Its arrival is what counts, whatever it says. */
    return node_service_call_finish (&c, timeout_ms, line, sizeof (line), e) < 0 ? -1
                                                                                 : 1;
}

int node_service_step_end (const char *state_dir,
                           const char *job,
                           const char *step,
                           struct fmb_error *e)
{
    char path[PATH_MAX], req[512];
    struct node_request r = {.op = NODE_OP_STEP_END};
    snprintf (r.job, sizeof (r.job), "%s", job);
    snprintf (r.step, sizeof (r.step), "%s", step);
    int n = node_request_encode (&r, req, sizeof (req), e);
    if (n < 0)
        return -1;
    /* Non-blocking, and no wait for the answer: a service busy with a
     * prolog (or gone) must not hold srun's end.  A request written is
     * the service's: it makes the call when it gets to it, or, stopping,
     * before it exits. */
    int fd = connect_in (state_dir, true, path, sizeof (path));
    bool sent = fd >= 0 && n > 0 && (size_t)n < sizeof (req) &&
                send (fd, req, (size_t)n, MSG_NOSIGNAL) == n;
    int err = errno;
    if (fd >= 0)
        close (fd);
    if (sent)
        return 0;
    return fmb_errorf (e, "the node service at %s: %s", path, strerror (err));
}

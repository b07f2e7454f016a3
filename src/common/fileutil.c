/* fileutil.c: see fileutil.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"

int fmb_read_fd (
    int fd, size_t cap, char **ret_buf, size_t *ret_len, struct fmb_error *error)
{
    char *buf = NULL;
    size_t len = 0;
    size_t size = 0;
    for (;;) {
        if (len == size) {
            if (size > cap)
                break; /* too large: said below */
            size_t nsize = size ? size * 2 : 4096;
            char *nbuf = realloc (buf, nsize + 1);
            if (!nbuf) {
                errno = ENOMEM;
                fmb_errorf (error, "out of memory");
                goto error;
            }
            buf = nbuf;
            size = nsize;
        }
        ssize_t n = read (fd, buf + len, size - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fmb_errorf (error, "%s", strerror (errno));
            goto error;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > cap) {
        errno = EFBIG;
        fmb_errorf (error, "larger than %zu bytes", cap);
        goto error;
    }
    buf[len] = '\0'; /* the first pass allocated it, however short the file */
    *ret_buf = buf;
    if (ret_len)
        *ret_len = len;
    return 0;
error : {
    int saved = errno;
    if (buf)
        explicit_bzero (buf, size);
    free (buf);
    errno = saved;
    return -1;
}
}

int fmb_read_file (const char *path,
                   size_t cap,
                   bool strip_newlines,
                   char **ret_buf,
                   size_t *ret_len,
                   struct fmb_error *error)
{
    struct fmb_error e;
    char *buf;
    size_t len;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    int rc = fmb_read_fd (fd, cap, &buf, &len, &e);
    int saved = errno;
    close (fd);
    errno = saved;
    if (rc < 0)
        return fmb_errorf (error, "%s: %s", path, e.text);
    if (strip_newlines)
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            len--;
    buf[len] = '\0';
    *ret_buf = buf;
    if (ret_len)
        *ret_len = len;
    return 0;
}

int fmb_write_file_atomic (const char *path,
                           mode_t mode,
                           const void *data,
                           size_t len,
                           struct fmb_error *error)
{
    return fmb_write_file_atomic_owned (path, mode, (uid_t)-1, data, len, error);
}

static int write_replace (const char *path,
                          mode_t mode,
                          uid_t owner,
                          const void *data,
                          size_t len,
                          bool durable,
                          struct fmb_error *error);

int fmb_write_file_atomic_owned (const char *path,
                                 mode_t mode,
                                 uid_t owner,
                                 const void *data,
                                 size_t len,
                                 struct fmb_error *error)
{
    return write_replace (path, mode, owner, data, len, true, error);
}

int fmb_write_file_replace_owned (const char *path,
                                  mode_t mode,
                                  uid_t owner,
                                  const void *data,
                                  size_t len,
                                  struct fmb_error *error)
{
    return write_replace (path, mode, owner, data, len, false, error);
}

static int write_replace (const char *path,
                          mode_t mode,
                          uid_t owner,
                          const void *data,
                          size_t len,
                          bool durable,
                          struct fmb_error *error)
{
    char tmp[PATH_MAX];
    if (snprintf (tmp, sizeof (tmp), "%s.tmpXXXXXX", path) >= (int)sizeof (tmp)) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "%s: path too long", path);
    }
    int fd = mkostemp (tmp, O_CLOEXEC);
    if (fd < 0)
        return fmb_errorf (error, "%s: %s", tmp, strerror (errno));
    const char *p = data;
    size_t left = len;
    /* Owner and mode before any content and before the name appears. */
    if (owner != (uid_t)-1 && fchown (fd, owner, (gid_t)-1) < 0)
        goto error;
    if (fchmod (fd, mode) < 0)
        goto error;
    while (left > 0) {
        ssize_t n = write (fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        p += n;
        left -= (size_t)n;
    }
    if ((durable && fsync (fd) < 0) || close (fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (rename (tmp, path) < 0)
        goto error;
    return 0;
error : {
    int saved = errno;
    if (fd >= 0)
        close (fd);
    unlink (tmp);
    errno = saved;
    return fmb_errorf (error, "%s: %s", path, strerror (errno));
}
}

int fmb_check_private_fd (int fd, const char *path, struct fmb_error *error)
{
    struct stat st;
    if (fstat (fd, &st) < 0)
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    if (!S_ISREG (st.st_mode)) {
        errno = EINVAL;
        return fmb_errorf (error, "%s: not a regular file", path);
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        errno = EPERM;
        return fmb_errorf (error,
                           "%s: mode %04o lets group or others read it; "
                           "chmod 600 it",
                           path,
                           (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

int fmb_check_private_file (const char *path, struct fmb_error *error)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    int rc = fmb_check_private_fd (fd, path, error);
    int saved = errno;
    close (fd);
    errno = saved;
    return rc;
}

int fmb_mkdir_p (const char *path, mode_t mode, struct fmb_error *error)
{
    char buf[PATH_MAX];
    struct stat st;
    /* Almost always there already (the node engine asks several times
     * per job setup): one stat(2), not a mkdir(2) per component. */
    if (stat (path, &st) == 0 && S_ISDIR (st.st_mode))
        return 0;
    if (snprintf (buf, sizeof (buf), "%s", path) >= (int)sizeof (buf)) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "%s: path too long", path);
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir (buf, mode) < 0 && errno != EEXIST)
            return fmb_errorf (error, "%s: %s", buf, strerror (errno));
        *p = '/';
    }
    if (mkdir (buf, mode) < 0 && errno != EEXIST)
        return fmb_errorf (error, "%s: %s", buf, strerror (errno));
    if (stat (buf, &st) < 0)
        return fmb_errorf (error, "%s: %s", buf, strerror (errno));
    if (!S_ISDIR (st.st_mode)) {
        errno = ENOTDIR;
        return fmb_errorf (error, "%s: not a directory", buf);
    }
    return 0;
}

/* spool.c: see spool.h. */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "fileutil.h"
#include "jsonutil.h"
#include "log.h"
#include "validate.h"

#define SPOOL_DIR      "reports"
#define SPOOL_FILE_MAX 4096
#define SPOOL_MAX      4096 /* reports read per run: a bound, not a limit in use */

static int report_path (char *out,
                        size_t len,
                        const char *state_dir,
                        const char *job,
                        const char *node,
                        struct fmb_error *error)
{
    if (!valid_job_id (job) || !valid_node_name (node)) {
        errno = EINVAL;
        return fmb_errorf (error, "report: bad job id or node name");
    }
    if ((size_t)snprintf (
            out, len, "%s/" SPOOL_DIR "/%s@%s.json", state_dir, job, node) >= len) {
        errno = ENAMETOOLONG;
        return fmb_errorf (error, "%s/" SPOOL_DIR ": path too long", state_dir);
    }
    return 0;
}

#define SPOOL_LOCK_BYTES 65536 /* the lock file's bytes a (job, node) hashes to */

/* FNV-1a of "job@node" */
static uint32_t lock_byte (const char *job, const char *node)
{
    uint32_t h = 2166136261u;
    for (const char *p = job; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ '@') * 16777619u;
    for (const char *p = node; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % SPOOL_LOCK_BYTES;
}

int spool_lock (const char *state_dir, const char *job, const char *node, bool wait)
{
    char path[PATH_MAX];
    struct fmb_error e;
    snprintf (path, sizeof (path), "%s/" SPOOL_DIR, state_dir);
    if (fmb_mkdir_p (path, 0700, &e) < 0)
        return -(errno ? errno : EIO);
    snprintf (path, sizeof (path), "%s/" SPOOL_DIR "/.lock", state_dir);
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct flock fl = {.l_type = F_WRLCK,
                       .l_whence = SEEK_SET,
                       .l_start = lock_byte (job, node),
                       .l_len = 1};
    int rc;
    while ((rc = fcntl (fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) < 0 &&
           errno == EINTR)
        ;
    if (rc < 0) {
        int err = errno == EACCES ? EAGAIN : errno;
        close (fd);
        return -err;
    }
    return fd;
}

void spool_unlock (int lock)
{
    if (lock >= 0)
        close (lock); /* releases it */
}

int spool_put (const char *state_dir,
               const struct spooled_report *r,
               struct fmb_error *error)
{
    char path[PATH_MAX], dir[PATH_MAX];
    if (report_path (path, sizeof (path), state_dir, r->job, r->node, error) < 0)
        return -1;
    snprintf (dir, sizeof (dir), "%s/" SPOOL_DIR, state_dir);
    if (fmb_mkdir_p (dir, 0700, error) < 0)
        return -1;
    json_t *o = json_pack ("{s:s, s:s, s:s, s:I}",
                           "job",
                           r->job,
                           "node",
                           r->node,
                           "cxi",
                           r->cxi,
                           "at_ms",
                           (json_int_t)r->at_ms);
    if (o && r->detail[0])
        json_object_set_new (o, "detail", json_string (r->detail));
    if (o && r->after_created)
        json_object_set_new (o, "after_created", json_true ());
    char *text = o ? fmb_json_dump (o) : NULL;
    json_decref (o);
    if (!text) {
        errno = ENOMEM;
        return fmb_errorf (error, "%s: out of memory", path);
    }
    /* A 'created' kept for the service's deferred delivery (every job)
     * is not waited for on disk: lost to a crash of the node, the node's
     * 'destroyed' after supersedes it.  One the broker did not take
     * ('destroyed', 'failed') must outlive a reboot: its job's VNIs stay
     * quarantined until it arrives. */
    int rc = strcmp (r->cxi, "created") == 0
                 ? fmb_write_file_replace_owned (
                       path, 0600, (uid_t)-1, text, strlen (text), error)
                 : fmb_write_file_atomic (path, 0600, text, strlen (text), error);
    free (text);
    return rc;
}

int spool_drop (const char *state_dir,
                const char *job,
                const char *node,
                struct fmb_error *error)
{
    char path[PATH_MAX];
    if (report_path (path, sizeof (path), state_dir, job, node, error) < 0)
        return -1;
    if (unlink (path) < 0 && errno != ENOENT)
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    return 0;
}

/* Parse one spooled file; -1 if it is not a report this agent wrote. */
static int load_report (const char *path, struct spooled_report *r)
{
    char *buf;
    size_t len;
    struct fmb_error e;
    if (fmb_read_file (path, SPOOL_FILE_MAX, false, &buf, &len, &e) < 0)
        return -1;
    json_t *o = fmb_json_load_object (buf, len, &e);
    free (buf);
    if (!o)
        return -1;
    const char *job = json_string_value (json_object_get (o, "job"));
    const char *node = json_string_value (json_object_get (o, "node"));
    const char *cxi = json_string_value (json_object_get (o, "cxi"));
    const char *detail = json_string_value (json_object_get (o, "detail"));
    json_t *at = json_object_get (o, "at_ms");
    int rc = -1;
    if (job && node && cxi && valid_job_id (job) && valid_node_name (node) &&
        (!strcmp (cxi, "created") || !strcmp (cxi, "destroyed") ||
         !strcmp (cxi, "failed")) &&
        json_is_integer (at) && (!detail || strlen (detail) < sizeof (r->detail))) {
        memset (r, 0, sizeof (*r));
        snprintf (r->job, sizeof (r->job), "%s", job);
        snprintf (r->node, sizeof (r->node), "%s", node);
        snprintf (r->cxi, sizeof (r->cxi), "%s", cxi);
        snprintf (r->detail, sizeof (r->detail), "%s", detail ? detail : "");
        r->at_ms = json_integer_value (at);
        r->after_created = json_is_true (json_object_get (o, "after_created"));
        rc = 0;
    }
    json_decref (o);
    return rc;
}

int spool_get (const char *state_dir,
               const char *job,
               const char *node,
               struct spooled_report *r,
               struct fmb_error *error)
{
    char path[PATH_MAX];
    if (report_path (path, sizeof (path), state_dir, job, node, error) < 0)
        return -1;
    return load_report (path, r) == 0;
}

static int older_first (const void *a, const void *b)
{
    const struct spooled_report *x = a, *y = b;
    return x->at_ms < y->at_ms ? -1 : x->at_ms > y->at_ms;
}

int spool_each (const char *state_dir, spool_f cb, void *arg, struct fmb_error *error)
{
    char dir[PATH_MAX];
    snprintf (dir, sizeof (dir), "%s/" SPOOL_DIR, state_dir);
    DIR *d = opendir (dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return fmb_errorf (error, "%s: %s", dir, strerror (errno));
    }
    struct spooled_report *all = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir (d)) && n < SPOOL_MAX) {
        size_t len = strlen (de->d_name);
        char path[PATH_MAX + 256];
        if (len < 6 || strcmp (de->d_name + len - 5, ".json") != 0 ||
            !strchr (de->d_name, '@'))
            continue;
        snprintf (path, sizeof (path), "%s/%s", dir, de->d_name);
        struct spooled_report *grown = realloc (all, (n + 1) * sizeof (*all));
        if (!grown)
            break;
        all = grown;
        if (load_report (path, &all[n]) == 0) {
            n++;
            continue;
        }
        char bad[PATH_MAX + 264];
        snprintf (bad, sizeof (bad), "%s.bad", path);
        fmb_log (LOG_WARNING, "%s: not a node report; renamed to .bad", path);
        rename (path, bad);
    }
    closedir (d);
    if (n > 1)
        qsort (all, n, sizeof (*all), older_first);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cb (&all[i], arg);
    free (all);
    return rc;
}

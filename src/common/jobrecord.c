/* jobrecord.c: see jobrecord.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "jobrecord.h"
#include "jsonutil.h"
#include "validate.h"

#define bad(e, ...) (errno = EINVAL, fmb_errorf ((e), __VA_ARGS__))

int jobrecord_valid_name (const char *name)
{
    size_t len = strlen (name);
    if (len == 0 || len > JOBRECORD_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

/* No control character (C0, DEL): no value can end a line or hide one. */
static bool printable (const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

static size_t list_items (const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

/* The device and service lists name the same devices, in one order. */
static int check_lists (const struct jobrecord *r,
                        const char *file,
                        struct fmb_error *e)
{
    json_t *devs = json_object_get (r->env, "SLINGSHOT_DEVICES");
    json_t *ids = json_object_get (r->env, "SLINGSHOT_SVC_IDS");
    if (r->nservices == 0) {
        if (devs || ids)
            return bad (e,
                        "%s: no service on this node, yet SLINGSHOT_DEVICES or "
                        "SLINGSHOT_SVC_IDS is set",
                        file);
        if (!r->reason[0])
            return bad (e, "%s: no service on this node and no reason given", file);
        return 0;
    }
    if (!devs || !ids)
        return bad (e,
                    "%s: %u service(s) but no SLINGSHOT_DEVICES or SLINGSHOT_SVC_IDS",
                    file,
                    r->nservices);
    const char *d = json_string_value (devs), *i = json_string_value (ids);
    if (list_items (d) != r->nservices || list_items (i) != r->nservices ||
        strstr (d, ",,") || strstr (i, ",,") || !d[0] || !i[0])
        return bad (e,
                    "%s: SLINGSHOT_DEVICES and SLINGSHOT_SVC_IDS must each list "
                    "the %u device(s) with a service",
                    file,
                    r->nservices);
    return 0;
}

/* Everything a reader relies on; the writer applies it too. */
static int check_record (const struct jobrecord *r,
                         const char *file,
                         struct fmb_error *e)
{
    if (!valid_job_id (r->job))
        return bad (e, "%s: bad job id", file);
    if (r->uid > UID_MAX_VALID)
        return bad (e, "%s: bad uid", file);
    if (r->nservices > JOBRECORD_SERVICES_MAX)
        return bad (e, "%s: %u services: more than a node has", file, r->nservices);
    if (!json_is_object (r->env))
        return bad (e, "%s: \"env\" is not an object", file);
    if (json_object_size (r->env) > JOBRECORD_VARS_MAX)
        return bad (e, "%s: more than %d variables", file, JOBRECORD_VARS_MAX);
    if (!printable (r->reason, strlen (r->reason)))
        return bad (e, "%s: \"reason\" holds a control character", file);
    const char *name;
    json_t *value;
    json_object_foreach (r->env, name, value)
    {
        if (!jobrecord_valid_name (name))
            return bad (e,
                        "%s: variable name '%.64s' is not [A-Z_][A-Z0-9_]* "
                        "of at most %d bytes",
                        file,
                        printable (name, strlen (name)) ? name : "(unprintable)",
                        JOBRECORD_NAME_MAX);
        if (strcmp (name, "FI_CXI_COLL_JOB_STEP_ID") == 0)
            return bad (
                e, "%s: FI_CXI_COLL_JOB_STEP_ID is per step, not per job", file);
        if (!json_is_string (value))
            return bad (e, "%s: %s: the value is not a string", file, name);
        const char *s = json_string_value (value);
        size_t len = json_string_length (value);
        if (len > JOBRECORD_VALUE_MAX)
            return bad (e,
                        "%s: %s: value longer than %d bytes",
                        file,
                        name,
                        JOBRECORD_VALUE_MAX);
        if (strlen (s) != len || !printable (s, len))
            return bad (e,
                        "%s: %s: the value holds a control character (newline?)",
                        file,
                        name);
    }
    return check_lists (r, file, e);
}

static int record_path (
    char *out, size_t len, const char *state_dir, const char *job, const char *suffix)
{
    if (!valid_job_id (job)) {
        errno = EINVAL;
        return -1;
    }
    if ((size_t)snprintf (out, len, "%s/%s%s", state_dir, job, suffix) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int jobrecord_path (char *out, size_t len, const char *state_dir, const char *job)
{
    return record_path (out, len, state_dir, job, ".env");
}

int jobrecord_facts_path (char *out, size_t len, const char *state_dir, const char *job)
{
    return record_path (out, len, state_dir, job, ".json");
}

static int path_or_error (
    char *out, size_t len, const char *state_dir, const char *job, struct fmb_error *e)
{
    if (jobrecord_path (out, len, state_dir, job) < 0) {
        if (errno == EINVAL)
            return fmb_errorf (e, "job record: bad job id '%.64s'", job);
        return fmb_errorf (
            e, "job record: %s/%.64s.env: path too long", state_dir, job);
    }
    return 0;
}

/* A root-owned state dir others may read but not write: the record can
 * only have come from root (or from the caller itself). */
static int state_dir_ready (const char *state_dir, struct fmb_error *e)
{
    struct stat st;
    if (fmb_mkdir_p (state_dir, 0755, e) < 0)
        return fmb_error_prefix (e, "job record");
    if (stat (state_dir, &st) < 0)
        return fmb_errorf (e, "job record: %s: %s", state_dir, strerror (errno));
    /* An older agent created the directory 0700: job users need x. */
    if ((st.st_mode & 0755) != 0755 && chmod (state_dir, 0755) < 0)
        return fmb_errorf (
            e, "job record: chmod 0755 %s: %s", state_dir, strerror (errno));
    return 0;
}

static int check_state_dir (const char *state_dir,
                            const char *file,
                            struct fmb_error *e)
{
    struct stat st;
    if (stat (state_dir, &st) < 0)
        return fmb_errorf (e, "%s: %s", file, strerror (errno));
    if ((st.st_uid != 0 && st.st_uid != geteuid ()) || (st.st_mode & 022)) {
        errno = EPERM;
        return fmb_errorf (e,
                           "%s: the directory %s is not root's, or others may write "
                           "in it: not trusting it",
                           file,
                           state_dir);
    }
    return 0;
}

int jobrecord_write (const char *state_dir,
                     const struct jobrecord *r,
                     struct fmb_error *e)
{
    char path[PATH_MAX];
    if (path_or_error (path, sizeof (path), state_dir, r->job, e) < 0)
        return -1;
    if (check_record (r, path, e) < 0 || state_dir_ready (state_dir, e) < 0)
        return -1;
    json_t *o = json_pack ("{s:i, s:s, s:I, s:i, s:O, s:s}",
                           "version",
                           JOBRECORD_VERSION,
                           "job",
                           r->job,
                           "uid",
                           (json_int_t)r->uid,
                           "services",
                           (int)r->nservices,
                           "env",
                           r->env,
                           "reason",
                           r->reason);
    char *text = o ? json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref (o);
    if (!text) {
        errno = ENOMEM;
        return fmb_errorf (e, "%s: out of memory", path);
    }
    /* not waited for on disk: fileutil.h says why */
    int rc = fmb_write_file_replace_owned (path, 0400, r->uid, text, strlen (text), e);
    free (text);
    return rc;
}

int jobrecord_write_reason (const char *state_dir,
                            const char *job,
                            uint32_t uid,
                            const char *reason,
                            struct fmb_error *e)
{
    struct jobrecord r;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", job);
    r.uid = uid;
    r.env = json_object ();
    snprintf (r.reason, sizeof (r.reason), "%s", reason);
    for (char *c = r.reason; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    int rc = jobrecord_write (state_dir, &r, e);
    jobrecord_clear (&r);
    return rc;
}

/* The checked fields of the parsed file into *r. */
static int fill_record (json_t *o,
                        const char *job,
                        const char *file,
                        struct jobrecord *r,
                        struct fmb_error *e)
{
    json_t *version = json_object_get (o, "version");
    json_t *jid = json_object_get (o, "job");
    json_t *uid = json_object_get (o, "uid");
    json_t *services = json_object_get (o, "services");
    json_t *env = json_object_get (o, "env");
    json_t *reason = json_object_get (o, "reason");
    if (!json_is_integer (version) || json_integer_value (version) != JOBRECORD_VERSION)
        return bad (e,
                    "%s: not a version %d job record (written by another release?)",
                    file,
                    JOBRECORD_VERSION);
    if (!json_is_string (jid) || strcmp (json_string_value (jid), job) != 0)
        return bad (e, "%s: the record is not job %s's", file, job);
    if (!json_is_integer (uid) || json_integer_value (uid) < 0 ||
        json_integer_value (uid) > UID_MAX_VALID)
        return bad (e, "%s: \"uid\" is not a uid", file);
    if (!json_is_integer (services) || json_integer_value (services) < 0 ||
        json_integer_value (services) > JOBRECORD_SERVICES_MAX)
        return bad (e, "%s: \"services\" is not a service count", file);
    if (!json_is_object (env))
        return bad (e, "%s: \"env\" is not an object", file);
    if (reason &&
        (!json_is_string (reason) || json_string_length (reason) >= sizeof (r->reason)))
        return bad (e, "%s: \"reason\" is not a string of < 256 bytes", file);
    snprintf (r->job, sizeof (r->job), "%s", job);
    r->uid = (uint32_t)json_integer_value (uid);
    r->nservices = (unsigned)json_integer_value (services);
    r->env = json_incref (env);
    if (reason)
        memcpy (r->reason, json_string_value (reason), json_string_length (reason) + 1);
    return check_record (r, file, e);
}

static int open_record (const char *path, struct stat *st, struct fmb_error *e)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return fmb_errorf (e, "%s: no record of the job on this node", path);
        if (errno == EACCES)
            return fmb_errorf (e,
                               "%s: permission denied (only the job's user and root "
                               "may read it)",
                               path);
        if (errno == ELOOP) {
            errno = EPERM;
            return fmb_errorf (e, "%s: a symbolic link: not trusting it", path);
        }
        return fmb_errorf (e, "%s: %s", path, strerror (errno));
    }
    if (fstat (fd, st) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (e, "%s: %s", path, strerror (errno));
    }
    if (!S_ISREG (st->st_mode) || st->st_size > JOBRECORD_FILE_MAX ||
        (st->st_mode & 077)) {
        close (fd);
        if (!S_ISREG (st->st_mode) || st->st_size > JOBRECORD_FILE_MAX) {
            errno = EINVAL;
            return fmb_errorf (e,
                               "%s: not a regular file of at most %d bytes",
                               path,
                               JOBRECORD_FILE_MAX);
        }
        errno = EPERM;
        return fmb_errorf (e,
                           "%s: mode %04o lets others read or change it: not "
                           "trusting it",
                           path,
                           (unsigned)(st->st_mode & 07777));
    }
    return fd;
}

int jobrecord_read (const char *state_dir,
                    const char *job,
                    struct jobrecord *r,
                    struct fmb_error *e)
{
    char path[PATH_MAX];
    struct stat st;
    memset (r, 0, sizeof (*r));
    if (path_or_error (path, sizeof (path), state_dir, job, e) < 0)
        return -1;
    int fd = open_record (path, &st, e);
    if (fd < 0)
        return -1;
    struct fmb_error je;
    json_t *o = fmb_json_load_fd (fd, JOBRECORD_FILE_MAX, &je);
    close (fd);
    if (!o)
        return bad (e, "%s: %s", path, je.text);
    int rc = fill_record (o, job, path, r, e);
    json_decref (o);
    /* The job's user may replace its own record; nobody else's. */
    if (rc == 0 && st.st_uid != 0 && st.st_uid != r->uid) {
        errno = EPERM;
        rc = fmb_errorf (e,
                         "%s: owned by uid %u, not by root or the job's uid %u",
                         path,
                         (unsigned)st.st_uid,
                         r->uid);
    }
    if (rc == 0)
        rc = check_state_dir (state_dir, path, e);
    if (rc < 0) {
        int saved = errno;
        jobrecord_clear (r);
        errno = saved;
    }
    return rc;
}

void jobrecord_clear (struct jobrecord *r)
{
    json_decref (r->env);
    r->env = NULL;
}

int jobrecord_remove (const char *state_dir, const char *job, struct fmb_error *e)
{
    char path[PATH_MAX];
    if (path_or_error (path, sizeof (path), state_dir, job, e) < 0)
        return -1;
    if (unlink (path) < 0 && errno != ENOENT)
        return fmb_errorf (e, "%s: %s", path, strerror (errno));
    return 0;
}

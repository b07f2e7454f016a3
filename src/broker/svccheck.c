/* svccheck.c: what the service needs of the file system, checked as the
 * user it runs as.
 *
 * Start creates the state directory (0700) and the socket's directory,
 * opens the database and key there, and binds the socket: all as the
 * service user (fmbroker under systemd).  A check made as root would
 * pass where the service then fails, so --check-config, run as root,
 * runs these checks (and the credential checks) in a child that has
 * switched to the service user; start runs them as itself.  A directory
 * that does not exist is fine if this user can create it; one it can
 * neither use nor create is a configuration error (exit 2: systemd's
 * RestartPreventExitStatus stops retrying), named with the key's file
 * and line.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "svccheck.h"

void svccheck_whoami (char *buf, size_t size)
{
    uid_t uid = geteuid ();
    struct passwd *pw = getpwuid (uid);
    snprintf (buf, size, "user %s (uid %u)", pw ? pw->pw_name : "?", (unsigned)uid);
}

__attribute__ ((format (printf, 6, 7))) static void problem (
    const struct fmb_config *cfg,
    const char *section,
    const char *key,
    svccheck_report_f report,
    void *arg,
    const char *fmt,
    ...)
{
    char where[FMB_CFG_PATH_MAX * 2 + 64], why[FMB_CFG_PATH_MAX + 256];
    char text[sizeof (where) + sizeof (why) + 4];
    const char *value = strcmp (key, "socket") == 0 ? cfg->socket : cfg->state_dir;
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    fmb_config_where (cfg, section, key, value, where, sizeof (where));
    snprintf (text, sizeof (text), "%s: %s", where, why);
    report (text, arg);
}

/* When 'path' (which this user may not use) is root's and this user is
 * not root, the likely cause and its fix: root ran the broker there
 * once.  "" otherwise. */
static void root_owned_hint (const struct fmb_config *cfg,
                             const char *path,
                             char *buf,
                             size_t size)
{
    struct stat st;
    struct passwd *pw = getpwuid (geteuid ());
    buf[0] = '\0';
    if (geteuid () == 0 || !pw || stat (path, &st) < 0 || st.st_uid != 0)
        return;
    snprintf (buf,
              size,
              "; it is root's (was fmbrokerd run as root?): give the state back with "
              "chown -R %s: %s",
              pw->pw_name,
              cfg->state_dir);
}

/* The nearest ancestor of 'path' that exists, into 'out'. */
static void existing_parent (const char *path, char *out, size_t size)
{
    struct stat st;
    snprintf (out, size, "%s", path);
    for (;;) {
        char *slash = strrchr (out, '/');
        if (!slash || slash == out) {
            snprintf (out, size, "%s", slash ? "/" : ".");
            return;
        }
        *slash = '\0';
        if (stat (out, &st) == 0)
            return;
    }
}

/* A directory start uses with 'mode' (R_OK, W_OK, X_OK), or creates. */
static int check_dir (const struct fmb_config *cfg,
                      const char *section,
                      const char *key,
                      const char *dir,
                      int mode,
                      svccheck_report_f report,
                      void *arg)
{
    char who[128], parent[PATH_MAX];
    struct stat st;
    svccheck_whoami (who, sizeof (who));
    if (stat (dir, &st) == 0) {
        if (!S_ISDIR (st.st_mode)) {
            problem (cfg, section, key, report, arg, "%s: not a directory", dir);
            return 1;
        }
        if (access (dir, mode) < 0) {
            int err = errno;
            char hint[FMB_CFG_PATH_MAX + 128] = "";
            if (strcmp (key, "state_dir") == 0)
                root_owned_hint (cfg, dir, hint, sizeof (hint));
            problem (cfg,
                     section,
                     key,
                     report,
                     arg,
                     "%s cannot %s it: %s%s",
                     who,
                     mode & R_OK ? "read, write and enter" : "create files in",
                     strerror (err),
                     hint);
            return 1;
        }
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
        problem (
            cfg, section, key, report, arg, "%s: %s: %s", dir, who, strerror (errno));
        return 1;
    }
    existing_parent (dir, parent, sizeof (parent));
    int err = 0;
    if (stat (parent, &st) < 0)
        err = errno;
    else if (!S_ISDIR (st.st_mode))
        err = ENOTDIR;
    else if (access (parent, W_OK | X_OK) < 0)
        err = errno;
    if (!err)
        return 0; /* start creates it */
    problem (cfg,
             section,
             key,
             report,
             arg,
             "%s does not exist, and %s cannot create it: %s: %s",
             dir,
             who,
             parent,
             strerror (err));
    return 1;
}

/* A file in the state directory that start opens for reading and writing. */
static int check_state_file (const struct fmb_config *cfg,
                             const char *name,
                             svccheck_report_f report,
                             void *arg)
{
    char path[PATH_MAX], who[128];
    snprintf (path, sizeof (path), "%s/%s", cfg->state_dir, name);
    if (access (path, F_OK) < 0 || access (path, R_OK | W_OK) == 0)
        return 0;
    int err = errno;
    char hint[FMB_CFG_PATH_MAX + 128];
    svccheck_whoami (who, sizeof (who));
    root_owned_hint (cfg, path, hint, sizeof (hint));
    problem (cfg,
             "broker",
             "state_dir",
             report,
             arg,
             "%s cannot read and write %s: %s%s",
             who,
             path,
             strerror (err),
             hint);
    return 1;
}

int svccheck_root_over_state (const struct fmb_config *cfg, char *buf, size_t size)
{
    struct stat st;
    if (geteuid () != 0 || stat (cfg->state_dir, &st) < 0 || st.st_uid == 0)
        return 0;
    struct passwd *pw = getpwuid (st.st_uid);
    char owner[64];
    if (pw)
        snprintf (owner, sizeof (owner), "%s", pw->pw_name);
    else
        snprintf (owner, sizeof (owner), "%u", (unsigned)st.st_uid);
    snprintf (buf,
              size,
              "running as root over [broker] state_dir %s, which belongs to user %s "
              "(uid %u): what this run creates there is root's, and the service "
              "(as %s) then cannot open it; run the broker as the service "
              "(systemctl start fmbrokerd), or after this run: chown -R %s: %s",
              cfg->state_dir,
              owner,
              (unsigned)st.st_uid,
              owner,
              owner,
              cfg->state_dir);
    return 1;
}

int svccheck_paths (const struct fmb_config *cfg,
                    unsigned flags,
                    svccheck_report_f report,
                    void *arg)
{
    int n = check_dir (
        cfg, "broker", "state_dir", cfg->state_dir, R_OK | W_OK | X_OK, report, arg);
    if (n == 0) {
        /* (SQLite's -wal and -shm too: a root run that was killed leaves
         * them, and the database does not open without them) */
        static const char *const files[] = {"fmbroker.db",
                                            "fmbroker.db-wal",
                                            "fmbroker.db-shm",
                                            "token.key",
                                            "fmbrokerd.lock"};
        for (size_t i = 0; i < sizeof (files) / sizeof (files[0]); i++)
            n += check_state_file (cfg, files[i], report, arg);
    }
    char dir[FMB_UNIX_PATH_MAX];
    snprintf (dir, sizeof (dir), "%s", cfg->socket);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        struct stat st;
        if ((flags & SVCCHECK_UNIT_DIRS) &&
            strcmp (dir, SVCCHECK_UNIT_RUNTIME_DIR) == 0 && stat (dir, &st) < 0 &&
            errno == ENOENT)
            printf (
                "[api] socket: %s does not exist; the unit's "
                "RuntimeDirectory=fmbroker makes it when systemd starts "
                "fmbrokerd (started by hand as the service user, make it "
                "first: install -d -o %s -m 755 %s)\n",
                dir,
                FMB_SERVICE_USER,
                dir);
        else
            n += check_dir (cfg, "api", "socket", dir, W_OK | X_OK, report, arg);
    }
    return n;
}

bool svccheck_socket_listening (const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen (path) >= sizeof (sa.sun_path))
        return false;
    memcpy (sa.sun_path, path, strlen (path) + 1);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool listening = connect (fd, (struct sockaddr *)&sa, sizeof (sa)) == 0;
    close (fd);
    return listening;
}

int svccheck_config_file (const struct fmb_config *cfg,
                          svccheck_report_f report,
                          void *arg)
{
    char who[128], text[FMB_CFG_PATH_MAX + 256];
    if (!cfg->source[0] || access (cfg->source, R_OK) == 0)
        return 0;
    int err = errno;
    svccheck_whoami (who, sizeof (who));
    snprintf (text,
              sizeof (text),
              "%s: %s cannot read it (%s): the service re-reads it on reload",
              cfg->source,
              who,
              strerror (err));
    report (text, arg);
    return 1;
}

int svccheck_run_as (const char *user,
                     int (*fn) (void *arg),
                     void *arg,
                     struct fmb_error *error)
{
    struct passwd *pw = getpwnam (user);
    if (!pw) {
        errno = ENOENT;
        return fmb_errorf (error, "no user '%s' on this host", user);
    }
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    fflush (NULL); /* nothing buffered is written twice */
    pid_t pid = fork ();
    if (pid < 0)
        return fmb_errorf (error, "fork: %s", strerror (errno));
    if (pid == 0) {
        if (initgroups (user, gid) < 0 || setgid (gid) < 0 || setuid (uid) < 0) {
            fprintf (stderr, "cannot become user %s: %s\n", user, strerror (errno));
            _exit (126);
        }
        int rc = fn (arg);
        fflush (NULL);
        _exit (rc);
    }
    int status;
    while (waitpid (pid, &status, 0) < 0)
        if (errno != EINTR)
            return fmb_errorf (error, "waitpid: %s", strerror (errno));
    if (!WIFEXITED (status) || WEXITSTATUS (status) == 126) {
        errno = EPERM;
        return fmb_errorf (error, "the check as user %s did not finish", user);
    }
    return WEXITSTATUS (status);
}

/* spankcore.c: see spankcore.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "monotime.h"
#include "spankcore.h"

#define bad(e, ...) (errno = EINVAL, fmb_errorf ((e), __VA_ARGS__))

/* ---- plugstack.conf arguments -------------------------------------- */

static int parse_uint (const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    if (!*s || strspn (s, "0123456789") != strlen (s) || strlen (s) > 9)
        return -1;
    unsigned long v = strtoul (s, &end, 10);
    if (v < lo || v > hi)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int set_path (
    char *field, size_t len, const char *key, const char *v, struct fmb_error *e)
{
    if (!*v || strlen (v) >= len)
        return bad (e, "plugstack argument %s=: a path of 1..%zu bytes", key, len - 1);
    strcpy (field, v);
    return 0;
}

/* One "key=value" argument. */
static int conf_arg (struct spank_conf *c, const char *arg, struct fmb_error *e)
{
    const char *eq = strchr (arg, '=');
    if (!eq)
        return bad (e, "plugstack argument '%.64s': expected KEY=VALUE", arg);
    size_t klen = (size_t)(eq - arg);
    const char *v = eq + 1;
#define KEY(k) (klen == strlen (k) && strncmp (arg, k, klen) == 0)
    if (KEY ("policy")) {
        if (strcmp (v, "fail_closed") == 0)
            c->policy = SPANK_FAIL_CLOSED;
        else if (strcmp (v, "fail_open") == 0)
            c->policy = SPANK_FAIL_OPEN;
        else
            return bad (
                e, "plugstack argument policy=%.32s: fail_closed or fail_open", v);
        return 0;
    }
    if (KEY ("tcs")) {
        struct fmb_error te;
        if (fmb_config_parse_tcs (v, &c->allowed_tcs, &te) < 0)
            return bad (e, "plugstack argument tcs=%.64s: %s", v, te.text);
        return 0;
    }
    if (KEY ("step_timeout")) {
        if (parse_uint (v, 1, 30, &c->step_timeout_s) < 0)
            return bad (e, "plugstack argument step_timeout=%.32s: seconds, 1..30", v);
        return 0;
    }
    if (KEY ("hook_timeout")) {
        if (parse_uint (v, 1, 3600, &c->hook_timeout_s) < 0)
            return bad (
                e, "plugstack argument hook_timeout=%.32s: seconds, 1..3600", v);
        return 0;
    }
    if (KEY ("run")) {
        if (strcmp (v, "node") && strcmp (v, "controller"))
            return bad (e, "plugstack argument run=%.32s: controller or node", v);
        c->node_run = strcmp (v, "node") == 0;
        return 0;
    }
    if (KEY ("config")) {
        c->config_given = true;
        return set_path (c->config, sizeof (c->config), "config", v, e);
    }
    if (KEY ("state_dir")) {
        c->state_dir_given = true;
        return set_path (c->state_dir, sizeof (c->state_dir), "state_dir", v, e);
    }
    if (KEY ("prolog"))
        return set_path (c->prolog, sizeof (c->prolog), "prolog", v, e);
    if (KEY ("epilog"))
        return set_path (c->epilog, sizeof (c->epilog), "epilog", v, e);
#undef KEY
    return bad (e,
                "plugstack argument '%.64s': unknown (policy, tcs, config, state_dir, "
                "step_timeout, prolog, epilog, hook_timeout, run)",
                arg);
}

int spank_conf_parse (struct spank_conf *c, int argc, char **argv, struct fmb_error *e)
{
    memset (c, 0, sizeof (*c));
    c->policy = SPANK_FAIL_CLOSED;
    c->allowed_tcs = SPANK_DEFAULT_TCS;
    snprintf (c->config, sizeof (c->config), "%s", FMB_CONFIG_PATH);
    snprintf (c->state_dir, sizeof (c->state_dir), "%s", JOBRECORD_DIR_DEFAULT);
    c->step_timeout_s = 2;
    snprintf (c->prolog, sizeof (c->prolog), "%s/prolog.sh", SPANK_HOOK_DIR);
    snprintf (c->epilog, sizeof (c->epilog), "%s/epilog.sh", SPANK_HOOK_DIR);
    c->hook_timeout_s = 120;
    for (int i = 0; i < argc; i++)
        if (conf_arg (c, argv[i], e) < 0)
            return -1;
    return 0;
}

/* ---- run=node: the RUN request ------------------------------------ */

char *spank_run_request (unsigned long uid,
                         const char *user,
                         const char *nodelist,
                         const char *cpus_per_node,
                         const char *hwcoll,
                         const char *vnis,
                         const char *tcs,
                         struct fmb_error *e)
{
    if (!nodelist || !*nodelist) {
        errno = EINVAL;
        fmb_errorf (e, "no SLURM_NODELIST: the job's nodes are not known here");
        return NULL;
    }
    json_t *o = json_pack ("{s:I, s:s}", "uid", (json_int_t)uid, "nodes", nodelist);
    unsigned long ncores = cpus_per_node ? strtoul (cpus_per_node, NULL, 10) : 0;
    if (user && *user)
        json_object_set_new (o, "user", json_string (user));
    if (ncores > 0 && ncores <= (1ul << 20))
        json_object_set_new (o, "ncores", json_integer ((json_int_t)ncores));
    if (hwcoll &&
        (!strcmp (hwcoll, "on") || !strcmp (hwcoll, "off") || !strcmp (hwcoll, "auto")))
        json_object_set_new (o, "hwcoll", json_string (hwcoll));
    if (vnis && vnis[0] >= '0' && vnis[0] <= '4' && !vnis[1])
        json_object_set_new (o, "vni_count", json_integer (vnis[0] - '0'));
    if (tcs && strlen (tcs) == 3 && tcs[0] == '0' && tcs[1] == 'x' &&
        strchr ("123456789abcdef", tcs[2]))
        json_object_set_new (o, "tcs", json_string (tcs));
    char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    if (!text) {
        errno = ENOMEM;
        fmb_errorf (e, "the RUN request: out of memory");
    }
    return text;
}

/* ---- user options -------------------------------------------------- */

int spank_parse_hwcoll (const char *arg,
                        char out[SPANK_HWCOLL_MAX],
                        struct fmb_error *e)
{
    if (!arg || (strcmp (arg, "on") && strcmp (arg, "off") && strcmp (arg, "auto")))
        return bad (e,
                    "--fmb-hwcoll=%.32s: on, off or auto (hardware collectives)",
                    arg ? arg : "");
    snprintf (out, SPANK_HWCOLL_MAX, "%s", arg);
    return 0;
}

int spank_parse_vni_count (const char *arg, unsigned *count, struct fmb_error *e)
{
    if (!arg || parse_uint (arg, 0, 4, count) < 0)
        return bad (e, "--fmb-vnis=%.32s: the job's VNI count, 0..4", arg ? arg : "");
    return 0;
}

int spank_parse_tcs (const char *arg,
                     unsigned allowed,
                     unsigned *mask,
                     struct fmb_error *e)
{
    struct fmb_error te;
    if (!arg || fmb_config_parse_tcs_within (arg, allowed, mask, &te) < 0)
        return bad (e, "--fmb-tcs=%.64s: %s", arg ? arg : "", arg ? te.text : "a list");
    return 0;
}

/* ---- the step's record ----------------------------------------------- */

int spank_step_record (const char *state_dir,
                       const char *job,
                       bool vni_count_zero,
                       struct jobrecord *r,
                       struct fmb_error *e)
{
    memset (r, 0, sizeof (*r));
    if (jobrecord_read (state_dir, job, r, e) < 0) {
        if (errno == ENOENT) {
            if (vni_count_zero)
                return 0;
            char path[1200];
            jobrecord_path (path, sizeof (path), state_dir, job);
            return fmb_errorf (e,
                               "no job record %s: the node prolog did not set up "
                               "the job's CXI services (see the node's slurmd log)",
                               path);
        }
        return -1;
    }
    if (r->nservices > 0)
        return 1;
    if (vni_count_zero)
        return 0;
    errno = ENODEV;
    return fmb_errorf (e, "no CXI service for job %s on this node: %s", job, r->reason);
}

int spank_root_verdict (const char *state_dir, const char *job, struct fmb_error *e)
{
    char path[1200];
    struct stat st;
    json_error_t jerr;
    snprintf (path, sizeof (path), "%s/%s.json", state_dir, job);
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return fmb_errorf (e,
                           "%s: %s: the node prolog did not set up the job's CXI "
                           "services (see the node's slurmd log)",
                           path,
                           strerror (errno));
    if (fstat (fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022) ||
        !S_ISREG (st.st_mode)) {
        close (fd);
        errno = EPERM;
        return fmb_errorf (e, "%s: not a root-owned file only root may change", path);
    }
    json_t *o = json_loadfd (fd, 0, &jerr);
    close (fd);
    json_t *vnis = json_object_get (o, "vnis");
    json_t *services = json_object_get (o, "services");
    if (!json_is_array (vnis) || !json_is_array (services)) {
        json_decref (o);
        errno = EPROTO;
        return fmb_errorf (e, "%s: not a job record of the node prolog", path);
    }
    bool isolated = json_array_size (vnis) == 0 || json_array_size (services) > 0;
    json_decref (o);
    if (isolated)
        return 0;
    errno = ENODEV;
    return fmb_errorf (e, "%s: the job has VNIs but no CXI service on this node", path);
}

/* ---- node hooks ------------------------------------------------------ */

/* Hand each complete line in buf to the callback; keep the rest. */
static void drain_lines (char *buf,
                         size_t *used,
                         bool flush,
                         void (*line_cb) (void *, const char *),
                         void *arg,
                         char *last,
                         size_t lastlen)
{
    char *start = buf, *nl;
    buf[*used] = '\0';
    while ((nl = strchr (start, '\n')) || (flush && *start)) {
        if (nl)
            *nl = '\0';
        const char *line = start;
        /* journald's "<N>" priority prefix (fmbroker's programs add it) */
        if (line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>')
            line += 3;
        if (*line) {
            if (line_cb)
                line_cb (arg, line);
            if (last)
                snprintf (last, lastlen, "%s", line);
        }
        if (!nl) {
            start += strlen (start);
            break;
        }
        start = nl + 1;
    }
    *used = strlen (start);
    memmove (buf, start, *used + 1);
}

/* Wait up to left_ms for the child behind pidfd to exit (readable
 * pidfd, Linux 5.3): no sleep between looks at it.  Without a pidfd
 * (an older kernel), a short nap. */
static void wait_exit (int pidfd, int64_t left_ms)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    if (pidfd < 0)
        poll (NULL, 0, left_ms < 2 ? (int)left_ms : 2);
    else
        poll (&p, 1, left_ms > INT_MAX ? INT_MAX : (int)left_ms);
}

static pid_t start_hook (const char *path, int out[2])
{
    if (pipe2 (out, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork ();
    if (pid == 0) {
        setpgid (0, 0);
        dup2 (out[1], STDOUT_FILENO);
        dup2 (out[1], STDERR_FILENO);
        int null = open ("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2 (null, STDIN_FILENO);
        execl (path, path, (char *)NULL);
        dprintf (STDERR_FILENO, "cannot run %s: %s\n", path, strerror (errno));
        _exit (127);
    }
    close (out[1]);
    if (pid < 0)
        close (out[0]);
    return pid;
}

int spank_run_hook (const char *path,
                    unsigned timeout_s,
                    void (*line_cb) (void *arg, const char *line),
                    void *arg,
                    char *last,
                    size_t lastlen,
                    struct fmb_error *e)
{
    int out[2], status = 0;
    char buf[4096];
    size_t used = 0;
    bool timed_out = false;
    if (last && lastlen)
        last[0] = '\0';
    pid_t pid = start_hook (path, out);
    if (pid < 0)
        return fmb_errorf (e, "cannot run %s: %s", path, strerror (errno));
    int64_t deadline = fmb_monotime_ms () + (int64_t)timeout_s * 1000;
    for (;;) {
        int64_t left = deadline - fmb_monotime_ms ();
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int n = poll (&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue; /* the deadline check above ends it */
        ssize_t got = read (out[0], buf + used, sizeof (buf) - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
        drain_lines (buf, &used, used == sizeof (buf) - 1, line_cb, arg, last, lastlen);
    }
    drain_lines (buf, &used, true, line_cb, arg, last, lastlen);
    close (out[0]);
    /* EOF is not the end: a hook may close its output and go on, so
     * the deadline also bounds the wait for its exit. */
    int pidfd = timed_out ? -1 : (int)syscall (SYS_pidfd_open, pid, 0);
    while (!timed_out) {
        pid_t got = waitpid (pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR) {
            int saved = errno;
            kill (-pid, SIGKILL);
            errno = saved;
            if (pidfd >= 0)
                close (pidfd);
            return fmb_errorf (e, "%s: cannot wait for it: %s", path, strerror (errno));
        }
        int64_t left = deadline - fmb_monotime_ms ();
        if (left <= 0)
            timed_out = true;
        else
            wait_exit (pidfd, left);
    }
    if (pidfd >= 0)
        close (pidfd);
    if (timed_out) {
        kill (-pid, SIGKILL);
        while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (timed_out) {
        errno = ETIMEDOUT;
        return fmb_errorf (e, "%s: killed after %u s", path, timeout_s);
    }
    if (WIFSIGNALED (status))
        return 128 + WTERMSIG (status);
    return WEXITSTATUS (status);
}

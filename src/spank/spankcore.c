/* spankcore.c: see spankcore.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "jobrecord.h"
#include "jsonutil.h"
#include "monotime.h"
#include "runopts.h"
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
    if (KEY ("config"))
        return set_path (c->config, sizeof (c->config), "config", v, e);
    if (KEY ("state_dir"))
        return set_path (c->state_dir, sizeof (c->state_dir), "state_dir", v, e);
    /* Until 0.2 the plugin ran the node hooks: a plugstack.conf
     * of then is refused with what to do, not half-obeyed. */
    if (KEY ("run"))
        return bad (
            e,
            "plugstack argument run=: no longer taken, delete it; the nodes make "
            "the job's RUN when their fmbroker.conf has [api] node_run = true, "
            "else PrologSlurmctld does (doc/slurm.md)");
    if (KEY ("prolog") || KEY ("epilog") || KEY ("hook_timeout"))
        return bad (e,
                    "plugstack argument %.*s=: no longer taken; the node service "
                    "fmbroker-cxi.service makes each job's setup, and slurm.conf's "
                    "Epilog=%s its end (doc/slurm.md)",
                    (int)klen,
                    arg,
                    SPANK_EPILOG_PATH);
#undef KEY
    return bad (e,
                "plugstack argument '%.64s': unknown (policy, tcs, config, state_dir, "
                "step_timeout)",
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
    for (int i = 0; i < argc; i++)
        if (conf_arg (c, argv[i], e) < 0)
            return -1;
    return 0;
}

/* ---- user options (checked as every client checks them: runopts.h) -- */

int spank_parse_hwcoll (const char *arg,
                        char out[SPANK_HWCOLL_MAX],
                        struct fmb_error *e)
{
    struct run_options o;
    run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    if (run_option_parse (&o, RUN_OPT_HWCOLL, arg, "--fmb-hwcoll=", e) < 0)
        return -1;
    snprintf (out, SPANK_HWCOLL_MAX, "%s", run_hwcoll_name (o.hwcoll));
    return 0;
}

int spank_parse_vni_count (const char *arg, unsigned *count, struct fmb_error *e)
{
    struct run_options o;
    run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    if (run_option_parse (&o, RUN_OPT_VNI_COUNT, arg, "--fmb-vnis=", e) < 0)
        return -1;
    *count = (unsigned)o.vni_count;
    return 0;
}

int spank_parse_tcs (const char *arg,
                     unsigned allowed,
                     unsigned *mask,
                     struct fmb_error *e)
{
    struct run_options o;
    run_options_init (&o, RUN_VNI_COUNT_MAX, allowed);
    if (run_option_parse (&o, RUN_OPT_TCS, arg, "--fmb-tcs=", e) < 0)
        return -1;
    *mask = o.tcs;
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
            return fmb_errorf (
                e,
                "no job record %s: the node prolog did not set up "
                "the job's CXI services (see the node's syslog: fmbroker-cxi)",
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
    snprintf (path, sizeof (path), "%s/%s.json", state_dir, job);
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return fmb_errorf (e,
                           "%s: %s: the node prolog did not set up the job's CXI "
                           "services (see the node's syslog: fmbroker-cxi)",
                           path,
                           strerror (errno));
    if (fstat (fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022) ||
        !S_ISREG (st.st_mode)) {
        close (fd);
        errno = EPERM;
        return fmb_errorf (e, "%s: not a root-owned file only root may change", path);
    }
    struct fmb_error je;
    json_t *o = fmb_json_load_fd (fd, JOBRECORD_FILE_MAX, &je);
    close (fd);
    if (!o) {
        errno = EPROTO;
        return fmb_errorf (
            e, "%s: not a job record of the node prolog: %s", path, je.text);
    }
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

int spank_cpu_count (const char *list)
{
    long count = 0;
    const char *p = list;
    if (!p || !*p)
        return -1;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9')
            return -1;
        long lo = strtol (p, &end, 10), hi = lo;
        if (*end == '-') {
            if (end[1] < '0' || end[1] > '9')
                return -1;
            hi = strtol (end + 1, &end, 10);
        }
        if (lo > hi || hi > 1048575 || (*end && *end != ','))
            return -1;
        count += hi - lo + 1;
        if (count > 1048576)
            return -1;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return -1; /* a trailing comma */
    }
    return (int)count;
}

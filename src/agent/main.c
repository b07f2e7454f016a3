/* fmbroker-cxi: the node agent.  Creates and destroys a job's CXI services
 * on every Slingshot NIC of this node through libcxi, and prints the
 * job's environment.  Run as root by the resource manager's prolog,
 * epilog and housekeeping.
 *
 * Job facts (uid, VNIs, cores, TCs) come from --uid/--vnis/--ncores/--tcs,
 * else from this node's record of the job (written by prolog before it
 * creates anything, so a crash leaves enough to clean up), else from the
 * broker over its socket.  Services are found again by uid and exact VNI
 * set, never by service id.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "apiclient.h"
#include "args.h"
#include "config.h"
#include "cxilib.h"
#include "fileutil.h"
#include "log.h"
#include "svc.h"
#include "validate.h"

#define AGENT_STATE_DIR  "/run/fmbroker-cxi"
#define BROKER_TIMEOUT_S 5 /* the broker answers from its own store */
#define EXIT_FAIL        1 /* prolog: do not start here; epilog: drain the node */
#define EXIT_USAGE       2

static const char usage_text[] =
    "Usage: fmbroker-cxi [OPTIONS] COMMAND [COMMAND OPTIONS]\n"
    "Create and destroy a job's CXI services on this node's Slingshot NICs.\n"
    "\n"
    "Commands:\n"
    "  prolog --job ID [--uid UID --vnis V[,V...] [--ncores N] [--tcs MASK]]\n"
    "         one service per NIC for the job; on -ENOSPC the reservations are\n"
    "         scaled back to what is free, with a warning\n"
    "  epilog --job ID [--retry-busy SECONDS] [--no-report]\n"
    "         destroy the job's services (retrying EBUSY once a second for\n"
    "         SECONDS, default 5) and report to the broker; exit 1 = drain\n"
    "  env    --job ID [--format shell|json|slurm] [--lnx]\n"
    "         print SLINGSHOT_* and the job's FI_CXI_* variables\n"
    "  list   [--json]   every NIC and its services\n"
    "  clean             destroy job services of VNIs in [vni] pool that belong\n"
    "                    to no active job (never id 1 or system services)\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE     configuration (default " FMB_CONFIG_PATH
    ")\n"
    "      --libcxi PATH     libcxi to load (default [cxi] libcxi)\n"
    "      --socket PATH     the broker's socket (default [api] broker_url if set,\n"
    "                        else [api] socket)\n"
    "      --state-dir DIR   this node's job records (default " AGENT_STATE_DIR
    ")\n"
    "      --node NAME       this node's name for reports (default: host name)\n"
    "  -n, --dry-run         print the descriptors, change nothing\n"
    "  -h, --help\n"
    "\n"
    "No libcxi or no NICs: prolog and epilog succeed with nothing to do.\n"
    "Exit status: 0 success, 1 failure (epilog: drain the node), 2 usage.\n";

static struct agent_args arg_;

static struct fmb_config cfg;
static struct api_target target;
static struct cxilib lib;

/* ---- the broker ---------------------------------------------------- */

/* One call to the broker; *ret gets the JSON answer (2xx only). */
static int broker_call (const char *method,
                        const char *path,
                        const char *body,
                        json_t **ret,
                        struct fmb_error *error)
{
    struct api_reply r;
    if (api_client_call (
            &target, BROKER_TIMEOUT_S, method, path, body, NULL, &r, error) < 0)
        return -1; /* errno EHOSTUNREACH */
    if (r.status < 200 || r.status > 299) {
        const char *detail = json_string_value (json_object_get (r.body, "detail"));
        fmb_errorf (error,
                    "broker: %s %s: %ld %s",
                    method,
                    path,
                    r.status,
                    detail ? detail : "");
        json_decref (r.body);
        errno = r.status == 404 ? ENOENT : EIO;
        return -1;
    }
    if (ret)
        *ret = r.body;
    else
        json_decref (r.body);
    return 0;
}

static void report (const char *cxi, const char *detail)
{
    char path[512], node[HOST_NAME_MAX + 1];
    struct fmb_error e;
    if (arg_.no_report || arg_.dry_run)
        return;
    if (arg_.node)
        snprintf (node, sizeof (node), "%s", arg_.node);
    else {
        gethostname (node, sizeof (node));
        node[strcspn (node, ".")] = '\0';
    }
    snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", arg_.job, node);
    json_t *o = json_pack ("{s:s}", "cxi", cxi);
    if (detail)
        json_object_set_new (o, "detail", json_string (detail));
    char *body = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    if (broker_call ("PUT", path, body, NULL, &e) < 0)
        fmb_log (LOG_WARNING,
                 "job %s: reporting '%s' to the broker failed: %s",
                 arg_.job,
                 cxi,
                 e.text);
    free (body);
}

/* ---- job facts ----------------------------------------------------- */

static void record_path (char *out, size_t len)
{
    snprintf (out, len, "%s/%s.json", arg_.state_dir, arg_.job);
}

static int facts_from_json (json_t *o, struct job_facts *f)
{
    json_t *uid = json_object_get (o, "uid");
    json_t *vnis = json_object_get (o, "vnis");
    size_t i;
    json_t *v;
    if (!json_is_integer (uid) || !json_is_array (vnis) ||
        json_array_size (vnis) > CXI_SVC_MAX_VNIS)
        return -1;
    f->uid = (uint32_t)json_integer_value (uid);
    f->nvnis = 0;
    json_array_foreach (vnis, i, v)
    {
        f->vnis[f->nvnis++] = (uint16_t)json_integer_value (v);
    }
    f->ncores = (unsigned)json_integer_value (json_object_get (o, "ncores"));
    const char *tcs = json_string_value (json_object_get (o, "tcs"));
    if (tcs)
        f->tcs = (unsigned)strtoul (tcs, NULL, 16);
    return 0;
}

/* Facts from the flags, this node's record, or the broker (in that
 * order).  *env (may be NULL) gets the broker's env map when it was asked. */
static int job_facts (struct job_facts *f, json_t **env, struct fmb_error *error)
{
    memset (f, 0, sizeof (*f));
    snprintf (f->id, sizeof (f->id), "%s", arg_.job);
    f->tcs = cfg.cxi_tcs;
    if (arg_.have_facts) {
        f->uid = arg_.uid;
        f->nvnis = arg_.nvnis;
        memcpy (f->vnis, arg_.vnis, sizeof (f->vnis));
        f->ncores = arg_.ncores > 0 ? (unsigned)arg_.ncores : 0;
        if (arg_.tcs >= 0)
            f->tcs = (unsigned)arg_.tcs;
        return 0;
    }
    char path[PATH_MAX];
    record_path (path, sizeof (path));
    json_t *rec = env ? NULL : json_load_file (path, 0, NULL);
    if (rec) {
        int rc = facts_from_json (rec, f);
        json_decref (rec);
        if (rc == 0)
            return 0;
    }
    char api[256];
    json_t *job;
    snprintf (api, sizeof (api), "/v1/jobs/%s", arg_.job);
    if (broker_call ("GET", api, NULL, &job, error) < 0)
        return fmb_error_prefix (
            error,
            "job %s (give --uid and --vnis to work without the broker)",
            arg_.job);
    int rc = facts_from_json (job, f);
    if (arg_.ncores > 0)
        f->ncores = (unsigned)arg_.ncores;
    if (env)
        *env = json_incref (json_object_get (job, "env"));
    json_decref (job);
    if (rc < 0) {
        errno = EPROTO;
        return fmb_errorf (
            error, "job %s: the broker's answer has no uid/vnis", arg_.job);
    }
    return 0;
}

static int write_record (const struct job_facts *f, json_t *services)
{
    char path[PATH_MAX];
    struct fmb_error e;
    json_t *vnis = json_array ();
    char tcs[16];
    for (unsigned i = 0; i < f->nvnis; i++)
        json_array_append_new (vnis, json_integer (f->vnis[i]));
    snprintf (tcs, sizeof (tcs), "0x%x", f->tcs);
    json_t *o = json_pack ("{s:s, s:I, s:o, s:i, s:s, s:O}",
                           "job",
                           f->id,
                           "uid",
                           (json_int_t)f->uid,
                           "vnis",
                           vnis,
                           "ncores",
                           (int)f->ncores,
                           "tcs",
                           tcs,
                           "services",
                           services);
    char *text = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    record_path (path, sizeof (path));
    int rc = fmb_mkdir_p (arg_.state_dir, 0700, &e);
    if (rc == 0)
        rc = fmb_write_file_atomic (path, 0600, text, strlen (text), &e);
    if (rc < 0)
        fmb_log (LOG_WARNING, "job %s: %s", f->id, e.text);
    free (text);
    return rc;
}

/* ---- devices ------------------------------------------------------- */

/* Load libcxi and list the NICs.  0 with *ret NULL: nothing to do here. */
static int devices (struct cxil_device_list **ret)
{
    struct fmb_error e;
    *ret = NULL;
    if (cxilib_open (arg_.libcxi, &lib, &e) < 0) {
        if (errno == EOPNOTSUPP) {
            fmb_log (LOG_NOTICE,
                     "no libcxi (%s): no Slingshot NICs to manage, nothing to do",
                     e.text);
            return 0;
        }
        fmb_log (LOG_ERR, "%s", e.text);
        return -1;
    }
    int rc = lib.get_device_list (ret);
    if (rc < 0) {
        fmb_log (LOG_ERR, "cxil_get_device_list: %s", strerror (-rc));
        return -1;
    }
    if ((*ret)->count == 0) {
        fmb_log (LOG_NOTICE, "no Slingshot NICs on this node: nothing to do");
        lib.free_device_list (*ret);
        *ret = NULL;
    }
    return 0;
}

static const char *errname (int neg)
{
    switch (-neg) {
    case EPERM:
        return "EPERM (not root?)";
    case EINVAL:
        return "EINVAL";
    case EEXIST:
        return "EEXIST (a VNI is already in another service)";
    case ENOSPC:
        return "ENOSPC";
    case EBUSY:
        return "EBUSY";
    case ENOENT:
        return "ENOENT";
    default:
        return strerror (-neg);
    }
}

/* ---- prolog -------------------------------------------------------- */

struct created {
    struct cxil_dev *dev;
    unsigned svc;
};

static int cmd_prolog (void)
{
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    if (job_facts (&f, NULL, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        lib.free_device_list (dl);
        return EXIT_FAIL;
    }
    if (f.nvnis == 0) {
        fmb_log (LOG_NOTICE, "job %s has no VNIs: no CXI services to create", f.id);
        lib.free_device_list (dl);
        return 0;
    }
    struct created *made = calloc (dl->count, sizeof (*made));
    json_t *services = json_array ();
    int nmade = 0, rc = 0;
    char why[256] = "";
    /* Intent first: the job's facts are on disk before any service
     * exists, so a crash in between can still be cleaned up. */
    if (!arg_.dry_run)
        write_record (&f, services);
    for (unsigned i = 0; i < dl->count && rc == 0; i++) {
        struct cxil_dev *dev;
        struct cxi_svc_desc d;
        int r = lib.open_device (dl->info[i].dev_id, &dev);
        if (r < 0) {
            fmb_log (LOG_WARNING,
                     "%s: cannot open: %s, ignoring",
                     dl->info[i].device_name,
                     errname (r));
            continue;
        }
        svc_recipe (&cfg, &dev->info, &f, &d);
        if (arg_.dry_run) {
            svc_print (stdout, dev->info.device_name, &d);
            lib.close_device (dev);
            continue;
        }
        for (int attempt = 0;; attempt++) {
            struct cxi_svc_fail_info fi;
            char change[160];
            memset (&fi, 0, sizeof (fi));
            r = lib.alloc_svc (dev, &d, &fi);
            if (r > 0 || r != -ENOSPC || attempt > 2 * CXI_RSRC_TYPE_MAX)
                break;
            if (!svc_scale_back (&d, &fi, change, sizeof (change))) {
                snprintf (why,
                          sizeof (why),
                          "%s: not enough NIC resources even at the minimum",
                          dev->info.device_name);
                break;
            }
            fmb_log (
                LOG_WARNING, "job %s: %s: %s", f.id, dev->info.device_name, change);
        }
        if (r > 0) {
            made[nmade].dev = dev;
            made[nmade++].svc = (unsigned)r;
            json_array_append_new (
                services,
                json_pack ("{s:s, s:i}", "device", dev->info.device_name, "svc_id", r));
            fmb_log (LOG_INFO,
                     "job %s: %s: service %d (uid %u)",
                     f.id,
                     dev->info.device_name,
                     r,
                     f.uid);
            continue;
        }
        if (!why[0])
            snprintf (why,
                      sizeof (why),
                      "%s: cxil_alloc_svc: %s",
                      dev->info.device_name,
                      errname (r));
        lib.close_device (dev);
        rc = EXIT_FAIL;
    }
    if (rc != 0) {
        /* All or nothing: remove what this run created. */
        fmb_log (LOG_ERR,
                 "job %s: %s; removing the %d service(s) created",
                 f.id,
                 why,
                 nmade);
        for (int i = 0; i < nmade; i++) {
            int r = lib.destroy_svc (made[i].dev, made[i].svc);
            if (r < 0)
                fmb_log (LOG_ERR,
                         "job %s: %s: destroy service %u: %s",
                         f.id,
                         made[i].dev->info.device_name,
                         made[i].svc,
                         errname (r));
        }
        json_array_clear (services);
        report ("failed", why);
    } else if (!arg_.dry_run) {
        write_record (&f, services);
        report ("created", NULL);
    }
    for (int i = 0; i < nmade; i++)
        lib.close_device (made[i].dev);
    json_decref (services);
    free (made);
    lib.free_device_list (dl);
    return rc;
}

/* ---- epilog -------------------------------------------------------- */

static void sleep_s (unsigned s)
{
    struct timespec ts = {s, 0};
    nanosleep (&ts, NULL);
}

/* Destroy one service, retrying EBUSY once a second within the window. */
static int destroy_with_retry (struct cxil_dev *dev, unsigned svc, const char *job)
{
    time_t end = time (NULL) + arg_.retry_busy;
    for (;;) {
        int r = lib.destroy_svc (dev, svc);
        if (r != -EBUSY || time (NULL) >= end)
            return r;
        fmb_log (LOG_INFO,
                 "job %s: %s: service %u busy, retrying",
                 job,
                 dev->info.device_name,
                 svc);
        sleep_s (1);
    }
}

static int cmd_epilog (void)
{
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    char why[256] = "";
    int failures = 0, destroyed = 0;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl) {
        report ("destroyed", "no Slingshot NICs");
        return 0;
    }
    if (job_facts (&f, NULL, &e) < 0) {
        lib.free_device_list (dl);
        /* No record here and no broker to ask: prolog created nothing on
         * this node (it records the job before creating anything), so
         * there is nothing known to destroy; draining would be wrong. */
        if (errno == EHOSTUNREACH || errno == ENOENT) {
            fmb_log (LOG_WARNING,
                     "%s; no record of the job on this node: nothing to destroy",
                     e.text);
            return 0;
        }
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_FAIL;
    }
    for (unsigned i = 0; i < dl->count; i++) {
        struct cxil_dev *dev;
        struct cxil_svc_list *sl;
        if (lib.open_device (dl->info[i].dev_id, &dev) < 0)
            continue;
        int r = lib.get_svc_list (dev, &sl);
        if (r < 0) {
            snprintf (why,
                      sizeof (why),
                      "%s: cxil_get_svc_list: %s",
                      dev->info.device_name,
                      errname (r));
            failures++;
            lib.close_device (dev);
            continue;
        }
        for (unsigned s = 0; s < sl->count; s++) {
            const struct cxi_svc_desc *d = &sl->descs[s];
            if (!svc_is_job (d, f.uid, f.vnis, f.nvnis))
                continue;
            if (arg_.dry_run) {
                printf ("would destroy ");
                svc_print (stdout, dev->info.device_name, d);
                continue;
            }
            r = destroy_with_retry (dev, d->svc_id, f.id);
            if (r < 0) {
                snprintf (why,
                          sizeof (why),
                          "%s: destroy service %u: %s%s",
                          dev->info.device_name,
                          d->svc_id,
                          errname (r),
                          r == -EBUSY ? " past the retry window" : "");
                fmb_log (LOG_ERR, "job %s: %s", f.id, why);
                failures++;
            } else {
                destroyed++;
                fmb_log (LOG_INFO,
                         "job %s: %s: service %u destroyed",
                         f.id,
                         dev->info.device_name,
                         d->svc_id);
            }
        }
        free (sl);
        lib.close_device (dev);
    }
    lib.free_device_list (dl);
    if (arg_.dry_run)
        return 0;
    if (failures) {
        report ("failed", why);
        return EXIT_FAIL; /* the node must be drained */
    }
    char path[PATH_MAX];
    record_path (path, sizeof (path));
    unlink (path);
    report ("destroyed", NULL);
    return 0;
}

/* ---- env ----------------------------------------------------------- */

static void shell_quote (FILE *out, const char *s)
{
    fputc ('\'', out);
    for (; *s; s++) {
        if (*s == '\'')
            fputs ("'\\''", out);
        else
            fputc (*s, out);
    }
    fputc ('\'', out);
}

static int cmd_env (void)
{
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    json_t *env = NULL;
    if (job_facts (&f, arg_.have_facts ? NULL : &env, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_FAIL;
    }
    if (devices (&dl) < 0) {
        json_decref (env);
        return EXIT_FAIL;
    }
    json_t *out = json_object ();
    char buf[512] = "", ids[256] = "", lnx[512] = "";
    for (unsigned i = 0; i < f.nvnis; i++)
        snprintf (buf + strlen (buf),
                  sizeof (buf) - strlen (buf),
                  "%s%u",
                  i ? "," : "",
                  f.vnis[i]);
    if (f.nvnis)
        json_object_set_new (out, "SLINGSHOT_VNIS", json_string (buf));
    buf[0] = '\0';
    for (unsigned i = 0; dl && i < dl->count; i++) {
        struct cxil_dev *dev;
        struct cxil_svc_list *sl = NULL;
        int svc = -1;
        if (lib.open_device (dl->info[i].dev_id, &dev) == 0) {
            if (lib.get_svc_list (dev, &sl) == 0)
                for (unsigned s = 0; s < sl->count; s++)
                    if (svc_is_job (&sl->descs[s], f.uid, f.vnis, f.nvnis))
                        svc = (int)sl->descs[s].svc_id;
            free (sl);
            lib.close_device (dev);
        }
        snprintf (buf + strlen (buf),
                  sizeof (buf) - strlen (buf),
                  "%s%s",
                  i ? "," : "",
                  dl->info[i].device_name);
        snprintf (
            ids + strlen (ids), sizeof (ids) - strlen (ids), "%s%d", i ? "," : "", svc);
        if (svc > 0)
            snprintf (lnx + strlen (lnx),
                      sizeof (lnx) - strlen (lnx),
                      "%sshm+cxi:%s",
                      lnx[0] ? "|" : "",
                      dl->info[i].device_name);
    }
    if (dl) {
        json_object_set_new (out, "SLINGSHOT_DEVICES", json_string (buf));
        json_object_set_new (out, "SLINGSHOT_SVC_IDS", json_string (ids));
        lib.free_device_list (dl);
    }
    snprintf (buf, sizeof (buf), "0x%x", f.tcs);
    json_object_set_new (out, "SLINGSHOT_TCS", json_string (buf));
    const char *k;
    json_t *v;
    json_object_foreach (env, k, v) if (strncmp (k, "FI_CXI_", 7) == 0)
        json_object_set (out, k, v);
    if (arg_.lnx && lnx[0])
        json_object_set_new (out, "FI_LNX_PROV_LINKS", json_string (lnx));
    bool slurm = arg_.format == AGENT_FORMAT_SLURM;
    if (arg_.format == AGENT_FORMAT_JSON)
        json_dumpf (out, stdout, JSON_COMPACT | JSON_SORT_KEYS), putchar ('\n');
    else if (slurm) {
        /* Slurm's TaskProlog takes "export NAME=value" literally: no
         * quoting, one line each (our values never hold a newline). */
        json_object_foreach (out, k, v)
        {
            printf ("export %s=%s\n", k, json_string_value (v));
        }
    } else {
        const char *const order[] = {"SLINGSHOT_VNIS",
                                     "SLINGSHOT_DEVICES",
                                     "SLINGSHOT_SVC_IDS",
                                     "SLINGSHOT_TCS"};
        for (size_t i = 0; i < 4; i++)
            if ((v = json_object_get (out, order[i]))) {
                printf ("export %s=", order[i]);
                shell_quote (stdout, json_string_value (v));
                putchar ('\n');
            }
        json_object_foreach (out, k, v) if (strncmp (k, "SLINGSHOT_", 10) != 0)
        {
            printf ("export %s=", k);
            shell_quote (stdout, json_string_value (v));
            putchar ('\n');
        }
    }
    json_decref (out);
    json_decref (env);
    return 0;
}

/* ---- list and clean ------------------------------------------------ */

static json_t *svc_json (const struct cxi_svc_desc *d)
{
    json_t *vnis = json_array (), *lim = json_object ();
    unsigned tcs = 0;
    for (int i = 0; i < d->num_vld_vnis; i++)
        json_array_append_new (vnis, json_integer (d->vnis[i]));
    for (int i = 0; i < CXI_TC_ETH; i++)
        tcs |= d->tcs[i] ? 1u << i : 0;
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        json_object_set_new (lim,
                             svc_rsrc_names[t],
                             json_pack ("{s:i, s:i}",
                                        "reserved",
                                        d->limits.type[t].res,
                                        "max",
                                        d->limits.type[t].max));
    char tc[8];
    snprintf (tc, sizeof (tc), "0x%x", tcs);
    json_t *o = json_pack ("{s:i, s:b, s:b, s:b, s:o, s:s, s:o}",
                           "svc_id",
                           d->svc_id,
                           "system",
                           d->is_system_svc,
                           "default",
                           d->svc_id == CXI_DEFAULT_SVC_ID,
                           "enabled",
                           d->enable,
                           "vnis",
                           vnis,
                           "tcs",
                           tc,
                           "limits",
                           lim);
    if (d->restricted_members && d->members[0].type == CXI_SVC_MEMBER_UID)
        json_object_set_new (o, "uid", json_integer (d->members[0].svc_member.uid));
    return o;
}

static void numa_of (const struct cxil_devinfo *i, char *pci, size_t plen, int *numa)
{
    char path[128];
    snprintf (pci,
              plen,
              "%04x:%02x:%02x.%x",
              i->pci_domain,
              i->pci_bus,
              i->pci_device,
              i->pci_function);
    snprintf (path, sizeof (path), "/sys/bus/pci/devices/%s/numa_node", pci);
    FILE *f = fopen (path, "r");
    *numa = -1;
    if (f) {
        if (fscanf (f, "%d", numa) != 1)
            *numa = -1;
        fclose (f);
    }
}

/* One table row for service 's', naming every NIC that has an identical
 * one; 'done' remembers the services printed already. */
static void print_service_once (json_t *nics, json_t *s, json_t *done)
{
    size_t k, m;
    char *key = json_dumps (s, JSON_COMPACT | JSON_SORT_KEYS);
    if (json_object_get (done, key)) {
        free (key);
        return;
    }
    json_object_set_new (done, key, json_true ());
    char devs[128] = "", vnis[64] = "", id[24];
    json_t *n2, *s2, *v;
    json_array_foreach (nics, k, n2)
    {
        json_array_foreach (json_object_get (n2, "services"), m, s2)
        {
            if (json_equal (s, s2))
                snprintf (devs + strlen (devs),
                          sizeof (devs) - strlen (devs),
                          "%s%s",
                          devs[0] ? "," : "",
                          json_string_value (json_object_get (n2, "device")));
        }
    }
    free (key);
    json_array_foreach (json_object_get (s, "vnis"), m, v)
    {
        snprintf (vnis + strlen (vnis),
                  sizeof (vnis) - strlen (vnis),
                  "%s%lld",
                  m ? "," : "",
                  (long long)json_integer_value (v));
    }
    snprintf (id,
              sizeof (id),
              "%lld%s%s",
              (long long)json_integer_value (json_object_get (s, "svc_id")),
              json_is_true (json_object_get (s, "system")) ? "/sys" : "",
              json_is_true (json_object_get (s, "enabled")) ? "" : "-");
    json_t *uid = json_object_get (s, "uid");
    char uidtext[16] = "-";
    if (uid)
        snprintf (
            uidtext, sizeof (uidtext), "%lld", (long long)json_integer_value (uid));
    printf ("%-10s %-8s %-6s %-16s %-5s",
            devs,
            id,
            uidtext,
            vnis[0] ? vnis : "-",
            json_string_value (json_object_get (s, "tcs")));
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        printf (" %5lld",
                (long long)json_integer_value (json_object_get (
                    json_object_get (json_object_get (s, "limits"), svc_rsrc_names[t]),
                    "reserved")));
    putchar ('\n');
}

static int cmd_list (void)
{
    struct cxil_device_list *dl;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    json_t *nics = json_array ();
    for (unsigned i = 0; dl && i < dl->count; i++) {
        struct cxil_dev *dev;
        struct cxil_svc_list *sl = NULL;
        char pci[32];
        int numa;
        numa_of (&dl->info[i], pci, sizeof (pci), &numa);
        json_t *svcs = json_array ();
        if (lib.open_device (dl->info[i].dev_id, &dev) == 0) {
            if (lib.get_svc_list (dev, &sl) == 0)
                for (unsigned s = 0; s < sl->count; s++)
                    json_array_append_new (svcs, svc_json (&sl->descs[s]));
            free (sl);
            lib.close_device (dev);
        }
        char nid[16];
        snprintf (nid, sizeof (nid), "%#x", dl->info[i].nid);
        json_t *nic = json_pack ("{s:s, s:s, s:s, s:o}",
                                 "device",
                                 dl->info[i].device_name,
                                 "nic_address",
                                 nid,
                                 "pci",
                                 pci,
                                 "services",
                                 svcs);
        json_object_set_new (
            nic, "numa", numa >= 0 ? json_integer (numa) : json_null ());
        json_array_append_new (nics, nic);
    }
    if (dl)
        lib.free_device_list (dl);
    if (arg_.json) {
        json_dumpf (nics, stdout, JSON_COMPACT);
        putchar ('\n');
        json_decref (nics);
        return 0;
    }
    size_t i, j;
    json_t *nic, *s;
    printf ("%-6s %-8s %-12s %s\n", "NIC", "ADDRESS", "PCI", "NUMA");
    json_array_foreach (nics, i, nic)
    {
        json_t *numa = json_object_get (nic, "numa");
        char numa_text[16] = "-";
        if (json_is_integer (numa))
            snprintf (numa_text,
                      sizeof (numa_text),
                      "%lld",
                      (long long)json_integer_value (numa));
        printf ("%-6s %-8s %-12s %s\n",
                json_string_value (json_object_get (nic, "device")),
                json_string_value (json_object_get (nic, "nic_address")),
                json_string_value (json_object_get (nic, "pci")),
                numa_text);
    }
    /* Services, identical ones on several NICs on one line. */
    printf ("\n%-10s %-8s %-6s %-16s %-5s", "NICS", "SVC", "UID", "VNIS", "TCS");
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        printf (" %5s", svc_rsrc_names[t]);
    putchar ('\n');
    json_t *done = json_object ();
    json_array_foreach (nics, i, nic)
    {
        json_array_foreach (json_object_get (nic, "services"), j, s)
        {
            print_service_once (nics, s, done);
        }
    }
    json_decref (done);
    json_decref (nics);
    return 0;
}

static int cmd_clean (void)
{
    struct cxil_device_list *dl;
    struct fmb_error e;
    json_t *list;
    int failures = 0;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    /* Without the broker's word on which jobs are active, touch nothing. */
    if (broker_call ("GET", "/v1/jobs?state=active&limit=1000", NULL, &list, &e) < 0) {
        fmb_log (LOG_ERR, "clean: %s; not touching any service", e.text);
        lib.free_device_list (dl);
        return EXIT_FAIL;
    }
    json_t *jobs = json_object_get (list, "jobs");
    for (unsigned i = 0; i < dl->count; i++) {
        struct cxil_dev *dev;
        struct cxil_svc_list *sl;
        if (lib.open_device (dl->info[i].dev_id, &dev) < 0)
            continue;
        if (lib.get_svc_list (dev, &sl) < 0) {
            lib.close_device (dev);
            continue;
        }
        for (unsigned s = 0; s < sl->count; s++) {
            const struct cxi_svc_desc *d = &sl->descs[s];
            bool in_pool = false, active = false;
            if (d->is_system_svc || d->svc_id == CXI_DEFAULT_SVC_ID ||
                !d->restricted_vnis)
                continue;
            for (int v = 0; v < d->num_vld_vnis; v++)
                in_pool |= d->vnis[v] >= cfg.vni_min && d->vnis[v] <= cfg.vni_max;
            size_t k;
            json_t *job;
            json_array_foreach (jobs, k, job)
            {
                struct job_facts f;
                if (facts_from_json (job, &f) == 0 &&
                    svc_is_job (d, f.uid, f.vnis, f.nvnis))
                    active = true;
            }
            if (!in_pool || active)
                continue;
            if (arg_.dry_run) {
                printf ("would destroy ");
                svc_print (stdout, dev->info.device_name, d);
                continue;
            }
            int r = destroy_with_retry (dev, d->svc_id, "(clean)");
            if (r < 0) {
                fmb_log (LOG_ERR,
                         "clean: %s: service %u: %s",
                         dev->info.device_name,
                         d->svc_id,
                         errname (r));
                failures++;
            } else
                fmb_log (LOG_NOTICE,
                         "clean: %s: destroyed stale service %u",
                         dev->info.device_name,
                         d->svc_id);
        }
        free (sl);
        lib.close_device (dev);
    }
    json_decref (list);
    lib.free_device_list (dl);
    return failures ? EXIT_FAIL : 0;
}

/* ---- main ---------------------------------------------------------- */

int main (int argc, char **argv)
{
    struct fmb_error e;
    fmb_log_init ("fmbroker-cxi", LOG_INFO);
    if (agent_args_parse (argc, argv, &arg_, &e) < 0) {
        fprintf (stderr, "fmbroker-cxi: %s\nTry 'fmbroker-cxi --help'.\n", e.text);
        return EXIT_USAGE;
    }
    if (arg_.help) {
        fputs (usage_text, stdout);
        return 0;
    }
    fmb_config_defaults (&cfg);
    const char *path =
        arg_.config ? arg_.config
                    : (access (FMB_CONFIG_PATH, F_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if (path && fmb_config_load (&cfg, path, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_USAGE;
    }
    fmb_log_set_level (cfg.log_level);
    if (!arg_.libcxi)
        arg_.libcxi = cfg.cxi_libcxi;
    if (api_target_init (&target, &cfg, arg_.socket, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_USAGE;
    }
    if (!arg_.state_dir)
        arg_.state_dir = AGENT_STATE_DIR;
    /* libcurl initialises itself (and OpenSSL) at the first broker call:
     * prolog and epilog given all facts never pay for it. */
    int rc = EXIT_USAGE;
    switch (arg_.cmd) {
    case AGENT_PROLOG:
        rc = cmd_prolog ();
        break;
    case AGENT_EPILOG:
        rc = cmd_epilog ();
        break;
    case AGENT_ENV:
        rc = cmd_env ();
        break;
    case AGENT_LIST:
        rc = cmd_list ();
        break;
    case AGENT_CLEAN:
        rc = cmd_clean ();
        break;
    }
    cxilib_close (&lib);
    api_target_clear (&target);
    return rc;
}

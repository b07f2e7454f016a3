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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "apiclient.h"
#include "args.h"
#include "brokerhttp.h"
#include "config.h"
#include "cxilib.h"
#include "fileutil.h"
#include "hostlist.h"
#include "jobset.h"
#include "spool.h"
#include "jobrecord.h"
#include "log.h"
#include "monotime.h"
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
    "  prolog --job ID [--ncores N] [--tcs MASK] [--uid UID --vnis V[,V...]]\n"
    "         (--tcs: traffic classes, names or 0xN, instead of the job's own\n"
    "         from the broker)\n"
    "         one service per NIC for the job; on -ENOSPC the reservations are\n"
    "         scaled back to what is free, with a warning; then writes the\n"
    "         job's environment record for env (owned by the job's uid, 0400)\n"
    "  prolog --job ID --run JSON [--ncores N]\n"
    "         make the job's RUN from this node first (Slurm plugstack run=node;\n"
    "         the broker needs [api] agent_run): JSON is the RUN body, its\n"
    "         \"nodes\" a Slurm host list; every node sends the same one\n"
    "         --report-later: the 'created' report is kept and sent by a detached\n"
    "         child after the prolog exits (a launcher waits for less)\n"
    "  epilog --job ID [--retry-busy SECONDS] [--no-report]\n"
    "         destroy the job's services (retrying EBUSY once a second for\n"
    "         SECONDS, default 5) and report to the broker; exit 1 = drain\n"
    "  housekeeping --job ID [--retry-busy SECONDS] [--no-report]\n"
    "         the epilog's second phase, for Flux's housekeeping or a site's\n"
    "         timer: retry destroying the job's leftover services for SECONDS\n"
    "         (default 300); exit 1, reporting 'failed' so that the broker\n"
    "         raises node_drain_requested, only if they are still there\n"
    "  env    --job ID [--format shell|json|slurm] [--lnx]\n"
    "         print the job's SLINGSHOT_* and FI_CXI_* variables from the record\n"
    "         the prolog wrote (STATE_DIR/JOB.env, readable by the job's user):\n"
    "         no broker, no token, no libcxi.  Only NICs with a service are\n"
    "         listed; none on this node: prints nothing, exit 1\n"
    "  list   [--json]   every NIC and its services\n"
    "  report --pending  deliver the node reports the broker missed (kept in\n"
    "                    STATE_DIR/reports; every prolog, epilog and clean also\n"
    "                    delivers them); exit 1 while some are still kept\n"
    "  clean [--all]     destroy job services of VNIs in [vni] pool that no job\n"
    "                    the broker has not released (active, lost, releasing)\n"
    "                    can own; never id 1 or system services.  It reads every\n"
    "                    such job, page by page; if it cannot (broker down,\n"
    "                    refused, bad answer) it destroys nothing, exit 1.\n"
    "                    --all (node-exclusive systems): every service but the\n"
    "                    default, system ones and those of unreleased jobs\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE     configuration (default " FMB_CONFIG_PATH
    ")\n"
    "      --libcxi PATH     libcxi to load (default [cxi] libcxi)\n"
    "      --socket PATH     the broker's socket (default [api] broker_url if set,\n"
    "                        else [api] socket)\n"
    "      --broker-url URL[,URL...]  replaces [api] broker_url: the broker's TLS\n"
    "                        listener, or an ordered list (active, standby) tried\n"
    "                        in turn when one cannot be reached\n"
    "      --state-dir DIR   this node's job records (default " AGENT_STATE_DIR
    ")\n"
    "      --node NAME       this node's name for reports (default: host name)\n"
    "  -n, --dry-run         print the descriptors, change nothing\n"
    "  -h, --help\n"
    "\n"
    "No NIC (or no libcxi and none in /sys/class/cxi): prolog and epilog succeed\n"
    "with nothing to do.  A chosen libcxi that does not load fails them.\n"
    "A report (created/destroyed/failed) the broker cannot take now is kept on\n"
    "the node and delivered later, so no VNI stays quarantined for want of it.\n"
    "A failed run's last line is its own job's reason (hooks show it to users).\n"
    "Exit status: 0 success, 1 failure (epilog: drain the node), 2 usage.\n";

static struct agent_args arg_;

/* Why this run failed, in words for the job's user: main() prints it as
 * the run's last line, after any line about other jobs (kept reports),
 * so that a hook showing the last line (the SPANK plugin, Flux's prolog)
 * shows this job's own reason.  The first failure is the reason; what
 * follows from it (removing services, keeping a report) is logged as it
 * happens.  Advice for admins goes to other lines, never into it. */
static char final_reason[FMB_ERROR_TEXT_MAX + 128];

static int fail_job (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static int fail_job (const char *fmt, ...)
{
    va_list ap;
    if (!final_reason[0]) {
        va_start (ap, fmt);
        vsnprintf (final_reason, sizeof (final_reason), fmt, ap);
        va_end (ap);
    }
    return EXIT_FAIL;
}

static struct fmb_config cfg;
static struct api_target target;
static struct cxilib lib;
static long broker_status; /* of the last broker call; 0: not reached */
static bool broker_down;   /* a call found no broker in this run */

/* ---- the broker ---------------------------------------------------- */

/* One call to the broker; *ret gets the JSON answer (2xx only). */
static int broker_call (const char *method,
                        const char *path,
                        const char *body,
                        json_t **ret,
                        struct fmb_error *error)
{
    struct api_reply r;
    broker_status = 0;
    if (broker_http_call (&target, BROKER_TIMEOUT_S, method, path, body, &r, error) <
        0) {
        broker_down = true; /* kept reports wait: no second timeout */
        return -1;          /* errno EHOSTUNREACH */
    }
    broker_status = r.status;
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

/* ---- node reports, durable ---------------------------------------- */

static void this_node (char *node, size_t len)
{
    if (arg_.node)
        snprintf (node, len, "%s", arg_.node);
    else {
        gethostname (node, len);
        node[len - 1] = '\0';
        node[strcspn (node, ".")] = '\0';
    }
}

/* Serialises report delivery on this node: a spooled "created" sent by
 * one run must never overtake the "destroyed" another run just sent. */
static int spool_lock (void)
{
    char path[PATH_MAX];
    struct fmb_error e;
    snprintf (path, sizeof (path), "%s/reports", arg_.state_dir);
    if (fmb_mkdir_p (path, 0700, &e) < 0)
        return -1;
    snprintf (path, sizeof (path), "%s/reports/.lock", arg_.state_dir);
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock (fd, LOCK_EX) < 0) {
        close (fd);
        fd = -1;
    }
    return fd;
}

static void spool_unlock (int fd)
{
    if (fd >= 0)
        close (fd);
}

enum sent { SENT, SEND_LATER, SEND_NEVER };

/* PUT the report; SEND_LATER when the broker could not take it now
 * (unreachable, 408, 429, 5xx), SEND_NEVER when it refused it for good. */
static enum sent send_report (const struct spooled_report *r, struct fmb_error *e)
{
    char path[512];
    snprintf (path, sizeof (path), "/v1/jobs/%s/nodes/%s", r->job, r->node);
    json_t *o = json_pack ("{s:s}", "cxi", r->cxi);
    if (r->detail[0])
        json_object_set_new (o, "detail", json_string (r->detail));
    char *body = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    int rc = broker_call ("PUT", path, body, NULL, e);
    free (body);
    if (rc == 0)
        return SENT;
    if (broker_status == 0 || broker_status == 408 || broker_status == 429 ||
        broker_status >= 500)
        return SEND_LATER;
    return SEND_NEVER;
}

static void report (const char *cxi, const char *detail)
{
    struct spooled_report r;
    struct fmb_error e;
    if (arg_.no_report || arg_.dry_run)
        return;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", arg_.job);
    this_node (r.node, sizeof (r.node));
    snprintf (r.cxi, sizeof (r.cxi), "%s", cxi);
    snprintf (r.detail, sizeof (r.detail), "%s", detail ? detail : "");
    r.at_ms = fmb_realtime_ms ();
    int lock = spool_lock ();
    enum sent sent = send_report (&r, &e);
    if (sent == SEND_LATER) {
        struct fmb_error se;
        broker_down = true;
        if (spool_put (arg_.state_dir, &r, &se) < 0)
            fmb_log (LOG_ERR,
                     "job %s: reporting '%s' to the broker failed (%s), and keeping "
                     "it failed too: %s",
                     r.job,
                     cxi,
                     e.text,
                     se.text);
        else
            fmb_log (LOG_WARNING,
                     "job %s: reporting '%s' to the broker failed: %s; kept in "
                     "%s/reports for the next agent run or 'fmbroker-cxi report "
                     "--pending'",
                     r.job,
                     cxi,
                     e.text,
                     arg_.state_dir);
    } else {
        if (sent == SEND_NEVER)
            fmb_log (LOG_WARNING,
                     "job %s: the broker refused the report '%s': %s",
                     r.job,
                     cxi,
                     e.text);
        /* Either way an older kept report of this job is superseded. */
        if (spool_drop (arg_.state_dir, r.job, r.node, &e) < 0)
            fmb_log (LOG_WARNING, "%s", e.text);
    }
    spool_unlock (lock);
}

/* prolog --report-later: the 'created' report is kept (durably, as any
 * report the broker could not take) and delivered by a detached child
 * after this process has exited: the job's launch waits for the prolog,
 * not for the report.  The child has no output (the hook's pipe must
 * close); what it could not deliver stays kept for the next run. */
static bool delivery_detached;

static void deliver_pending (void);

static void report_after_exit (const char *cxi)
{
    struct spooled_report r;
    struct fmb_error e;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", arg_.job);
    this_node (r.node, sizeof (r.node));
    snprintf (r.cxi, sizeof (r.cxi), "%s", cxi);
    r.at_ms = fmb_realtime_ms ();
    int lock = spool_lock ();
    int rc = spool_put (arg_.state_dir, &r, &e);
    spool_unlock (lock);
    if (rc < 0) {
        fmb_log (LOG_WARNING, "job %s: %s; reporting now", r.job, e.text);
        report (cxi, NULL);
        return;
    }
    fflush (NULL);
    pid_t pid = fork ();
    if (pid < 0) {
        deliver_pending ();
        return;
    }
    if (pid == 0) {
        if (fork () == 0) {
            int null = open ("/dev/null", O_RDWR);
            setsid ();
            /* Bookkeeping yields to the job's tasks, which start now
             * (nice 10: still delivered on a node whose cores they keep
             * busy, unlike an idle-only class). */
            (void)setpriority (PRIO_PROCESS, 0, 10);
            if (null >= 0) {
                dup2 (null, STDIN_FILENO);
                dup2 (null, STDOUT_FILENO);
                dup2 (null, STDERR_FILENO);
            }
            deliver_pending ();
        }
        _exit (0);
    }
    while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
    delivery_detached = true;
}

struct pending_ctx {
    unsigned delivered, refused, left;
};

static int deliver_one (const struct spooled_report *r, void *arg)
{
    struct pending_ctx *pc = arg;
    struct fmb_error e;
    enum sent sent = send_report (r, &e);
    if (sent == SEND_LATER) {
        fmb_log (LOG_WARNING,
                 "job %s: kept report '%s' of node %s still not delivered: %s",
                 r->job,
                 r->cxi,
                 r->node,
                 e.text);
        return 1; /* the broker is away: the rest waits too */
    }
    if (sent == SENT) {
        pc->delivered++;
        fmb_log (LOG_NOTICE,
                 "job %s: delivered the kept report '%s' of node %s",
                 r->job,
                 r->cxi,
                 r->node);
    } else {
        pc->refused++;
        fmb_log (LOG_WARNING,
                 "job %s: the broker refused the kept report '%s' of node %s: %s; "
                 "dropping it",
                 r->job,
                 r->cxi,
                 r->node,
                 e.text);
    }
    if (spool_drop (arg_.state_dir, r->job, r->node, &e) < 0)
        fmb_log (LOG_WARNING, "%s", e.text);
    return 0;
}

static int count_one (const struct spooled_report *r, void *arg)
{
    (void)r;
    ((struct pending_ctx *)arg)->left++;
    return 0;
}

/* Deliver the reports kept by earlier runs. */
static unsigned deliver_pending_left (void)
{
    struct pending_ctx pc = {0};
    struct fmb_error e;
    int lock = spool_lock ();
    if (spool_each (arg_.state_dir, deliver_one, &pc, &e) < 0)
        fmb_log (LOG_WARNING, "%s", e.text);
    spool_each (arg_.state_dir, count_one, &pc, &e);
    spool_unlock (lock);
    return pc.left;
}

static void deliver_pending (void)
{
    deliver_pending_left ();
}

/* report --pending: for a timer or housekeeping. */
static int cmd_report (void)
{
    unsigned left = deliver_pending_left ();
    if (left) {
        fmb_log (LOG_ERR,
                 "%u node report(s) still not delivered (kept in %s/reports)",
                 left,
                 arg_.state_dir);
        return EXIT_FAIL;
    }
    return 0;
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
    const char *state = json_string_value (json_object_get (o, "state"));
    f->ended =
        state && (strcmp (state, "releasing") == 0 || strcmp (state, "released") == 0);
    return 0;
}

/* prolog --run: the job's RUN, made from this node (Slurm's plugstack
 * run=node: no PrologSlurmctld, so srun's launch does not wait for the
 * controller).  Every node of the job sends the same request; the first
 * creates the job, the others get the same answer.  *job: the broker's. */
static int run_from_node (json_t **job, struct fmb_error *error)
{
    json_error_t jerr;
    char path[256];
    json_t *body = json_loads (arg_.run, JSON_REJECT_DUPLICATES, &jerr);
    json_t *nodes = json_object_get (body, "nodes");
    if (!json_is_object (body)) {
        json_decref (body);
        errno = EINVAL;
        return fmb_errorf (error, "job %s: --run: not a JSON object", arg_.job);
    }
    if (json_is_string (nodes)) { /* a hostlist, as Slurm gives it */
        json_t *names = json_array ();
        if (hostlist_expand (json_string_value (nodes), names, error) < 0) {
            json_decref (names);
            json_decref (body);
            return fmb_error_prefix (error, "job %s: --run: nodes", arg_.job);
        }
        json_object_set_new (body, "nodes", names);
    }
    char *text = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    snprintf (path, sizeof (path), "/v1/jobs/%s", arg_.job);
    int rc = text ? broker_call ("PUT", path, text, job, error) : -1;
    free (text);
    if (rc < 0)
        return fmb_error_prefix (
            error, "job %s: the broker did not RUN the job", arg_.job);
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
    char api[512], node[256];
    json_t *job;
    /* The job as this node needs it: not the list of every node.  A
     * broker older than that view answers 405, and a host name that is no
     * node name cannot ask for it: then the whole job. */
    this_node (node, sizeof (node));
    snprintf (api, sizeof (api), "/v1/jobs/%s/nodes/%s", arg_.job, node);
    int got = -1;
    bool whole = !valid_node_name (node);
    if (arg_.run) {
        if (run_from_node (&job, error) < 0)
            return -1;
        got = 0;
        whole = false;
    } else if (!whole) {
        got = broker_call ("GET", api, NULL, &job, error);
        whole = got < 0 && broker_status == 405;
    }
    if (whole) {
        snprintf (api, sizeof (api), "/v1/jobs/%s", arg_.job);
        got = broker_call ("GET", api, NULL, &job, error);
    }
    if (got < 0) {
        fmb_log (LOG_INFO,
                 "job %s: the broker did not give the job's facts; by hand, "
                 "--uid and --vnis do without it",
                 arg_.job);
        return fmb_error_prefix (
            error, "job %s: cannot get the job's VNIs from the broker", arg_.job);
    }
    int rc = facts_from_json (job, f);
    if (arg_.ncores > 0)
        f->ncores = (unsigned)arg_.ncores;
    if (arg_.tcs >= 0) /* the job's own choice (Slurm: --fmb-tcs) */
        f->tcs = (unsigned)arg_.tcs;
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

/* The first NIC the kernel's cxi driver shows (name into 'nic'), or
 * false.  FMBROKER_CXI_SYSFS replaces /sys/class/cxi (tests). */
static bool sysfs_nic (char *nic, size_t len)
{
    const char *dir = getenv ("FMBROKER_CXI_SYSFS");
    DIR *d = opendir (dir && *dir ? dir : "/sys/class/cxi");
    struct dirent *de;
    bool found = false;
    if (!d)
        return false;
    while (!found && (de = readdir (d)))
        if (de->d_name[0] != '.') {
            snprintf (nic, len, "%s", de->d_name);
            found = true;
        }
    closedir (d);
    return found;
}

/* A libcxi that cannot be loaded means "no Slingshot NICs here" only when
 * nobody chose it (the [cxi] libcxi default) and the kernel shows no
 * NIC: a mistyped path, or a node whose libcxi is missing, must not turn
 * isolation off while saying "nothing to do". */
#define LIBCXI_DEFAULT "libcxi.so.1"
static int no_libcxi (const char *why)
{
    char nic[256];
    if (strcmp (arg_.libcxi, LIBCXI_DEFAULT) != 0) {
        fmb_log (LOG_ERR,
                 "%s: the libcxi chosen (--libcxi or [cxi] libcxi) cannot be used",
                 why);
        fail_job (
            "this node's libcxi cannot be loaded: no job can get CXI services "
            "here");
        return -1;
    }
    if (sysfs_nic (nic, sizeof (nic))) {
        fmb_log (LOG_ERR,
                 "%s, but this node has Slingshot NICs (%s): install libcxi or set "
                 "[cxi] libcxi",
                 why,
                 nic);
        fail_job (
            "this node has Slingshot NICs (%s) but no libcxi: no job can get "
            "CXI services here",
            nic);
        return -1;
    }
    fmb_log (
        LOG_NOTICE, "no libcxi (%s): no Slingshot NICs to manage, nothing to do", why);
    return 0;
}

/* Load libcxi and list the NICs.  0 with *ret NULL: nothing to do here. */
static int devices (struct cxil_device_list **ret)
{
    struct fmb_error e;
    *ret = NULL;
    if (cxilib_open (arg_.libcxi, &lib, &e) < 0) {
        if (errno == EOPNOTSUPP)
            return no_libcxi (e.text);
        fail_job ("%s", e.text);
        return -1;
    }
    int rc = lib.get_device_list (ret);
    if (rc < 0) {
        fail_job ("cxil_get_device_list: %s", strerror (-rc));
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

/* Append "sep item" to a comma list in buf. */
static void list_add (char *buf, size_t len, const char *item)
{
    size_t used = strlen (buf);
    snprintf (buf + used, len - used, "%s%s", used ? "," : "", item);
}

/* The job's task environment on this node (<job>.env, readable by the
 * job's user): the broker's variables plus the devices that have a
 * service, aligned; none of them when no service was made ('reason'). */
static int write_env_record (const struct job_facts *f,
                             json_t *broker_env,
                             const struct created *made,
                             int nmade,
                             const char *reason,
                             struct fmb_error *e)
{
    struct jobrecord r;
    memset (&r, 0, sizeof (r));
    snprintf (r.job, sizeof (r.job), "%s", f->id);
    r.uid = f->uid;
    r.nservices = (unsigned)nmade;
    r.env = json_object ();
    if (nmade == 0)
        snprintf (r.reason, sizeof (r.reason), "%s", reason ? reason : "no service");
    const char *name;
    json_t *value;
    json_object_foreach (nmade ? broker_env : NULL, name, value)
    {
        const char *s = json_string_value (value);
        bool printable = s != NULL;
        for (const char *c = s; c && *c; c++)
            printable &= (unsigned char)*c >= 0x20 && *c != 0x7f;
        /* SLINGSHOT_* are this node's, set below. */
        if (strncmp (name, "SLINGSHOT_", 10) == 0)
            continue;
        /* The step id is the launcher's; anything unprintable is dropped
         * rather than trusted into a shell line. */
        if (!printable || !jobrecord_valid_name (name) ||
            strcmp (name, "FI_CXI_COLL_JOB_STEP_ID") == 0) {
            fmb_log (LOG_WARNING,
                     "job %s: not passing the broker's variable '%.64s' on",
                     f->id,
                     printable ? name : "(unprintable)");
            continue;
        }
        json_object_set (r.env, name, value);
    }
    if (nmade > 0) {
        char vnis[64] = "", devs[512] = "", ids[256] = "", item[32];
        for (unsigned i = 0; i < f->nvnis; i++) {
            snprintf (item, sizeof (item), "%u", f->vnis[i]);
            list_add (vnis, sizeof (vnis), item);
        }
        for (int i = 0; i < nmade; i++) {
            list_add (devs, sizeof (devs), made[i].dev->info.device_name);
            snprintf (item, sizeof (item), "%u", made[i].svc);
            list_add (ids, sizeof (ids), item);
        }
        snprintf (item, sizeof (item), "0x%x", f->tcs);
        json_object_set_new (r.env, "SLINGSHOT_VNIS", json_string (vnis));
        json_object_set_new (r.env, "SLINGSHOT_DEVICES", json_string (devs));
        json_object_set_new (r.env, "SLINGSHOT_SVC_IDS", json_string (ids));
        json_object_set_new (r.env, "SLINGSHOT_TCS", json_string (item));
    }
    int rc = jobrecord_write (arg_.state_dir, &r, e);
    jobrecord_clear (&r);
    return rc;
}

/* Create the job's service on device i; > 0 the svc id, 0 skipped (the
 * device cannot be opened, or dry run), < 0 failed with 'why' set. */
static int create_on_device (const struct job_facts *f,
                             const struct cxil_devinfo *info,
                             struct cxil_dev **devp,
                             char *why,
                             size_t whylen)
{
    struct cxil_dev *dev;
    struct cxi_svc_desc d;
    int r = lib.open_device (info->dev_id, &dev);
    if (r < 0) {
        fmb_log (LOG_WARNING,
                 "%s: cannot open: %s, ignoring",
                 info->device_name,
                 errname (r));
        return 0;
    }
    svc_recipe (&cfg, &dev->info, f, &d);
    if (arg_.dry_run) {
        svc_print (stdout, dev->info.device_name, &d);
        lib.close_device (dev);
        return 0;
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
                      whylen,
                      "%s: not enough NIC resources even at the minimum",
                      dev->info.device_name);
            break;
        }
        fmb_log (LOG_WARNING, "job %s: %s: %s", f->id, dev->info.device_name, change);
    }
    if (r > 0) {
        *devp = dev;
        fmb_log (LOG_INFO,
                 "job %s: %s: service %d (uid %u)",
                 f->id,
                 dev->info.device_name,
                 r,
                 f->uid);
        return r;
    }
    if (!why[0])
        snprintf (
            why, whylen, "%s: cxil_alloc_svc: %s", dev->info.device_name, errname (r));
    lib.close_device (dev);
    return -1;
}

/* This node's records of a job that gets no CXI services, and why: root's
 * says so too, for a fail-closed launcher takes its verdict from it, not
 * from the user's own record. */
static void record_no_services (const struct job_facts *f, const char *why)
{
    struct fmb_error e;
    if (arg_.dry_run)
        return;
    json_t *none = json_array ();
    write_record (f, none);
    json_decref (none);
    if (write_env_record (f, NULL, NULL, 0, why, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", f->id, e.text);
}

static int cmd_prolog (void)
{
    struct job_facts f;
    struct fmb_error e;
    struct cxil_device_list *dl;
    json_t *broker_env = NULL;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    if (job_facts (&f, arg_.have_facts ? NULL : &broker_env, &e) < 0) {
        lib.free_device_list (dl);
        return fail_job ("%s", e.text);
    }
    if (f.ended) {
        /* An earlier run of the job id, cleaned up by the RM (Slurm
         * requeues under the same id): its VNIs are not this run's, and
         * may be in quarantine for its nodes.  The RUN of this run did
         * not succeed; the job fails closed, saying why. */
        char why[256];
        snprintf (why,
                  sizeof (why),
                  "the broker has job %s as an ended run (its RUN for this run failed: "
                  "see the controller's log)",
                  f.id);
        record_no_services (&f, why);
        json_decref (broker_env);
        lib.free_device_list (dl);
        return fail_job ("%s: no CXI services created", why);
    }
    if (f.nvnis == 0) {
        fmb_log (LOG_NOTICE, "job %s has no VNIs: no CXI services to create", f.id);
        record_no_services (&f, "the job has no VNIs");
        json_decref (broker_env);
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
        struct cxil_dev *dev = NULL;
        int r = create_on_device (&f, &dl->info[i], &dev, why, sizeof (why));
        if (r < 0)
            rc = EXIT_FAIL;
        else if (r > 0) {
            made[nmade].dev = dev;
            made[nmade++].svc = (unsigned)r;
            json_array_append_new (
                services,
                json_pack ("{s:s, s:i}", "device", dev->info.device_name, "svc_id", r));
        }
    }
    if (rc == 0 && !arg_.dry_run) {
        write_record (&f, services);
        /* The tasks' environment only once every service exists. */
        if (write_env_record (
                &f, broker_env, made, nmade, "no NIC could be opened", &e) < 0) {
            snprintf (why, sizeof (why), "%s", e.text);
            rc = EXIT_FAIL;
        }
    }
    if (rc != 0) {
        /* All or nothing: remove what this run created. */
        fail_job ("job %s: %s", f.id, why);
        fmb_log (LOG_NOTICE, "job %s: removing the %d service(s) created", f.id, nmade);
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
        /* The job's user is told why, not left with a missing record. */
        if (write_env_record (&f, NULL, NULL, 0, why, &e) < 0)
            fmb_log (LOG_WARNING, "job %s: %s", f.id, e.text);
        report ("failed", why);
    } else if (!arg_.dry_run && arg_.report_later && !arg_.no_report)
        report_after_exit ("created");
    else if (!arg_.dry_run)
        report ("created", NULL);
    for (int i = 0; i < nmade; i++)
        lib.close_device (made[i].dev);
    json_decref (services);
    json_decref (broker_env);
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

/* Until when EBUSY is retried: one window for the whole run, however
 * many services are busy. */
static int64_t retry_deadline_ms;

/* Destroy one service, retrying EBUSY once a second within the window. */
static int destroy_with_retry (struct cxil_dev *dev, unsigned svc, const char *job)
{
    for (;;) {
        int r = lib.destroy_svc (dev, svc);
        if (r != -EBUSY || fmb_monotime_ms () >= retry_deadline_ms)
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
    /* The job's tasks are gone whatever happens to its services. */
    if (!arg_.dry_run && jobrecord_remove (arg_.state_dir, arg_.job, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", arg_.job, e.text);
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl) {
        report ("destroyed", "no Slingshot NICs");
        return 0;
    }
    if (job_facts (&f, NULL, &e) < 0) {
        lib.free_device_list (dl);
        /* No record here and no broker to ask (unreachable, or a token
         * it may not send): prolog created nothing on this node (it
         * records the job before creating anything), so there is nothing
         * known to destroy; draining would be wrong. */
        if (errno == EHOSTUNREACH || errno == ENOENT || errno == EACCES) {
            fmb_log (LOG_WARNING,
                     "%s; no record of the job on this node: nothing to destroy",
                     e.text);
            /* Said, so that the broker does not wait for this node; kept
             * for later if the broker is away. */
            report ("destroyed",
                    "no record of the job on this node: nothing was created");
            return 0;
        }
        return fail_job ("%s", e.text);
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
                char window[48] = "";
                if (r == -EBUSY)
                    snprintf (window,
                              sizeof (window),
                              " past the %u s retry window",
                              arg_.retry_busy);
                snprintf (why,
                          sizeof (why),
                          "%s: destroy service %u: %s%s",
                          dev->info.device_name,
                          d->svc_id,
                          errname (r),
                          window);
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
        report ("failed", why); /* the broker raises node_drain_requested */
        return fail_job (
            "job %s: %d service(s) left behind (%s): this node should be "
            "drained",
            f.id,
            failures,
            why);
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

/* FI_LNX_PROV_LINKS for the devices with a service: "shm+cxi:cxi0|..." */
static json_t *lnx_links (const char *devices)
{
    char out[1024] = "";
    const char *p = devices;
    while (*p) {
        size_t n = strcspn (p, ",");
        size_t used = strlen (out);
        snprintf (out + used,
                  sizeof (out) - used,
                  "%sshm+cxi:%.*s",
                  used ? "|" : "",
                  (int)n,
                  p);
        p += n + (p[n] == ',');
    }
    return json_string (out);
}

/* NAME=value lines: SLINGSHOT_* first in a fixed order, then the rest
 * sorted.  Shell: the value single-quoted ('\'' for a quote), so no
 * value can end the word; Slurm's TaskProlog takes the rest of the line
 * literally, so there it is printed as is.  Either way the record
 * guarantees no value holds a newline or another control character, so
 * no value can add a line or a variable. */
static int by_name (const void *a, const void *b)
{
    return strcmp (*(const char *const *)a, *(const char *const *)b);
}

static void print_env (json_t *out)
{
    static const char *const first[] = {
        "SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS"};
    const char *names[JOBRECORD_VARS_MAX + 8], *k;
    size_t n = 0;
    json_t *v;
    for (size_t i = 0; i < 4; i++)
        if (json_object_get (out, first[i]))
            names[n++] = first[i];
    size_t nfirst = n;
    json_object_foreach (out, k, v)
    {
        bool listed = false;
        for (size_t i = 0; i < 4; i++)
            listed |= strcmp (k, first[i]) == 0;
        if (!listed && n < sizeof (names) / sizeof (names[0]))
            names[n++] = k;
    }
    qsort (names + nfirst, n - nfirst, sizeof (names[0]), by_name);
    for (size_t i = 0; i < n; i++) {
        const char *value = json_string_value (json_object_get (out, names[i]));
        printf ("export %s=", names[i]);
        if (arg_.format == AGENT_FORMAT_SLURM)
            fputs (value, stdout);
        else
            shell_quote (stdout, value);
        putchar ('\n');
    }
}

/* The job's variables from this node's record (written by the prolog):
 * no broker, no libcxi, no token; the job's user can run it. */
static int cmd_env (void)
{
    struct jobrecord r;
    struct fmb_error e;
    if (arg_.have_facts) {
        fmb_log (LOG_ERR,
                 "env: --uid/--vnis are not taken: the job's variables come from "
                 "the record the prolog wrote");
        return EXIT_USAGE;
    }
    if (jobrecord_read (arg_.state_dir, arg_.job, &r, &e) < 0) {
        fmb_log (LOG_ERR,
                 "job %s: %s%s",
                 arg_.job,
                 e.text,
                 errno == ENOENT ? " (did the prolog run here?)" : "");
        return EXIT_FAIL;
    }
    if (r.nservices == 0) {
        fmb_log (
            LOG_ERR, "job %s has no CXI service on this node: %s", arg_.job, r.reason);
        jobrecord_clear (&r);
        return EXIT_FAIL;
    }
    json_t *out = json_deep_copy (r.env);
    const char *devs = json_string_value (json_object_get (out, "SLINGSHOT_DEVICES"));
    if (arg_.lnx && devs)
        json_object_set_new (out, "FI_LNX_PROV_LINKS", lnx_links (devs));
    if (arg_.format == AGENT_FORMAT_JSON) {
        json_dumpf (out, stdout, JSON_COMPACT | JSON_SORT_KEYS);
        putchar ('\n');
    } else
        print_env (out);
    json_decref (out);
    jobrecord_clear (&r);
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

/* Every job the broker has not released, every page of every such
 * state.  -1 when the set cannot be had whole: then nothing may go. */
static int unreleased_jobs (struct job_set *set, struct fmb_error *error)
{
    for (size_t st = 0; st < sizeof (jobset_states) / sizeof (jobset_states[0]); st++) {
        char after[JOB_ID_MAX + 1] = "";
        do {
            char path[256];
            json_t *page;
            snprintf (path,
                      sizeof (path),
                      "/v1/jobs?state=%s&limit=1000%s%s",
                      jobset_states[st],
                      after[0] ? "&after=" : "",
                      after);
            if (broker_call ("GET", path, NULL, &page, error) < 0)
                return -1;
            int rc = job_set_add_page (set, page, after, error);
            json_decref (page);
            if (rc < 0)
                return fmb_error_prefix (error, "GET %s", path);
        } while (after[0]);
    }
    return 0;
}

/* Is 'd' a candidate for clean: not the default or a system service, and
 * (without --all) a job service of a VNI in [vni] pool. */
static bool clean_candidate (const struct cxi_svc_desc *d)
{
    if (d->is_system_svc || d->svc_id == CXI_DEFAULT_SVC_ID)
        return false;
    if (arg_.all)
        return true;
    bool in_pool = false;
    for (int v = 0; d->restricted_vnis && v < d->num_vld_vnis; v++)
        in_pool |= d->vnis[v] >= cfg.vni_min && d->vnis[v] <= cfg.vni_max;
    return in_pool;
}

/* The same service as before (the driver reuses ids). */
static bool same_service (const struct cxi_svc_desc *a, const struct cxi_svc_desc *b)
{
    return a->svc_id == b->svc_id && a->num_vld_vnis == b->num_vld_vnis &&
           a->restricted_members == b->restricted_members &&
           memcmp (a->vnis, b->vnis, sizeof (a->vnis)) == 0 &&
           memcmp (a->members, b->members, sizeof (a->members)) == 0;
}

/* Destroy on 'dev' the candidates of 'before' (the services that existed
 * before the job list was read) that no unreleased job claims and that
 * are still there, unchanged.  Returns the number that failed. */
static int clean_device (struct cxil_dev *dev,
                         const struct cxil_svc_list *before,
                         const struct job_set *set)
{
    struct cxil_svc_list *now;
    int failures = 0;
    if (lib.get_svc_list (dev, &now) < 0)
        return 1;
    for (unsigned s = 0; s < now->count; s++) {
        const struct cxi_svc_desc *d = &now->descs[s];
        bool existed = false;
        for (unsigned b = 0; b < before->count; b++)
            existed |= same_service (d, &before->descs[b]);
        if (!existed || !clean_candidate (d) || job_set_claims (set, d))
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
    free (now);
    return failures;
}

static int cmd_clean (void)
{
    struct cxil_device_list *dl;
    struct fmb_error e;
    struct job_set set = {0};
    int failures = 0, rc = 0;
    if (devices (&dl) < 0)
        return EXIT_FAIL;
    if (!dl)
        return 0;
    struct cxil_dev **devs = calloc (dl->count, sizeof (*devs));
    struct cxil_svc_list **before = calloc (dl->count, sizeof (*before));
    /* The services first, then the jobs: a service listed here was made
     * by a prolog after its job's RUN, so its job is in the listing. */
    for (unsigned i = 0; i < dl->count; i++)
        if (lib.open_device (dl->info[i].dev_id, &devs[i]) < 0 ||
            lib.get_svc_list (devs[i], &before[i]) < 0) {
            fmb_log (LOG_WARNING,
                     "clean: %s: cannot list services, skipping",
                     dl->info[i].device_name);
            before[i] = NULL;
        }
    /* Without the broker's word on every job it has not released, a
     * service may belong to a live job: touch nothing. */
    if (unreleased_jobs (&set, &e) < 0) {
        fmb_log (LOG_ERR,
                 "clean: cannot get every job the broker has not released (%s); "
                 "not touching any service",
                 e.text);
        rc = EXIT_FAIL;
    } else
        fmb_log (LOG_INFO, "clean: %zu job(s) not released at the broker", set.n);
    for (unsigned i = 0; i < dl->count; i++) {
        if (rc == 0 && before[i])
            failures += clean_device (devs[i], before[i], &set);
        free (before[i]);
        if (devs[i])
            lib.close_device (devs[i]);
    }
    free (before);
    free (devs);
    job_set_clear (&set);
    lib.free_device_list (dl);
    return rc ? rc : failures ? EXIT_FAIL : 0;
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
    if (path && fmb_config_load_client (&cfg, path, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_USAGE;
    }
    fmb_log_set_level (cfg.log_level);
    if (!arg_.libcxi)
        arg_.libcxi = cfg.cxi_libcxi;
    if (arg_.broker_url && api_config_broker_url (&cfg, arg_.broker_url, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_USAGE;
    }
    api_target_init (&target, &cfg, arg_.socket);
    if (!arg_.state_dir)
        arg_.state_dir = AGENT_STATE_DIR;
    /* OpenSSL initialises itself at the first broker call:
     * prolog and epilog given all facts never pay for it. */
    int rc = EXIT_USAGE;
    retry_deadline_ms = fmb_monotime_ms () + (int64_t)arg_.retry_busy * 1000;
    switch (arg_.cmd) {
    case AGENT_PROLOG:
        rc = cmd_prolog ();
        break;
    case AGENT_EPILOG:
    case AGENT_HOUSEKEEPING:
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
    case AGENT_REPORT:
        rc = cmd_report ();
        break;
    }
    /* Reports earlier runs could not deliver go now, unless this run
     * already found the broker away. */
    if ((arg_.cmd == AGENT_PROLOG || arg_.cmd == AGENT_EPILOG ||
         arg_.cmd == AGENT_HOUSEKEEPING || arg_.cmd == AGENT_CLEAN) &&
        !arg_.dry_run && !arg_.no_report && !broker_down && !delivery_detached)
        deliver_pending ();
    /* The job's own reason last (final_reason). */
    if (rc != 0 && final_reason[0])
        fmb_log (LOG_ERR, "%s", final_reason);
    cxilib_close (&lib);
    api_target_clear (&target);
    return rc;
}

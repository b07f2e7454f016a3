/* fmbroker_spank.c: the Slurm SPANK plugin of fmbroker.
 *
 * One shared object runs in several Slurm processes (spank(7)); each
 * callback below checks the context it is in:
 *
 *   srun / sbatch / salloc  options --fmb-hwcoll, --fmb-vnis, --fmb-tcs,
 *                           checked at submission and handed to the RUN
 *                           (PrologSlurmctld, a node prolog: SPANK_FMB_*;
 *                           the node service: the job's environment,
 *                           SLURM_SPANK_FMB_*)
 *   slurmstepd (per step    the job's first step on the node asks the node
 *   per node)               service for the job's setup (its CXI services
 *                           and record; no Prolog= needed); every step
 *                           reads the job's record (no broker, no FM
 *                           call), sets the tasks' SLINGSHOT_* / FI_CXI_*
 *                           and the step id, applies the failure policy;
 *                           at the step's end, node 0 of a step of a job
 *                           with a multicast reservation has the step's
 *                           trees released
 *
 * No SPANK job prolog or epilog: slurmd would start a slurmstepd for
 * them at every job's launch on every node (a third of a plain launch's
 * time, measured); nor does fmbroker need slurm.conf's Prolog=, which
 * costs every launch some 20 ms of slurmd's own.  The node epilog is
 * slurm.conf's Epilog=, fmbroker-slurm-prolog handing it to the node
 * service (src/agent/serve.h), or fmbroker-cxi itself.
 *
 * plugstack.conf arguments: see spankcore.h and doc/slurm.md.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "config.h"
#include "jobrecord.h"
#include "monotime.h"
#include "nodeservice.h"
#include "spankcore.h"
#include "stepclean.h"

/* The headers read here are the release configure found and the
 * packages name (src/spank/CMakeLists.txt, FMB_SLURM_INCLUDE_DIR). */
#if defined(FMB_SLURM_VERSION_BUILT) && SLURM_VERSION_NUMBER != FMB_SLURM_VERSION_BUILT
#error \
    "slurm/slurm_version.h read here is not the one configure found: check FMB_SLURM_INCLUDE_DIR"
#endif
#ifndef FMB_SLURM_RELEASE_TEXT
#define FMB_SLURM_RELEASE_TEXT "(unknown)"
#endif

SPANK_PLUGIN (fmbroker, 1);

#define STEP_NAME_MAX 32
/* How long a job's first step waits for a node service that is not
 * there (fail_closed): a restart's gap, not a missing service. */
#define SERVICE_RESTART_WAIT_MS 3000

static struct spank_conf conf;

/* The user's options, as this process saw them. */
static struct {
    bool have_hwcoll, have_vnis, have_tcs;
    char hwcoll[SPANK_HWCOLL_MAX];
    unsigned vnis;
    unsigned tcs;
} opt;

/* slurmstepd: this step on this node. */
static struct {
    bool failed; /* no isolation and the policy is fail_closed */
    bool clean;  /* node 0 of a step of a job with a reservation */
    char job[16];
    char step[STEP_NAME_MAX];
    char state_dir[1024];
    /* the job's setup asked of the node service (fd -1: none in flight) */
    struct node_service_call setup;
    int64_t setup_t0; /* us, fmb_monotime_us */
    /* why the node service's setup failed, if it did: the step's reason
     * when no record follows (a service that died after taking it) */
    char setup_error[FMB_ERROR_TEXT_MAX];
} step = {.setup.fd = -1};

static int option_cb (int val, const char *optarg, int remote);

static char tcs_usage[256];
static struct spank_option options[] = {
    {"fmb-hwcoll",
     "on|off|auto",
     "Hardware collectives for the job: on (ask for them), off, or auto (the "
     "site's rule) [fmbroker]",
     1,
     'H',
     option_cb},
    {"fmb-vnis",
     "N",
     "VNIs for the job, 0..4 (0: no VNI, the job runs without fabric isolation) "
     "[fmbroker]",
     1,
     'V',
     option_cb},
    {"fmb-tcs", "LIST", tcs_usage, 1, 'T', option_cb},
    SPANK_OPTIONS_TABLE_END};

static int option_cb (int val, const char *optarg, int remote)
{
    struct fmb_error e;
    int rc = -1;
    switch (val) {
    case 'H':
        rc = spank_parse_hwcoll (optarg, opt.hwcoll, &e);
        opt.have_hwcoll = rc == 0;
        break;
    case 'V':
        rc = spank_parse_vni_count (optarg, &opt.vnis, &e);
        opt.have_vnis = rc == 0;
        break;
    case 'T':
        rc = spank_parse_tcs (optarg, conf.allowed_tcs, &opt.tcs, &e);
        opt.have_tcs = rc == 0;
        break;
    default:
        snprintf (e.text, sizeof (e.text), "unknown option %d", val);
    }
    if (rc < 0)
        slurm_error ("fmbroker: %s", e.text);
    (void)remote; /* the same check at submission and on the nodes */
    return rc;
}

static bool user_context (spank_context_t ctx)
{
    return ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE;
}

static void node_state_dir (char *out, size_t len);
static void step_name (uint32_t id, char *out, size_t len);

/* The job's setup request (nodeproto.h), as this step sees the job, for
 * the node service to make where no Prolog= runs.  The job, its uid,
 * this node and its CPUs are Slurm's own (the step's credential, signed
 * by slurmctld): the CPUs size this node's CXI services, never the RUN
 * (a user could write SLURM_JOB_CPUS_PER_NODE, and size a service on a
 * node others share).  The user's name is the uid's here.  The node list
 * and the job's options come from the step's environment, which the
 * job's user can change: doc/security.md says what that can and cannot
 * do. */
static void node_name (char *out, size_t len);

/* The step's environment variable 'from' into 'out' (len bytes); one
 * too long is left out, and said. */
static void setup_env_var (spank_t sp, char *out, size_t len, const char *from)
{
    spank_err_t rc = spank_getenv (sp, from, out, (int)len);
    if (rc == ESPANK_NOSPACE)
        slurm_error (
            "fmbroker: %s is longer than %zu bytes: not handed to the node "
            "service",
            from,
            len - 1);
    if (rc != ESPANK_SUCCESS)
        out[0] = '\0';
}

static void setup_request (spank_t sp, uint32_t jobid, struct node_request *r)
{
    uid_t uid = 0;
    char pwbuf[4096];
    struct passwd pw, *found = NULL;
    memset (r, 0, sizeof (*r));
    r->op = NODE_OP_SETUP;
    snprintf (r->job, sizeof (r->job), "%u", jobid);
    node_name (r->node, sizeof (r->node));
    if (spank_get_item (sp, S_JOB_UID, &uid) == ESPANK_SUCCESS) {
        r->uid = (uint32_t)uid;
        r->have_uid = true;
        if (getpwuid_r (uid, &pw, pwbuf, sizeof (pwbuf), &found) == 0 && found)
            snprintf (r->user, sizeof (r->user), "%s", found->pw_name);
    }
    char *cores = NULL;
    int ncores = spank_get_item (sp, S_JOB_ALLOC_CORES, &cores) == ESPANK_SUCCESS
                     ? spank_cpu_count (cores)
                     : -1;
    if (ncores > 0)
        r->ncores = (unsigned)ncores;
    setup_env_var (sp, r->nodes, sizeof (r->nodes), "SLURM_JOB_NODELIST");
    /* the job's options: slurmd's SLURM_SPANK_* of a batch job, or what
     * the srun, sbatch or salloc that made the job set (init_post_opt) */
    setup_env_var (sp, r->hwcoll, sizeof (r->hwcoll), "SLURM_SPANK_FMB_HWCOLL");
    setup_env_var (sp, r->vni_count, sizeof (r->vni_count), "SLURM_SPANK_FMB_VNIS");
    setup_env_var (sp, r->tcs, sizeof (r->tcs), "SLURM_SPANK_FMB_TCS");
}

/* slurmstepd, as root, before the step's tasks: the job's CXI services
 * on this node.  Where slurmd's Prolog= handed the job to the node
 * service, they may still be in the making; where no Prolog= runs (the
 * launch setup), nothing has made them yet.  Either way the step hands
 * the service the job's setup here, in slurm_spank_init, and reads the
 * answer in slurm_spank_user_init (setup_finish): meanwhile slurmstepd
 * sets up the step's I/O with srun while the service makes the setup.
 * The service makes it unless the job's record is there by its turn; a
 * later step finds the record, written last, and asks nothing. */
static void setup_start (spank_t sp)
{
    uint32_t jobid = 0, stepid = 0;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    static struct node_request req; /* large: not on slurmstepd's stack */
    struct fmb_error e;
    if (spank_get_item (sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
        spank_get_item (sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
        stepid == SLURM_EXTERN_CONT)
        return;
    node_state_dir (dir, sizeof (dir));
    snprintf (step.job, sizeof (step.job), "%u", jobid);
    step_name (stepid, step.step, sizeof (step.step));
    if (jobrecord_path (path, sizeof (path), dir, step.job) < 0)
        return;
    if (access (path, F_OK) == 0) {
        slurm_verbose (
            "fmbroker: job %s step %s: node service setup wait 0 ms "
            "(the job's record is there)",
            step.job,
            step.step);
        return;
    }
    step.setup_t0 = fmb_monotime_us ();
    setup_request (sp, jobid, &req);
    int rc = node_service_call_start (&step.setup, dir, &req, &e);
    /* A service restarting (systemctl restart, a package upgrade) has no
     * socket for a moment: fail_closed waits a little for it, fail_open
     * (nodes that may have no service at all) does not. */
    while (rc == 0 && conf.policy == SPANK_FAIL_CLOSED &&
           fmb_monotime_us () - step.setup_t0 < SERVICE_RESTART_WAIT_MS * 1000) {
        usleep (100 * 1000);
        rc = node_service_call_start (&step.setup, dir, &req, &e);
    }
    if (rc < 0) {
        slurm_error ("fmbroker: job %s step %s: %s", step.job, step.step, e.text);
        snprintf (step.setup_error, sizeof (step.setup_error), "%s", e.text);
    } else if (rc == 0) {
        /* no Prolog= made the record and no service answers: the admin's
         * words here, the user's in the step's refusal */
        slurm_error (
            "fmbroker: job %s step %s: no node service answers at %s/%s and no "
            "node prolog made the job's record: start fmbroker-cxi.service "
            "(doc/slurm.md)",
            step.job,
            step.step,
            dir,
            JOBRECORD_SERVICE_SOCKET);
        snprintf (step.setup_error,
                  sizeof (step.setup_error),
                  "no node service answers on this node");
    }
}

/* The service's answer to setup_start, before the step reads the record
 * (the socket was opened as root; reading it needs no privilege). */
static void setup_finish (void)
{
    char line[FMB_ERROR_TEXT_MAX + 160];
    struct fmb_error e;
    if (step.setup.fd < 0)
        return;
    int64_t t1 = fmb_monotime_us ();
    int64_t left = (step.setup_t0 - t1) / 1000 + NODE_SERVICE_WAIT_MS;
    if (node_service_call_finish (
            &step.setup, left > 0 ? (int)left : 0, line, sizeof (line), &e) < 0) {
        slurm_error ("fmbroker: job %s step %s: %s", step.job, step.step, e.text);
        snprintf (step.setup_error, sizeof (step.setup_error), "%s", e.text);
    } else if (atoi (line) != 0) {
        /* refused (a request it could not take): its reason, if any */
        const char *why = strchr (line, '\t');
        slurm_error (
            "fmbroker: job %s step %s: the node service refused the job's "
            "setup: %s",
            step.job,
            step.step,
            why && why[1] ? why + 1 : line);
        snprintf (step.setup_error,
                  sizeof (step.setup_error),
                  "the node service refused it (%.200s)",
                  why && why[1] ? why + 1 : line);
    } else {
        int64_t t2 = fmb_monotime_us ();
        slurm_verbose (
            "fmbroker: job %s step %s: node service setup wait %.1f ms "
            "(answered %.1f ms after the request)",
            step.job,
            step.step,
            (double)(t2 - t1) / 1000,
            (double)(t2 - step.setup_t0) / 1000);
    }
}

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    struct fmb_error e;
    spank_context_t ctx = spank_context ();
    if (spank_conf_parse (&conf, ac, av, &e) < 0) {
        slurm_error ("fmbroker: %s", e.text);
        return -1;
    }
    /* Once per slurmd start: which fmbroker, built for which Slurm. */
    if (ctx == S_CTX_SLURMD)
        slurm_info ("fmbroker: SPANK plugin %s for Slurm %s loaded (policy %s)",
                    FMB_VERSION,
                    FMB_SLURM_RELEASE_TEXT,
                    conf.policy == SPANK_FAIL_OPEN ? "fail_open" : "fail_closed");
    else
        slurm_debug ("fmbroker: SPANK plugin %s for Slurm %s loaded",
                     FMB_VERSION,
                     FMB_SLURM_RELEASE_TEXT);
    if (ctx == S_CTX_REMOTE)
        setup_start (sp);
    if (!user_context (ctx))
        return 0;
    char names[128];
    fmb_config_tcs_names (conf.allowed_tcs, names, sizeof (names));
    snprintf (tcs_usage,
              sizeof (tcs_usage),
              "Traffic classes for the job's CXI services, a comma list of %s "
              "[fmbroker]",
              names);
    for (struct spank_option *o = options; o->name; o++)
        if (spank_option_register (sp, o) != ESPANK_SUCCESS) {
            slurm_error ("fmbroker: cannot register --%s", o->name);
            return -1;
        }
    return 0;
}

/* One of the job's options, set or cleared: in the job's control
 * environment (PrologSlurmctld's and the node prolog's SPANK_FMB_*) and,
 * for a job this process makes, in its own environment as
 * SLURM_SPANK_FMB_*, the name slurmd gives them in a batch job's: every
 * step of the job inherits them from there, and a job's first step on a
 * node without Prolog= hands them to the node service (setup_start). */
static void job_option (spank_t sp, bool new_job, const char *name, const char *value)
{
    char env_name[64];
    snprintf (env_name, sizeof (env_name), "SLURM_SPANK_%s", name);
    if (value)
        spank_job_control_setenv (sp, name, value, 1);
    if (new_job && value)
        setenv (env_name, value, 1);
    else if (new_job)
        unsetenv (env_name); /* another job's, or the user's */
}

/* srun, sbatch, salloc: the options go with the job (job_option).  An
 * srun inside an allocation (SLURM_JOB_ID set) cannot change its job:
 * the job's options stay in its environment, whatever this srun says. */
int slurm_spank_init_post_opt (spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context ();
    char vnis[16], tcs[16];
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
        return 0;
    bool new_job = ctx == S_CTX_ALLOCATOR || !getenv ("SLURM_JOB_ID");
    snprintf (vnis, sizeof (vnis), "%u", opt.vnis);
    snprintf (tcs, sizeof (tcs), "0x%x", opt.tcs);
    job_option (sp, new_job, "FMB_HWCOLL", opt.have_hwcoll ? opt.hwcoll : NULL);
    job_option (sp, new_job, "FMB_VNIS", opt.have_vnis ? vnis : NULL);
    job_option (sp, new_job, "FMB_TCS", opt.have_tcs ? tcs : NULL);
    return 0;
}

/* ---- the node's job records ------------------------------------- */

/* This node's name: slurmd's, else the host's short name. */
static void node_name (char *out, size_t len)
{
    const char *node = getenv ("SLURMD_NODENAME");
    char host[256] = "";
    if (!node || !*node) {
        gethostname (host, sizeof (host) - 1);
        host[strcspn (host, ".")] = '\0';
        node = host;
    }
    snprintf (out, len, "%s", node);
}

/* conf.state_dir with "%n" replaced by this node's name (several
 * emulated nodes on one host keep their records apart). */
static void node_state_dir (char *out, size_t len)
{
    char node[256];
    node_name (node, sizeof (node));
    const char *pct = strstr (conf.state_dir, "%n");
    if (!pct)
        snprintf (out, len, "%s", conf.state_dir);
    else
        snprintf (out,
                  len,
                  "%.*s%s%s",
                  (int)(pct - conf.state_dir),
                  conf.state_dir,
                  node,
                  pct + 2);
}

/* ---- slurmstepd: the step's environment ---------------------------- */

static void step_name (uint32_t id, char *out, size_t len)
{
    if (id == SLURM_BATCH_SCRIPT)
        snprintf (out, len, "batch");
    else if (id == SLURM_INTERACTIVE_STEP)
        snprintf (out, len, "interactive");
    else
        snprintf (out, len, "%u", id);
}

/* The record's variables; the hardware-collective ones (FI_CXI_*, with
 * the step id) only for a numbered step of a job with a reservation.
 * As Slurm's switch/hpe_slingshot: the batch and interactive steps get
 * none, for the FM knows a job's steps by their decimal ids only (a
 * PATCH for step "batch" is nothing it is known to take), and a job
 * without a reservation has no step id to give. */
static bool set_step_env (spank_t sp, const struct jobrecord *r, bool numbered)
{
    const char *name;
    json_t *value;
    bool hwcoll = numbered && json_object_get (r->env, "FI_CXI_COLL_MCAST_TOKEN");
    json_object_foreach (r->env, name, value)
    {
        if (!hwcoll && strncmp (name, "FI_CXI_", 7) == 0)
            continue;
        if (spank_setenv (sp, name, json_string_value (value), 1) != ESPANK_SUCCESS)
            slurm_error ("fmbroker: job %s: cannot set %s", step.job, name);
    }
    if (hwcoll)
        spank_setenv (sp, "FI_CXI_COLL_JOB_STEP_ID", step.step, 1);
    return hwcoll;
}

/* fail_closed: the step does not start, and the user and slurmd's log
 * are told why (from user_init on, slurm_error reaches task 0's stderr). */
static void refuse_step (const struct fmb_error *e)
{
    slurm_error (
        "fmbroker: job %s step %s: no VNI isolation: %s; the step does "
        "not start (policy fail_closed)",
        step.job,
        step.step,
        e->text);
    step.failed = true;
}

int slurm_spank_user_init (spank_t sp, int ac, char **av)
{
    uint32_t jobid = 0, stepid = 0, nodeid = 0;
    struct jobrecord r;
    struct fmb_error e;
    (void)ac;
    (void)av;
    if (!spank_remote (sp) || spank_get_item (sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
        spank_get_item (sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
        stepid == SLURM_EXTERN_CONT)
        return 0;
    spank_get_item (sp, S_JOB_NODEID, &nodeid);
    setup_finish ();
    snprintf (step.job, sizeof (step.job), "%u", jobid);
    step_name (stepid, step.step, sizeof (step.step));
    node_state_dir (step.state_dir, sizeof (step.state_dir));
    bool no_vnis = opt.have_vnis && opt.vnis == 0;
    int rc = spank_step_record (step.state_dir, step.job, no_vnis, &r, &e);
    if (rc < 0 && errno == ENOENT && step.setup_error[0])
        fmb_errorf (&e, "the job's setup by the node service: %s", step.setup_error);
    if (rc > 0) {
        bool numbered =
            stepid != SLURM_BATCH_SCRIPT && stepid != SLURM_INTERACTIVE_STEP;
        step.clean = set_step_env (sp, &r, numbered) && nodeid == 0;
    } else if (rc < 0 && conf.policy == SPANK_FAIL_CLOSED) {
        refuse_step (&e);
    } else if (rc < 0)
        slurm_info (
            "fmbroker: job %s step %s: running without VNI isolation "
            "(policy fail_open): %s",
            step.job,
            step.step,
            e.text);
    jobrecord_clear (&r);
    return 0;
}

/* A failure here fails the task (user_init's would not, or would drain
 * the node for a batch step). */
int slurm_spank_task_init_privileged (spank_t sp, int ac, char **av)
{
    struct fmb_error e;
    (void)ac;
    (void)av;
    if (!spank_remote (sp))
        return 0;
    /* user_init read the user's own record as the user; the verdict is
     * taken again here, as root, from the prolog's root-only record */
    if (!step.failed && step.job[0] && conf.policy == SPANK_FAIL_CLOSED &&
        spank_root_verdict (step.state_dir, step.job, &e) < 0) {
        refuse_step (&e);
    }
    return step.failed ? -1 : 0;
}

/* ---- slurmstepd: the step's end ---------------------------------- */

/* The broker call is in a module of its own (stepclean.h: loading
 * OpenSSL costs every process that loads the plugin); it sits next to
 * this plugin, which finds its own directory through dladdr(). */
static spank_clean_step_fn load_clean_module (char *why, size_t len)
{
    Dl_info self;
    char path[PATH_MAX];
    if (!dladdr ((void *)load_clean_module, &self) || !self.dli_fname) {
        snprintf (why, len, ": cannot tell where the plugin was loaded from");
        return NULL;
    }
    const char *slash = strrchr (self.dli_fname, '/');
    snprintf (path,
              sizeof (path),
              "%.*s%s",
              slash ? (int)(slash - self.dli_fname + 1) : 0,
              self.dli_fname,
              SPANK_CLEAN_MODULE);
    /* Kept loaded: slurmstepd exits soon, and OpenSSL does not unload
     * cleanly. */
    void *module = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    void *fn = module ? dlsym (module, SPANK_CLEAN_SYMBOL) : NULL;
    if (!fn) {
        snprintf (why, len, ": %s", dlerror ());
        return NULL;
    }
    spank_clean_step_fn clean;
    memcpy (&clean, &fn, sizeof (clean)); /* ISO C: no object-to-function cast */
    return clean;
}

static void clean_step (void)
{
    char why[FMB_ERROR_TEXT_MAX + 64];
    int64_t t0 = fmb_monotime_ms ();
    spank_clean_step_fn clean = load_clean_module (why, sizeof (why));
    if (clean &&
        clean (
            conf.config, step.job, step.step, conf.step_timeout_s, why, sizeof (why)) ==
            0) {
        slurm_verbose (
            "fmbroker: job %s step %s: step cleanup done in %lld ms (after "
            "the step's end)",
            step.job,
            step.step,
            (long long)(fmb_monotime_ms () - t0));
        return;
    }
    slurm_error ("fmbroker: job %s step %s: step cleanup%s", step.job, step.step, why);
}

/* srun returns only once node 0's slurmstepd is done, and the broker
 * call (loading its module and TLS, a round trip) took tens of ms of every
 * step under load: it runs in a grandchild of slurmstepd instead, in a
 * session of its own and killed by an alarm past step_timeout, so the
 * step's end costs a fork.  A call that never happens leaves the step's
 * trees to the job's end, which deletes them all. */
static void clean_step_detached (void)
{
    pid_t pid = fork ();
    if (pid < 0) {
        clean_step ();
        return;
    }
    if (pid == 0) {
        if (fork () == 0) {
            sigset_t alrm;
            sigemptyset (&alrm);
            sigaddset (&alrm, SIGALRM);
            signal (SIGALRM, SIG_DFL);
            sigprocmask (SIG_UNBLOCK, &alrm, NULL);
            setsid ();
            /* the job's next step or its other tasks come first */
            (void)setpriority (PRIO_PROCESS, 0, 10);
            alarm (conf.step_timeout_s + 5);
            clean_step ();
        }
        _exit (0);
    }
    while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* The step's end through the node service when it runs here (no process,
 * no TLS set-up), else the broker call made in a detached process. */
static void clean_step_end (void)
{
    struct fmb_error e;
    int64_t t0 = fmb_monotime_ms ();
    if (node_service_step_end (step.state_dir, step.job, step.step, &e) == 0) {
        slurm_verbose (
            "fmbroker: job %s step %s: step cleanup done in %lld ms (handed to "
            "the node service)",
            step.job,
            step.step,
            (long long)(fmb_monotime_ms () - t0));
        return;
    }
    slurm_debug ("fmbroker: job %s step %s: %s; calling the broker itself",
                 step.job,
                 step.step,
                 e.text);
    clean_step_detached ();
}

int slurm_spank_exit (spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_remote (sp) && step.setup.fd >= 0) {
        close (step.setup.fd); /* the step ended before user_init */
        step.setup.fd = -1;
    }
    if (spank_remote (sp) && step.clean)
        clean_step_end ();
    return 0;
}

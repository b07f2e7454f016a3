/* engine.c: the node engine (engine.h). */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "epilog.h"
#include "jobrecord.h"
#include "log.h"
#include "monotime.h"
#include "nodeservice.h"
#include "prolog.h"
#include "report.h"
#include "slurmhook.h"
#include "validate.h"

/* Kept connections to the broker, idle between calls.  A call takes one
 * (or opens a new one when none is idle: another job's slow call holds
 * the others), and gives it back; more than this many idle are closed. */
#define KEEPS_IDLE_MAX 4

struct engine {
    pthread_rwlock_t cfg_lock;
    struct fmb_config cfg; /* read once, again at engine_reload */
    struct agent_args args;
    bool libcxi_given; /* --libcxi, else [cxi] libcxi of cfg */
    char node[NODE_PROTO_NODE_MAX];
    pthread_mutex_t pool_lock;
    struct api_keep *idle[KEEPS_IDLE_MAX];
    unsigned nidle;
};

struct engine *engine_create (const struct agent *service)
{
    struct engine *eng = calloc (1, sizeof (*eng));
    if (!eng)
        return NULL;
    pthread_rwlock_init (&eng->cfg_lock, NULL);
    pthread_mutex_init (&eng->pool_lock, NULL);
    eng->cfg = service->cfg;
    eng->args = service->args;
    eng->libcxi_given = service->args.libcxi != service->cfg.cxi_libcxi;
    const char *node =
        service->args.node ? service->args.node : getenv ("FMBROKER_NODE");
    if (node && valid_node_name (node))
        snprintf (eng->node, sizeof (eng->node), "%s", node);
    else {
        gethostname (eng->node, sizeof (eng->node) - 1);
        eng->node[strcspn (eng->node, ".")] = '\0';
    }
    return eng;
}

void engine_destroy (struct engine *eng)
{
    if (!eng)
        return;
    for (unsigned i = 0; i < eng->nidle; i++)
        api_keep_destroy (eng->idle[i]);
    pthread_rwlock_destroy (&eng->cfg_lock);
    pthread_mutex_destroy (&eng->pool_lock);
    free (eng);
}

int engine_reload (struct engine *eng, struct fmb_error *e)
{
    struct fmb_config *cfg = malloc (sizeof (*cfg)); /* large: not on the stack */
    if (!cfg) {
        errno = ENOMEM;
        return fmb_errorf (e, "out of memory");
    }
    if (agent_config_load (cfg, &eng->args, e) < 0) {
        free (cfg);
        return -1;
    }
    pthread_rwlock_wrlock (&eng->cfg_lock);
    eng->cfg = *cfg;
    pthread_rwlock_unlock (&eng->cfg_lock);
    fmb_log_set_level (cfg->log_level);
    free (cfg);
    return 0;
}

const char *engine_node (const struct engine *eng)
{
    return eng->node;
}

static struct api_keep *keep_take (struct engine *eng)
{
    struct api_keep *k = NULL;
    pthread_mutex_lock (&eng->pool_lock);
    if (eng->nidle)
        k = eng->idle[--eng->nidle];
    pthread_mutex_unlock (&eng->pool_lock);
    return k ? k : api_keep_create ();
}

static void keep_give (struct engine *eng, struct api_keep *k)
{
    if (!k)
        return;
    pthread_mutex_lock (&eng->pool_lock);
    if (eng->nidle < KEEPS_IDLE_MAX) {
        eng->idle[eng->nidle++] = k;
        k = NULL;
    }
    pthread_mutex_unlock (&eng->pool_lock);
    api_keep_destroy (k);
}

int engine_idle_fd (struct engine *eng)
{
    int fd = -1;
    pthread_mutex_lock (&eng->pool_lock);
    if (eng->nidle && api_keep_is_open (eng->idle[eng->nidle - 1]))
        fd = api_keep_fd (eng->idle[eng->nidle - 1]);
    pthread_mutex_unlock (&eng->pool_lock);
    return fd;
}

/* A run of the engine: the configuration copied, the node named, a kept
 * connection taken.  NULL: out of memory. */
static struct agent *run_new (struct engine *eng, const char *node)
{
    struct agent *run = calloc (1, sizeof (*run));
    if (!run)
        return NULL;
    run->in_service = true;
    pthread_rwlock_rdlock (&eng->cfg_lock);
    run->cfg = eng->cfg;
    pthread_rwlock_unlock (&eng->cfg_lock);
    run->args = eng->args;
    run->args.libcxi = eng->libcxi_given ? eng->args.libcxi : run->cfg.cxi_libcxi;
    run->args.node = node && *node ? node : eng->node;
    run->args.ncores = -1;
    run->args.tcs = -1;
    run->caller_uid = -1;
    api_target_init_node (&run->target, &run->cfg, run->args.socket, run->args.node);
    run->keep = keep_take (eng);
    if (!run->keep) {
        free (run);
        return NULL;
    }
    run->retry_deadline_ms = fmb_monotime_ms (); /* EBUSY: not waited for here */
    return run;
}

static void run_free (struct engine *eng, struct agent *run)
{
    keep_give (eng, run->keep);
    cxilib_close (&run->lib);
    api_target_clear (&run->target);
    free (run);
}

static void out_of_memory (struct engine_outcome *out, const char *job)
{
    out->status = EXIT_FAIL;
    snprintf (out->why, sizeof (out->why), "the node service is out of memory");
    fmb_log (LOG_ERR, "job %s: the node service is out of memory", job);
}

/* A failed setup: the job's record says why (the agent's own, when it got
 * as far as writing one), for its steps or shells to tell the user. */
static void keep_reason (const struct agent *run, const struct node_request *req)
{
    char path[1200];
    struct fmb_error e;
    if (!req->have_uid || !valid_job_id (req->job) ||
        jobrecord_path (path, sizeof (path), run->args.state_dir, req->job) < 0 ||
        access (path, F_OK) == 0)
        return;
    if (jobrecord_write_reason (
            run->args.state_dir, req->job, req->uid, run->final_reason, &e) < 0)
        fmb_log (LOG_ERR, "job %s: %s", req->job, e.text);
}

/* The job's RUN body from the request, when this node makes the RUN
 * (Slurm's launch setup: [api] node_run); NULL when it does not, or with
 * *failed set. */
static char *run_body (const struct agent *run,
                       const struct node_request *req,
                       int64_t caller_uid,
                       bool *failed)
{
    struct fmb_error e;
    char cpus[16] = "";
    *failed = false;
    if (caller_uid >= 0 || !run->cfg.api_node_run || !req->nodes[0])
        return NULL;
    if (!req->have_uid) {
        *failed = true;
        return NULL;
    }
    /* slurmd's own count (Prolog=) sizes the RUN; a step's is only this
     * node's, never the RUN's (its user could change it) */
    if (req->early && req->ncores)
        snprintf (cpus, sizeof (cpus), "%u", req->ncores);
    /* "" is an option not given */
    char *body = slurm_run_request (req->uid,
                                    req->user,
                                    req->nodes,
                                    cpus,
                                    req->hwcoll[0] ? req->hwcoll : NULL,
                                    req->vni_count[0] ? req->vni_count : NULL,
                                    req->tcs[0] ? req->tcs : NULL,
                                    &e);
    if (!body) {
        fmb_log (LOG_ERR, "job %s: %s", req->job, e.text);
        *failed = true;
    }
    return body;
}

void engine_setup (struct engine *eng,
                   const struct node_request *req,
                   int64_t caller_uid,
                   struct engine_outcome *out)
{
    bool failed;
    memset (out, 0, sizeof (*out));
    struct agent *run = run_new (eng, caller_uid < 0 ? req->node : NULL);
    if (!run)
        return out_of_memory (out, req->job);
    run->args.cmd = AGENT_PROLOG;
    run->args.job = req->job;
    run->args.report_later = true;
    run->caller_uid = caller_uid;
    /* a job's user does not size services on a node others may share */
    if (req->ncores && caller_uid < 0)
        run->args.ncores = req->ncores;
    char *body = run_body (run, req, caller_uid, &failed);
    run->args.run = body;
    if (failed)
        out->status = agent_fail_job (run,
                                      "job %s: the RUN request could not be made "
                                      "(no uid, or out of memory)",
                                      req->job);
    else
        out->status = cmd_prolog (run);
    if (out->status != 0) {
        if (run->final_reason[0])
            fmb_log (LOG_ERR, "%s", run->final_reason);
        if (caller_uid < 0)
            keep_reason (run, req);
        snprintf (out->why, sizeof (out->why), "%s", run->final_reason);
    }
    out->kept = run->delivery_detached && !run->broker_down;
    free (body);
    run_free (eng, run);
}

void engine_end (struct engine *eng,
                 const struct node_request *req,
                 struct engine_outcome *out)
{
    memset (out, 0, sizeof (*out));
    struct agent *run = run_new (eng, req->node);
    if (!run)
        return out_of_memory (out, req->job);
    run->args.cmd = AGENT_EPILOG;
    run->args.job = req->job;
    run->args.retry_busy = 0;
    /* the node's report: one try, its caller (slurmd's epilog) waiting;
     * one the broker does not take is kept and retried in the background */
    run->single_try = true;
    int rc = cmd_epilog (run);
    if (rc != 0 && rc != NODE_SERVICE_BUSY && run->final_reason[0])
        fmb_log (LOG_ERR, "%s", run->final_reason);
    if (rc == EXIT_FAIL)
        fmb_log (LOG_ERR,
                 "job %s: CXI services may be left behind; this node should be drained",
                 req->job);
    else if (rc != 0 && rc != NODE_SERVICE_BUSY) {
        /* It could not start (its configuration): the job's VNIs stay
         * quarantined until this node reports, so nothing is shared, and
         * draining every node for one bad file would stop the cluster. */
        fmb_log (LOG_ERR,
                 "job %s: the epilog could not run (exit %d): its CXI services may be "
                 "left behind and its VNIs stay quarantined; fix it, then run: "
                 "fmbroker-cxi housekeeping --job %s",
                 req->job,
                 rc,
                 req->job);
        rc = 0;
    }
    out->status = rc;
    if (rc != 0)
        snprintf (out->why, sizeof (out->why), "%s", run->final_reason);
    out->kept = run->delivery_detached && !run->broker_down;
    run_free (eng, run);
}

int engine_step_end (struct engine *eng, const char *path, bool *away)
{
    struct fmb_error e;
    struct agent *run = run_new (eng, NULL);
    int rc = -1;
    *away = false;
    if (!run)
        return -1;
    run->single_try = true; /* tried again never: the job's end deletes all */
    rc = agent_broker_call (run, "DELETE", path, NULL, NULL, &e);
    if (rc < 0)
        fmb_log (
            LOG_WARNING, "step cleanup: %s (the job's end deletes its trees)", e.text);
    else
        fmb_log (LOG_DEBUG, "step cleanup: DELETE %s done", path);
    *away = run->broker_down;
    run_free (eng, run);
    return rc;
}

unsigned engine_deliver (struct engine *eng)
{
    struct agent *run = run_new (eng, NULL);
    if (!run)
        return 1;
    run->single_try = true; /* kept reports are tried again after a wait */
    unsigned left = report_deliver_pending (run, true);
    run_free (eng, run);
    return left;
}

void engine_warm (struct engine *eng, bool *local)
{
    struct fmb_error e;
    struct agent *run = run_new (eng, NULL);
    *local = false;
    if (!run)
        return;
    run->single_try = true;
    if (!run->target.url)
        *local = true;
    else if (!api_keep_is_open (run->keep)) {
        if (agent_broker_call (run, "GET", "/v1/health", NULL, NULL, &e) < 0)
            fmb_log (
                LOG_INFO, "the broker's connection, opened ahead of jobs: %s", e.text);
        else
            fmb_log (LOG_DEBUG, "the broker's connection opened ahead of jobs");
    }
    run_free (eng, run);
}

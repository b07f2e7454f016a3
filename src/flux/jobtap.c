/* jobtap.c: fmbroker.so, a flux-core job-manager (jobtap) plugin.
 *
 * System instance (instance-level 0):
 *   job.state.run      a prolog action: the RUN at fmbrokerd, made on a
 *                      thread (brokercall.h), so the job does not start
 *                      before it and the instance is never blocked.  It
 *                      posts an "fmbroker" event to the job's eventlog
 *                      (status, policy, reason; never the session token),
 *                      which the per-rank prolog waits for and the shell
 *                      plugin reads (with state-dir).  A refusal
 *                      under fail_closed is a fatal job exception with the
 *                      broker's own words; no node is drained.
 *   job.state.cleanup  the CLEANUP, retried with back-off for cleanup-retry
 *                      seconds when no broker answers (or one answers
 *                      429/5xx); the sweep ends what never got through.
 * Sub-instance (level > 0): job.state.cleanup deletes the sub-job's
 *   multicast trees through the broker's step route, with the session token
 *   this instance inherited from its enclosing job (never the broker's
 *   job list: it knows only system-instance jobs).
 *
 * Configuration (plugin conf, [job-manager] plugins or flux jobtap load):
 *   config = "/etc/fmbroker/fmbroker.conf", policy = "fail_closed",
 *   timeout = 5, cleanup-retry = 600, state-dir = "/run/fmbroker-cxi".
 */
#include <errno.h>
#include <flux/core.h>
#include <flux/jobtap.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokercall.h"
#include "config.h"
#include "jobrecord.h"
#include "rspec.h"

#define NAME "fmbroker"

struct plugin {
    flux_plugin_t *p;
    flux_t *h;
    struct brokercall *bc;
    long level;
    char policy[16]; /* fail_closed or fail_open */
    char state_dir[512];
    double cleanup_retry_s;
    char jobid_path[256]; /* this instance's (sub-instances) */
    struct job *jobs;     /* RUN or CLEANUP in flight or waiting */
};

/* One job's calls.  Owned by the plugin's list, not by Flux's job object:
 * an answer may come after the job-manager has let the job go. */
struct job {
    struct plugin *pl;
    flux_jobid_t id;
    bool run_in_flight;
    bool run_refused;    /* the broker answered the RUN with a refusal */
    bool cleanup_wanted; /* CLEANUP waits for the RUN's answer */
    double retry_delay, retry_waited;
    flux_watcher_t *retry;
    struct job *next, *prev;
};

static struct job *job_get (struct plugin *pl, flux_jobid_t id, bool create)
{
    struct job *j;
    for (j = pl->jobs; j; j = j->next)
        if (j->id == id)
            return j;
    if (!create || !(j = calloc (1, sizeof (*j))))
        return NULL;
    j->pl = pl;
    j->id = id;
    j->next = pl->jobs;
    if (pl->jobs)
        pl->jobs->prev = j;
    pl->jobs = j;
    return j;
}

static void job_done (struct job *j)
{
    struct plugin *pl = j->pl;
    if (j->prev)
        j->prev->next = j->next;
    else
        pl->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    flux_watcher_destroy (j->retry);
    free (j);
}

/* ---- CLEANUP ---------------------------------------------------------- */

static void cleanup_send (struct job *j);

static void retry_cb (flux_reactor_t *r, flux_watcher_t *w, int revents, void *arg)
{
    (void)r;
    (void)w;
    (void)revents;
    cleanup_send (arg);
}

static void cleanup_answer (const struct brokercall_result *r, void *arg)
{
    struct job *j = arg;
    struct plugin *pl = j->pl;
    /* 404: the broker never had it (no RUN got through), or it has ended */
    if (r->reached && ((r->status >= 200 && r->status < 300) || r->status == 404)) {
        if (j->retry_waited > 0)
            flux_log (pl->h,
                      LOG_INFO,
                      "job %ju: CLEANUP done after %.0f s of retries",
                      (uintmax_t)j->id,
                      j->retry_waited);
        job_done (j);
        return;
    }
    if (!brokercall_transient (r) || j->retry_waited >= pl->cleanup_retry_s) {
        flux_log (pl->h,
                  LOG_ERR,
                  "job %ju: CLEANUP failed (%s)%s; it keeps its VNIs and FM "
                  "reservation until the sweep (fmbroker-flux-sweep) or an admin "
                  "(fmbroker end-job) ends it",
                  (uintmax_t)j->id,
                  brokercall_reason (r),
                  j->retry_waited > 0 ? " after retries" : "");
        job_done (j);
        return;
    }
    if (j->retry_delay == 0)
        flux_log (pl->h,
                  LOG_WARNING,
                  "job %ju: CLEANUP failed (%s); retrying for up to %.0f s",
                  (uintmax_t)j->id,
                  brokercall_reason (r),
                  pl->cleanup_retry_s);
    j->retry_delay = j->retry_delay == 0 ? 2 : j->retry_delay * 2;
    if (j->retry_delay > 60)
        j->retry_delay = 60;
    j->retry_waited += j->retry_delay;
    flux_watcher_destroy (j->retry);
    j->retry = flux_timer_watcher_create (
        flux_get_reactor (pl->h), j->retry_delay, 0., retry_cb, j);
    if (!j->retry) {
        flux_log_error (pl->h, "job %ju: CLEANUP retry timer", (uintmax_t)j->id);
        job_done (j);
        return;
    }
    flux_watcher_start (j->retry);
}

static void cleanup_send (struct job *j)
{
    char path[64];
    snprintf (path, sizeof (path), "/v1/jobs/%ju", (uintmax_t)j->id);
    if (brokercall_start (j->pl->bc, "DELETE", path, NULL, NULL, cleanup_answer, j) <
        0) {
        flux_log_error (
            j->pl->h, "job %ju: cannot start its CLEANUP", (uintmax_t)j->id);
        job_done (j);
    }
}

/* ---- RUN -------------------------------------------------------------- */

/* 'id' may be FLUX_JOBTAP_CURRENT_JOB (inside the job's callback).
 * 'why' is the job's own reason, which its user reads in the exception;
 * 'detail' (NULL: the same) is the admin's, for the instance's log
 * (which socket or URL, what the connection said). */
static void run_failed_for (struct plugin *pl,
                            flux_jobid_t id,
                            const char *why,
                            const char *detail)
{
    bool closed = strcmp (pl->policy, "fail_open") != 0;
    if (flux_jobtap_event_post_pack (pl->p,
                                     id,
                                     NAME,
                                     "{s:s s:s s:s s:s}",
                                     "status",
                                     "failed",
                                     "policy",
                                     pl->policy,
                                     "state-dir",
                                     pl->state_dir,
                                     "reason",
                                     why) < 0)
        flux_log_error (pl->h, "job %ju: posting the fmbroker event", (uintmax_t)id);
    /* The shell plugin refuses the job's tasks too, should this fail. */
    if (closed && flux_jobtap_raise_exception (pl->p,
                                               id,
                                               NAME,
                                               0,
                                               "no VNI isolation for this job: %s "
                                               "(fmbroker policy fail_closed: it "
                                               "does not start)",
                                               why) < 0)
        flux_log_error (pl->h, "job %ju: raising its exception", (uintmax_t)id);
    flux_log (pl->h,
              closed ? LOG_ERR : LOG_WARNING,
              "job %ju: RUN at fmbrokerd failed: %s; %s",
              (uintmax_t)id,
              detail ? detail : why,
              closed ? "the job does not start (policy fail_closed)"
                     : "it runs without VNI isolation (policy fail_open)");
}

static void run_failed (struct plugin *pl, flux_jobid_t id, const char *why)
{
    run_failed_for (pl, id, why, NULL);
}

static void run_answer (const struct brokercall_result *r, void *arg)
{
    struct job *j = arg;
    struct plugin *pl = j->pl;
    /* run_in_flight stays true until the end: the exception raised here
     * may move the job to CLEANUP at once (cleanup_cb runs inside the
     * raise), and its CLEANUP must wait for this to be done with j. */
    if (r->reached && r->status >= 200 && r->status < 300) {
        json_t *env = json_object_get (r->body, "env");
        const char *vnis = json_string_value (json_object_get (env, "SLINGSHOT_VNIS"));
        if (flux_jobtap_event_post_pack (pl->p,
                                         j->id,
                                         NAME,
                                         "{s:s s:s s:s s:s}",
                                         "status",
                                         "ok",
                                         "policy",
                                         pl->policy,
                                         "state-dir",
                                         pl->state_dir,
                                         "vnis",
                                         vnis ? vnis : "") < 0)
            flux_log_error (
                pl->h, "job %ju: posting the fmbroker event", (uintmax_t)j->id);
    } else {
        char why[600];
        if (r->reached) {
            snprintf (why,
                      sizeof (why),
                      "fmbrokerd answered %ld: %s",
                      r->status,
                      brokercall_reason (r));
            run_failed (pl, j->id, why);
        } else /* where the broker should be is the admin's business */
            run_failed_for (pl,
                            j->id,
                            "the fabric broker could not be reached (the cause is "
                            "in the system instance's log)",
                            brokercall_reason (r));
        j->run_refused = r->reached;
    }
    if (flux_jobtap_prolog_finish (pl->p, j->id, NAME, 0) < 0)
        flux_log_error (pl->h, "job %ju: prolog-finish", (uintmax_t)j->id);
    j->run_in_flight = false;
    if (j->cleanup_wanted)
        cleanup_send (j);
    else
        job_done (j);
}

static int run_cb (flux_plugin_t *p,
                   const char *topic,
                   flux_plugin_arg_t *args,
                   void *arg)
{
    struct plugin *pl = arg;
    flux_jobid_t id;
    json_t *R = NULL, *jobspec = NULL;
    int userid;
    struct fmb_error e;
    struct job *j;
    (void)topic;
    if (pl->level != 0)
        return 0;
    if (flux_plugin_arg_unpack (args,
                                FLUX_PLUGIN_ARG_IN,
                                "{s:I s:i s?o s?o}",
                                "id",
                                &id,
                                "userid",
                                &userid,
                                "R",
                                &R,
                                "jobspec",
                                &jobspec) < 0) {
        /* An error from this callback is only logged by flux-core and the
         * job would start: fail it (or say so) instead. */
        run_failed (pl, FLUX_JOBTAP_CURRENT_JOB, flux_plugin_arg_strerror (args));
        return 0;
    }
    if (!(j = job_get (pl, id, true))) {
        run_failed (pl, id, "fmbroker's jobtap plugin is out of memory");
        return 0;
    }
    json_t *body = rspec_run_body (R, jobspec, (unsigned)userid, &e);
    if (!body) {
        run_failed (pl, id, e.text);
        job_done (j);
        return 0;
    }
    char path[64], *text = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    snprintf (path, sizeof (path), "/v1/jobs/%ju", (uintmax_t)id);
    if (!text || flux_jobtap_prolog_start (p, NAME) < 0) {
        flux_log_error (pl->h, "job %ju: prolog-start", (uintmax_t)id);
        run_failed (
            pl, id, "fmbroker's jobtap plugin could not start its prolog action");
        free (text);
        job_done (j);
        return 0;
    }
    j->run_in_flight = true;
    if (brokercall_start (pl->bc, "PUT", path, text, NULL, run_answer, j) < 0) {
        struct brokercall_result r = {0};
        snprintf (r.error, sizeof (r.error), "cannot start a thread for the RUN");
        run_answer (&r, j);
    }
    free (text);
    return 0;
}

/* ---- sub-instances: a sub-job's trees --------------------------------- */

static void step_answer (const struct brokercall_result *r, void *arg)
{
    struct job *j = arg;
    if (!(r->reached && r->status >= 200 && r->status < 300))
        flux_log (j->pl->h,
                  LOG_WARNING,
                  "job %ju: deleting its multicast trees failed (%s); they go with "
                  "the enclosing job",
                  (uintmax_t)j->id,
                  brokercall_reason (r));
    job_done (j);
}

static void step_clean (struct plugin *pl, flux_jobid_t id)
{
    const char *fmid = getenv ("FI_CXI_COLL_JOB_ID");
    const char *token = getenv ("FI_CXI_COLL_MCAST_TOKEN");
    const char *dash = fmid ? strchr (fmid, '-') : NULL;
    char f58[64], step[512], esc[3 * 512 + 1], path[2048];
    struct job *j;
    if (!fmid || !token || !*token) {
        flux_log (pl->h,
                  LOG_DEBUG,
                  "job %ju: no multicast reservation above this instance: no trees",
                  (uintmax_t)id);
        return;
    }
    if (flux_job_id_encode (id, "f58", f58, sizeof (f58)) < 0)
        return;
    snprintf (step,
              sizeof (step),
              "%s/%s",
              strcmp (pl->jobid_path, "/") ? pl->jobid_path : "",
              f58);
    (void)api_path_escape (step, esc, sizeof (esc)); /* room for all of it */
    snprintf (path,
              sizeof (path),
              "/v1/jobs/%s/steps/%s?wait=10",
              dash ? dash + 1 : fmid,
              esc);
    if (!(j = job_get (pl, id, true)))
        return;
    flux_log (pl->h,
              LOG_DEBUG,
              "job %ju: deleting the trees of step %s",
              (uintmax_t)id,
              step);
    if (brokercall_start (pl->bc, "DELETE", path, NULL, token, step_answer, j) < 0)
        job_done (j);
}

static int cleanup_cb (flux_plugin_t *p,
                       const char *topic,
                       flux_plugin_arg_t *args,
                       void *arg)
{
    struct plugin *pl = arg;
    flux_jobid_t id;
    struct job *j;
    (void)topic;
    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:I}", "id", &id) < 0)
        return flux_jobtap_error (
            p, args, "fmbroker: %s", flux_plugin_arg_strerror (args));
    /* A job never allocated never had a RUN. */
    if (flux_jobtap_job_event_posted (p, id, "alloc") <= 0) {
        flux_log (pl->h,
                  LOG_DEBUG,
                  "job %ju: never allocated: nothing to end",
                  (uintmax_t)id);
        return 0;
    }
    if (pl->level != 0) {
        step_clean (pl, id);
        return 0;
    }
    if (!(j = job_get (pl, id, true)))
        return 0;
    if (j->run_refused) { /* the broker never had it: nothing to end */
        job_done (j);
        return 0;
    }
    if (j->run_in_flight)
        j->cleanup_wanted = true;
    else
        cleanup_send (j);
    return 0;
}

/* ---- load and unload -------------------------------------------------- */

/* Unloaded (flux jobtap remove, shutdown): a job whose RUN is in flight
 * would wait for its prolog action for good; a CLEANUP still to retry
 * is left to the sweep, and said so. */
static void plugin_destroy (void *arg)
{
    struct plugin *pl = arg;
    brokercall_destroy (pl->bc); /* no answer runs after this */
    while (pl->jobs) {
        struct job *j = pl->jobs;
        if (j->run_in_flight) {
            run_failed (
                pl, j->id, "fmbroker's jobtap plugin was unloaded during the RUN");
            flux_jobtap_prolog_finish (pl->p, j->id, NAME, 1);
        } else
            flux_log (pl->h,
                      LOG_WARNING,
                      "job %ju: fmbroker.so unloaded before its CLEANUP got through; "
                      "the sweep (fmbroker-flux-sweep) ends it",
                      (uintmax_t)j->id);
        job_done (j);
    }
    free (pl);
}

static int configure (struct plugin *pl, flux_plugin_t *p, struct fmb_error *e)
{
    const char *path = FMB_SYSCONFDIR "/fmbroker.conf", *policy = "fail_closed";
    const char *state_dir = JOBRECORD_DIR_DEFAULT, *attr;
    int timeout = 5, retry = 600;
    struct fmb_config cfg;
    if (flux_plugin_conf_unpack (p,
                                 "{s?s s?s s?i s?i s?s}",
                                 "config",
                                 &path,
                                 "policy",
                                 &policy,
                                 "timeout",
                                 &timeout,
                                 "cleanup-retry",
                                 &retry,
                                 "state-dir",
                                 &state_dir) < 0)
        return fmb_errorf (e,
                           "its configuration: %s (keys: config, policy, timeout, "
                           "cleanup-retry, state-dir)",
                           flux_plugin_strerror (p));
    if (strcmp (policy, "fail_closed") && strcmp (policy, "fail_open"))
        return fmb_errorf (e, "policy '%s': fail_closed or fail_open", policy);
    if (timeout < 1 || timeout > 300 || retry < 0 || retry > 86400)
        return fmb_errorf (e, "timeout is 1-300 s and cleanup-retry 0-86400 s");
    snprintf (pl->policy, sizeof (pl->policy), "%s", policy);
    snprintf (pl->state_dir, sizeof (pl->state_dir), "%s", state_dir);
    pl->cleanup_retry_s = retry;
    attr = flux_attr_get (pl->h, "instance-level");
    pl->level = attr ? strtol (attr, NULL, 10) : 0;
    attr = flux_attr_get (pl->h, "jobid-path");
    snprintf (pl->jobid_path, sizeof (pl->jobid_path), "%s", attr ? attr : "/");
    fmb_config_defaults (&cfg);
    /* A sub-instance runs as the user, who may not read it: the step route
     * needs only where the broker is, and the defaults say that. */
    if (fmb_config_load_client (&cfg, path, e) < 0 && pl->level == 0)
        return -1;
    pl->bc = brokercall_create (pl->h, &cfg, timeout, e);
    return pl->bc ? 0 : -1;
}

/* What Flux looks up in the plugin (its headers do not declare it). */
int flux_plugin_init (flux_plugin_t *p);
int flux_plugin_init (flux_plugin_t *p)
{
    struct plugin *pl = calloc (1, sizeof (*pl));
    struct fmb_error e;
    if (!pl)
        return -1;
    pl->p = p;
    pl->h = flux_jobtap_get_flux (p);
    if (configure (pl, p, &e) < 0) {
        flux_log (pl->h, LOG_ERR, "fmbroker.so: %s", e.text);
        brokercall_destroy (pl->bc);
        free (pl);
        errno = EINVAL;
        return -1;
    }
    if (flux_plugin_aux_set (p, NULL, pl, plugin_destroy) < 0) {
        plugin_destroy (pl);
        return -1;
    }
    flux_log (pl->h,
              LOG_INFO,
              "fmbroker.so %s: instance level %ld, policy %s",
              FMB_VERSION,
              pl->level,
              pl->policy);
    if (flux_plugin_set_name (p, NAME) < 0 ||
        flux_plugin_add_handler (p, "job.state.run", run_cb, pl) < 0 ||
        flux_plugin_add_handler (p, "job.state.cleanup", cleanup_cb, pl) < 0)
        return -1;
    return 0;
}

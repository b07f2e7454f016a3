/* shell.c: fmbroker.so, a flux-core job shell plugin (shell.init).
 *
 * Puts the job's SLINGSHOT_* and FI_CXI_* variables into its tasks'
 * environment, with no broker call:
 *   system instance  from the job's record on this node, which the
 *                    node service (fmbroker-cxi serve) writes after
 *                    making the job's CXI services: this plugin hands it
 *                    the job's setup (nodeproto.h) and waits for it, as
 *                    the job's user (the service makes only a job the
 *                    broker says is that user's);
 *   sub-instance     from the enclosing job's variables, which this
 *                    instance's broker holds (the broker.getenv RPC, as
 *                    flux-coral2 does), all but the step id;
 * and FI_CXI_COLL_JOB_STEP_ID, the job's id path (unique at every level
 * within the system-instance job's reservation).  Variables of those
 * names from the submitting environment are dropped first (a forged
 * VNI list or token never reaches a task); the user's own libfabric
 * tuning (FI_CXI_RX_MATCH_MODE, FI_CXI_RDZV_*, ...) is not ours and
 * passes, as under Slurm.
 *
 * Why the shell and not a per-rank prolog: the IMP's prolog script and
 * the helpers it ran (flux getattr, flux job id, flux job wait-event, jq,
 * fmbroker-cxi) cost a Flux launch 1.6 times its time (issue 50); the
 * shell is on every node already, starts after the jobtap plugin's RUN
 * (a prolog action), and a Unix socket request to the resident service
 * costs a few milliseconds.
 *
 * Under policy fail_closed (the site's, which fmbroker's jobtap plugin
 * puts in its "fmbroker" event with the state-dir), a system-instance job with no
 * CXI service on this node does not start: whatever kept the service from
 * making it (none running, the broker away), the job never runs without
 * isolation silently.  A job with no such event was not
 * seen by the jobtap plugin (it is not loaded in this instance): the
 * plugin then only drops the submitter's variables.
 */
#include <errno.h>
#include <flux/core.h>
#define FLUX_SHELL_PLUGIN_NAME "fmbroker"
#include <flux/shell.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobrecord.h"
#include "nodeservice.h"

#define NAME "fmbroker"

static const char *const inherited[] = {
    "SLINGSHOT_VNIS",
    "SLINGSHOT_DEVICES",
    "SLINGSHOT_SVC_IDS",
    "SLINGSHOT_TCS",
    "FI_CXI_COLL_JOB_ID",
    "FI_CXI_COLL_MCAST_TOKEN",
    "FI_CXI_COLL_FABRIC_MGR_URL",
    "FI_CXI_HWCOLL_ADDRS_PER_JOB",
    "FI_CXI_HWCOLL_MIN_NODES",
};

/* The variables the job's fabric sets: every SLINGSHOT_* (the node's
 * isolation), and the FI_CXI_* of the job's collectives. */
static bool ours (const char *name)
{
    if (strncmp (name, "SLINGSHOT_", 10) == 0 ||
        strcmp (name, "FI_CXI_COLL_JOB_STEP_ID") == 0)
        return true;
    for (size_t i = 0; i < sizeof (inherited) / sizeof (inherited[0]); i++)
        if (strcmp (name, inherited[i]) == 0)
            return true;
    return false;
}

static bool plain (const char *value)
{
    for (const unsigned char *c = (const unsigned char *)value; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return false;
    return true;
}

static void drop_submitted (flux_shell_t *shell)
{
    char *text = NULL;
    json_t *env;
    const char *name;
    json_t *v;
    void *tmp;
    if (flux_shell_get_environ (shell, &text) < 0)
        return;
    env = json_loads (text, 0, NULL);
    free (text);
    json_object_foreach_safe (env, tmp, name, v)
    {
        if (ours (name))
            flux_shell_unsetenv (shell, name);
    }
    json_decref (env);
}

static int set_all (flux_shell_t *shell, json_t *vars)
{
    const char *name;
    json_t *v;
    json_object_foreach (vars, name, v)
    {
        const char *value = json_string_value (v);
        if (!ours (name) || !value || !plain (value) ||
            strcmp (name, "FI_CXI_COLL_JOB_STEP_ID") == 0)
            continue;
        if (flux_shell_setenvf (shell, 1, name, "%s", value) < 0)
            return -1;
    }
    return 0;
}

/* The job's VNI count was set to 0 by its user: no service is expected. */
static bool wants_no_vni (flux_shell_t *shell)
{
    json_t *jobspec = NULL, *vnis;
    if (flux_shell_info_unpack (shell, "{s:o}", "jobspec", &jobspec) < 0)
        return false;
    vnis = json_object_get (
        json_object_get (
            json_object_get (json_object_get (jobspec, "attributes"), "system"),
            "fmbroker"),
        "vnis");
    return json_is_integer (vnis) && json_integer_value (vnis) == 0;
}

/* state-dir with %n replaced by this node's name (the rank's hostname
 * attribute), as the SPANK plugin's state_dir= does: for test clusters
 * that run several nodes on one host. */
static void node_dir (flux_t *h, const char *tmpl, char *out, size_t len)
{
    const char *node = flux_attr_get (h, "hostname");
    const char *n = strstr (tmpl, "%n");
    if (!n || !node)
        snprintf (out, len, "%s", tmpl);
    else
        snprintf (out, len, "%.*s%s%s", (int)(n - tmpl), tmpl, node, n + 2);
}

/* The job's setup handed to the node service at state_dir/service.sock,
 * as the job's user, and its answer: 0 made (or there already), -1 with
 * 'why'. */
static int service_setup (
    flux_t *h, const char *state_dir, const char *jobid, char *why, size_t len)
{
    struct node_request req = {.op = NODE_OP_SETUP};
    struct node_service_call c;
    struct fmb_error e;
    char line[FMB_ERROR_TEXT_MAX + 160];
    const char *node = flux_attr_get (h, "hostname");
    snprintf (req.job, sizeof (req.job), "%s", jobid);
    snprintf (req.node, sizeof (req.node), "%s", node ? node : "");
    int rc = node_service_call_start (&c, state_dir, &req, &e);
    if (rc == 0) {
        snprintf (why,
                  len,
                  "no node service answers at %s/%s (is fmbroker-cxi.service running "
                  "on this node?)",
                  state_dir,
                  JOBRECORD_SERVICE_SOCKET);
        return -1;
    }
    if (rc < 0 || node_service_call_finish (
                      &c, NODE_SERVICE_WAIT_MS, line, sizeof (line), &e) < 0) {
        snprintf (why, len, "%s", e.text);
        return -1;
    }
    if (atoi (line) != 0) {
        const char *reason = strchr (line, '\t');
        snprintf (why, len, "%s", reason && reason[1] ? reason + 1 : line);
        return -1;
    }
    return 0;
}

static int system_instance (flux_shell_t *shell,
                            flux_t *h,
                            const char *jobid,
                            const char *policy,
                            const char *state_dir)
{
    struct jobrecord r;
    struct fmb_error e;
    char why[1600];
    bool closed = strcmp (policy, "fail_open") != 0;
    int rc = jobrecord_read (state_dir, jobid, &r, &e);
    if (rc < 0 && errno == ENOENT) {
        /* not made yet on this node: the node service makes it now */
        if (service_setup (h, state_dir, jobid, why, sizeof (why)) == 0)
            rc = jobrecord_read (state_dir, jobid, &r, &e);
        else
            goto refuse;
    }
    if (rc == 0 && r.nservices > 0) {
        flux_shell_log (NAME,
                        FLUX_SHELL_DEBUG,
                        __FILE__,
                        __LINE__,
                        "job record in %s: %u CXI services",
                        state_dir,
                        r.nservices);
        rc = set_all (shell, r.env);
        jobrecord_clear (&r);
        return rc;
    }
    if (rc == 0) {
        snprintf (why,
                  sizeof (why),
                  "no CXI service for this job on this node: %s",
                  r.reason);
        jobrecord_clear (&r);
    } else
        snprintf (why, sizeof (why), "%s", e.text);
refuse:
    if (wants_no_vni (shell))
        return 0;
    if (closed) {
        flux_shell_raise (NAME,
                          0,
                          "fmbroker: %s; the job does not start without VNI isolation "
                          "(policy fail_closed)",
                          why);
        return -1;
    }
    flux_shell_log (NAME,
                    FLUX_SHELL_WARN,
                    __FILE__,
                    __LINE__,
                    "%s: running without VNI isolation (policy fail_open)",
                    why);
    return 0;
}

static int sub_instance (flux_shell_t *shell, flux_t *h)
{
    json_t *names = json_array (), *env = NULL;
    flux_future_t *f;
    int rc = 0;
    for (size_t i = 0; i < sizeof (inherited) / sizeof (inherited[0]); i++)
        json_array_append_new (names, json_string (inherited[i]));
    f = flux_rpc_pack (h, "broker.getenv", 0, 0, "{s:O}", "names", names);
    json_decref (names);
    if (!f || flux_rpc_get_unpack (f, "{s:o}", "env", &env) < 0)
        flux_shell_log (NAME,
                        FLUX_SHELL_WARN,
                        __FILE__,
                        __LINE__,
                        "cannot read the enclosing job's fabric variables: %s",
                        future_strerror (f, errno));
    else
        rc = set_all (shell, env);
    flux_future_destroy (f);
    return rc;
}

/* The "fmbroker" event the jobtap plugin posted to the job's eventlog
 * before the job started (status, policy, state-dir, reason) into *found:
 * 0.  1 when there is none: the plugin is not loaded in this instance.
 * -1 with 'why' when the eventlog cannot be read, or the plugin's
 * prolog action is there without its event.  Read
 * from the eventlog, not the jobspec: in a multi-user instance the shell
 * runs the jobspec its user signed, which a jobspec update never
 * reaches.  The job-manager commits events in batches, so one look
 * again after 100 ms when the plugin's prolog action is there but its
 * event not yet. */
static int fmbroker_event (
    flux_t *h, flux_jobid_t id, json_t **found, char *why, size_t len)
{
    *found = NULL;
    for (int tries = 0; tries < 2; tries++) {
        const char *log = NULL;
        bool started = false;
        flux_future_t *f = flux_rpc_pack (h,
                                          "job-info.lookup",
                                          FLUX_NODEID_ANY,
                                          0,
                                          "{s:I s:[s] s:i}",
                                          "id",
                                          id,
                                          "keys",
                                          "eventlog",
                                          "flags",
                                          0);
        if (!f || flux_rpc_get_unpack (f, "{s:s}", "eventlog", &log) < 0) {
            snprintf (why,
                      len,
                      "cannot read the job's eventlog for fmbroker's event: %s",
                      future_strerror (f, errno));
            flux_future_destroy (f);
            return -1;
        }
        for (const char *line = log; line && *line;) {
            const char *end = strchr (line, '\n');
            size_t n = end ? (size_t)(end - line) : strlen (line);
            json_t *ev = json_loadb (line, n, 0, NULL);
            const char *name = json_string_value (json_object_get (ev, "name"));
            const char *desc = json_string_value (
                json_object_get (json_object_get (ev, "context"), "description"));
            if (name && strcmp (name, NAME) == 0) {
                json_decref (*found);
                *found = json_incref (json_object_get (ev, "context"));
            } else if (name && strcmp (name, "prolog-start") == 0 && desc &&
                       strcmp (desc, NAME) == 0)
                started = true;
            json_decref (ev);
            line = end ? end + 1 : NULL;
        }
        flux_future_destroy (f);
        if (*found)
            return 0;
        if (!started)
            return 1;
        usleep (100000);
    }
    snprintf (
        why, len, "fmbroker's jobtap plugin started the job's RUN but left no word");
    return -1;
}

/* No "fmbroker" event: the jobtap plugin is not loaded in this instance.
 * Where this node runs fmbroker's node service (its socket in
 * $FMBROKER_STATE_DIR, %n this node's name, else the default state
 * directory), the site meant it to be: a [job-manager] plugins array in
 * another conf.d file (system.toml) replaced fmbroker's, and the job does
 * not start without isolation (rc1.d said so at the instance's start,
 * with the fix).  Elsewhere fmbroker is not used here: 1. */
static int no_event (flux_shell_t *shell, flux_t *h)
{
    /* the job's environment (its user's: one who hides the socket only
     * runs without an isolation nobody else has either) */
    const char *tmpl = flux_shell_getenv (shell, "FMBROKER_STATE_DIR");
    char dir[1024], sock[1200];
    node_dir (h, tmpl && *tmpl ? tmpl : JOBRECORD_DIR_DEFAULT, dir, sizeof (dir));
    snprintf (sock, sizeof (sock), "%s/%s", dir, JOBRECORD_SERVICE_SOCKET);
    if (access (sock, F_OK) < 0) {
        flux_shell_log (NAME,
                        FLUX_SHELL_DEBUG,
                        __FILE__,
                        __LINE__,
                        "no fmbroker event: its jobtap plugin is not loaded here");
        return 1;
    }
    flux_shell_raise (
        NAME,
        0,
        "fmbroker: no VNI isolation for this job: fmbroker.so is not loaded "
        "in the system instance's job-manager; the job does not start");
    return -1;
}

static int level0 (flux_shell_t *shell, flux_t *h, flux_jobid_t id, const char *dec)
{
    json_t *ev;
    const char *status = NULL, *policy = "fail_closed",
               *state_dir = JOBRECORD_DIR_DEFAULT;
    const char *reason = "";
    char dir[1024], why[256];
    int rc = fmbroker_event (h, id, &ev, why, sizeof (why));
    if (rc < 0) { /* the policy is unknown: the default, closed */
        flux_shell_raise (NAME, 0, "fmbroker: %s; the job does not start", why);
        return -1;
    }
    if (rc > 0)
        return no_event (shell, h);
    (void)json_unpack (ev,
                       "{s?s s?s s?s s?s}",
                       "status",
                       &status,
                       "policy",
                       &policy,
                       "state-dir",
                       &state_dir,
                       "reason",
                       &reason);
    if (!status || strcmp (status, "ok") != 0) {
        /* fail_closed: the jobtap plugin raised already; should that have
         * failed, the job still does not run */
        if (strcmp (policy, "fail_open") != 0 && !wants_no_vni (shell)) {
            flux_shell_raise (NAME,
                              0,
                              "fmbroker: no VNI isolation for this job: %s (policy "
                              "fail_closed)",
                              reason);
            json_decref (ev);
            return -1;
        }
        if (strcmp (policy, "fail_open") == 0)
            flux_shell_log (NAME,
                            FLUX_SHELL_WARN,
                            __FILE__,
                            __LINE__,
                            "no VNI isolation for this job: %s (policy fail_open)",
                            reason);
        json_decref (ev);
        return 0;
    }
    node_dir (h, state_dir, dir, sizeof (dir));
    rc = system_instance (shell, h, dec, policy, dir);
    json_decref (ev);
    return rc;
}

static int init_cb (flux_plugin_t *p,
                    const char *topic,
                    flux_plugin_arg_t *args,
                    void *data)
{
    flux_shell_t *shell = flux_plugin_get_shell (p);
    flux_t *h = flux_shell_get_flux (shell);
    const char *level = flux_attr_get (h, "instance-level");
    const char *parent = flux_attr_get (h, "jobid-path");
    flux_jobid_t id;
    char dec[32], f58[64];
    int rc;
    (void)topic;
    (void)args;
    (void)data;
    drop_submitted (shell);
    if (flux_shell_info_unpack (shell, "{s:I}", "jobid", &id) < 0 ||
        flux_job_id_encode (id, "dec", dec, sizeof (dec)) < 0 ||
        flux_job_id_encode (id, "f58", f58, sizeof (f58)) < 0)
        return -1;
    if (level && strcmp (level, "0") != 0)
        rc = sub_instance (shell, h);
    else
        rc = level0 (shell, h, id, dec);
    if (rc != 0)
        return rc < 0 ? -1 : 0; /* 1: not ours to judge */
    return flux_shell_setenvf (shell,
                               1,
                               "FI_CXI_COLL_JOB_STEP_ID",
                               "%s/%s",
                               parent && strcmp (parent, "/") ? parent : "",
                               f58);
}

/* What Flux looks up in the plugin (its headers do not declare it). */
int flux_plugin_init (flux_plugin_t *p);
int flux_plugin_init (flux_plugin_t *p)
{
    if (flux_plugin_set_name (p, NAME) < 0 ||
        flux_plugin_add_handler (p, "shell.init", init_cb, NULL) < 0)
        return -1;
    return 0;
}

/* slurmhook.c: see slurmhook.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "jobrecord.h"
#include "log.h"
#include "runopts.h"
#include "slurmhook.h"
#include "validate.h"

char *slurm_run_request (unsigned long uid,
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
    /* SLURM_JOB_CPUS_PER_NODE is "4(x2),2": the first node's count */
    const char *cpus = cpus_per_node ? cpus_per_node : "";
    char cores[16];
    snprintf (cores, sizeof (cores), "%.*s", (int)strspn (cpus, "0123456789"), cpus);
    const char *const values[RUN_OPT_COUNT] = {
        nodelist, cores[0] ? cores : NULL, hwcoll, vnis, tcs};
    static const char *const names[RUN_OPT_COUNT] = {"SLURM_NODELIST=",
                                                     "SLURM_JOB_CPUS_PER_NODE=",
                                                     "SPANK_FMB_HWCOLL=",
                                                     "SPANK_FMB_VNIS=",
                                                     "SPANK_FMB_TCS="};
    struct run_options opts;
    run_options_init (&opts, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    if (run_options_parse (&opts, values, names, e) < 0)
        return NULL;
    json_t *o = json_pack ("{s:I, s:s}", "uid", (json_int_t)uid, "nodes", nodelist);
    if (o && user && *user)
        json_object_set_new (o, "user", json_string (user));
    if (o && run_options_to_json (&opts, o, e) < 0) {
        json_decref (o);
        return NULL;
    }
    char *text = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    if (!text) {
        errno = ENOMEM;
        fmb_errorf (e, "the RUN request: out of memory");
    }
    return text;
}

const char *slurm_hook_var (const struct slurm_hook *h, const char *name)
{
    if (!h->env)
        return getenv (name);
    size_t n = strlen (name);
    for (char *const *v = h->env; *v; v++)
        if (strncmp (*v, name, n) == 0 && (*v)[n] == '=')
            return *v + n + 1;
    return NULL;
}

static const char *var_or_empty (const struct slurm_hook *h, const char *name)
{
    const char *v = slurm_hook_var (h, name);
    return v ? v : "";
}

int slurm_hook_run (struct slurm_hook *h, struct fmb_error *e)
{
    char *end;
    const char *uid = var_or_empty (h, "SLURM_JOB_UID");
    unsigned long u = strtoul (uid, &end, 10);
    if (!*uid || *end || u >= 4294967295ul) {
        errno = EINVAL;
        return fmb_errorf (e, "SLURM_JOB_UID '%.32s' is not a uid", uid);
    }
    free (h->run);
    h->run = slurm_run_request (u,
                                slurm_hook_var (h, "SLURM_JOB_USER"),
                                slurm_hook_var (h, "SLURM_NODELIST"),
                                slurm_hook_var (h, "SLURM_JOB_CPUS_PER_NODE"),
                                slurm_hook_var (h, "SPANK_FMB_HWCOLL"),
                                slurm_hook_var (h, "SPANK_FMB_VNIS"),
                                slurm_hook_var (h, "SPANK_FMB_TCS"),
                                e);
    return h->run ? 0 : -1;
}

int slurm_hook_args (
    int argc, char **argv, char *const *env, struct slurm_hook *h, struct fmb_error *e)
{
    memset (h, 0, sizeof (*h));
    h->env = env;
    const char *ctx = slurm_hook_var (h, "SLURM_SCRIPT_CONTEXT");
    if (!ctx || agent_args_have_command (argc, argv))
        return 0;
    /* slurmd keeps nothing a prolog prints, nor slurmctld (e.g. a
     * PrologSlurmctld=/usr/sbin/fmbroker-cxi by mistake); the node
     * service (env given) has its own log */
    if (!env)
        fmb_log_syslog ();
    if (strcmp (ctx, "prolog_slurmd") && strcmp (ctx, "epilog_slurmd")) {
        errno = EINVAL;
        return fmb_errorf (
            e,
            "run by Slurm as %.32s: fmbroker-cxi is only slurmd's Prolog= "
            "and Epilog= (PrologSlurmctld is prolog_slurmctld.sh)",
            ctx);
    }
    h->active = true;
    h->prolog = strcmp (ctx, "prolog_slurmd") == 0;
    const char *job = slurm_hook_var (h, "SLURM_JOB_ID");
    const char *node = slurm_hook_var (h, "SLURMD_NODENAME");
    if (job && valid_job_id (job))
        h->job = job;
    if (!job || !*job || !node || !*node) {
        errno = EINVAL;
        return fmb_errorf (e,
                           "run as Slurm's %s without SLURM_JOB_ID and SLURMD_NODENAME",
                           h->prolog ? "Prolog" : "Epilog");
    }
    h->argv = calloc ((size_t)argc + SLURM_HOOK_EXTRA_ARGS + 1, sizeof (char *));
    if (!h->argv) {
        errno = ENOMEM;
        return fmb_errorf (e, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < argc; i++)
        h->argv[n++] = argv[i];
    h->argv[n++] = h->prolog ? "prolog" : "epilog";
    h->argv[n++] = "--job";
    h->argv[n++] = (char *)job;
    h->argv[n++] = "--node";
    h->argv[n++] = (char *)node;
    if (h->prolog) {
        /* the node's report after exit: the job's start waits for its
         * services, not for the broker's bookkeeping */
        h->argv[n++] = "--report-later";
        /* a step's setup (the node service): this node's CPUs, from the
         * step's credential, size its CXI services (the RUN has none) */
        const char *ncores = slurm_hook_var (h, "FMB_NCORES");
        if (ncores && env) {
            h->argv[n++] = "--ncores";
            h->argv[n++] = (char *)ncores;
        }
    } else {
        /* a service a dying task still holds is retried a while before
         * the node is drained for it; the node service (env given) does
         * not wait: it answers NODE_SERVICE_BUSY, and the caller runs
         * fmbroker-cxi, which does */
        h->argv[n++] = "--retry-busy";
        h->argv[n++] = env ? "0" : "30";
    }
    h->argc = n;
    return 0;
}

/* The prolog failed: the job's record says why (the agent's own, when it
 * got as far as writing one), for the job's steps to tell the user. */
static void keep_reason (const struct slurm_hook *h,
                         const char *state_dir,
                         const char *reason)
{
    const char *job = h->job;
    char path[1200];
    struct fmb_error e;
    if (!job || jobrecord_path (path, sizeof (path), state_dir, job) < 0 ||
        access (path, F_OK) == 0)
        return;
    uint32_t uid = (uint32_t)strtoul (var_or_empty (h, "SLURM_JOB_UID"), NULL, 10);
    if (jobrecord_write_reason (state_dir, job, uid, reason, &e) < 0)
        fmb_log (LOG_ERR, "job %s: %s", job, e.text);
}

int slurm_hook_finish (struct agent *ag, const struct slurm_hook *h, int rc)
{
    const char *job = h->job ? h->job : "?";
    if (rc == 0)
        return 0;
    if (h->prolog) {
        keep_reason (h,
                     ag->args.state_dir ? ag->args.state_dir : JOBRECORD_DIR_DEFAULT,
                     ag->final_reason[0]
                         ? ag->final_reason
                         : "the node prolog (fmbroker-cxi) could not run: "
                           "see this node's syslog");
        return 0;
    }
    if (rc == EXIT_FAIL) {
        fmb_log (LOG_ERR,
                 "job %s: CXI services may be left behind; slurmd drains this node",
                 job);
        return EXIT_FAIL;
    }
    /* It could not start (its configuration): the job's VNIs stay
     * quarantined until this node reports, so nothing is shared, and
     * draining every node for one bad file would stop the cluster. */
    fmb_log (LOG_ERR,
             "job %s: the epilog could not run (exit %d): its CXI services may be "
             "left behind and its VNIs stay quarantined; fix it, then run: "
             "fmbroker-cxi housekeeping --job %s",
             job,
             rc,
             job);
    return 0;
}

void slurm_hook_clear (struct slurm_hook *h)
{
    free (h->argv);
    free (h->run);
    h->argv = NULL;
    h->run = NULL;
}

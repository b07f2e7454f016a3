/* facts.c: a job's facts on this node (facts.h). */
#include "facts.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "hostlist.h"
#include "log.h"
#include "report.h"
#include "validate.h"

void facts_record_path (struct agent *ag, char *out, size_t len)
{
    /* (the job id was checked with the arguments: jobrecord_facts_path's
     * form, which the node service reads too) */
    snprintf (out, len, "%s/%s.json", ag->args.state_dir, ag->args.job);
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

/* prolog --run: the job's RUN, made from this node (Slurm's launch setup,
 * [api] node_run = true on the nodes: no PrologSlurmctld, so srun's
 * launch does not wait for the controller).  Every node of the job sends
 * the same request; the first creates the job, the others get the same
 * answer, each its own view.  The node list goes as Slurm gives it, a
 * hostlist: a 10,000-node job's request stays a few dozen bytes, and
 * the broker answers the same bytes again without reading the list
 * (runmemo.h).  A broker older than that takes only an array: on its
 * 400 the list goes expanded.  *job: the broker's. */
static int run_from_node (struct agent *ag, json_t **job, struct fmb_error *error)
{
    json_error_t jerr;
    char path[256];
    json_t *body = json_loads (ag->args.run, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object (body)) {
        json_decref (body);
        errno = EINVAL;
        return fmb_errorf (error, "job %s: --run: not a JSON object", ag->args.job);
    }
    snprintf (path, sizeof (path), "/v1/jobs/%s", ag->args.job);
    json_t *nodes = json_object_get (body, "nodes");
    int rc = -1;
    for (int expanded = 0; expanded < 2; expanded++) {
        char *text = json_dumps (body, JSON_COMPACT);
        rc = text ? agent_broker_call (ag, "PUT", path, text, job, error) : -1;
        free (text);
        if (rc == 0 || ag->broker_status != 400 || !json_is_string (nodes))
            break;
        json_t *names = json_array ();
        if (hostlist_expand (json_string_value (nodes), names, error) < 0) {
            json_decref (names);
            json_decref (body);
            return fmb_error_prefix (error, "job %s: --run: nodes", ag->args.job);
        }
        json_object_set_new (body, "nodes", names);
        nodes = names;
    }
    json_decref (body);
    if (rc < 0)
        return fmb_error_prefix (
            error, "job %s: the broker did not RUN the job", ag->args.job);
    return 0;
}

/* The job's facts from the broker: this node's view of the job, or the
 * whole job, or (prolog --run) the answer to the RUN made here. */
static int facts_from_broker (struct agent *ag,
                              struct job_facts *f,
                              json_t **env,
                              struct fmb_error *error)
{
    char api[512], node[256];
    json_t *job;
    /* The job as this node needs it: not the list of every node.  A
     * broker older than that view answers 405, and a host name that is no
     * node name cannot ask for it: then the whole job. */
    report_this_node (ag, node, sizeof (node));
    snprintf (api, sizeof (api), "/v1/jobs/%s/nodes/%s", ag->args.job, node);
    int got = -1;
    bool whole = !valid_node_name (node);
    if (ag->args.run) {
        if (run_from_node (ag, &job, error) < 0)
            return -1;
        got = 0;
        whole = false;
    } else if (!whole) {
        got = agent_broker_call (ag, "GET", api, NULL, &job, error);
        whole = got < 0 && ag->broker_status == 405;
    }
    if (whole) {
        snprintf (api, sizeof (api), "/v1/jobs/%s", ag->args.job);
        got = agent_broker_call (ag, "GET", api, NULL, &job, error);
    }
    if (got < 0) {
        fmb_log (LOG_INFO,
                 "job %s: the broker did not give the job's facts; by hand, "
                 "--uid and --vnis do without it",
                 ag->args.job);
        return fmb_error_prefix (
            error, "job %s: cannot get the job's VNIs from the broker", ag->args.job);
    }
    int rc = facts_from_json (job, f);
    if (ag->args.ncores > 0)
        f->ncores = (unsigned)ag->args.ncores;
    if (ag->args.tcs >= 0) /* the job's own choice (Slurm: --fmb-tcs) */
        f->tcs = (unsigned)ag->args.tcs;
    if (env)
        *env = json_incref (json_object_get (job, "env"));
    json_decref (job);
    if (rc < 0) {
        errno = EPROTO;
        return fmb_errorf (
            error, "job %s: the broker's answer has no uid/vnis", ag->args.job);
    }
    return 0;
}

/* Facts from the flags, this node's record, or the broker (in that
 * order).  *env (may be NULL) gets the broker's env map when it was asked. */
int facts_get (struct agent *ag,
               struct job_facts *f,
               json_t **env,
               struct fmb_error *error)
{
    memset (f, 0, sizeof (*f));
    snprintf (f->id, sizeof (f->id), "%s", ag->args.job);
    f->tcs = ag->cfg.cxi_tcs;
    if (ag->args.have_facts) {
        f->uid = ag->args.uid;
        f->nvnis = ag->args.nvnis;
        memcpy (f->vnis, ag->args.vnis, sizeof (f->vnis));
        f->ncores = ag->args.ncores > 0 ? (unsigned)ag->args.ncores : 0;
        if (ag->args.tcs >= 0)
            f->tcs = (unsigned)ag->args.tcs;
        return 0;
    }
    char path[PATH_MAX];
    facts_record_path (ag, path, sizeof (path));
    json_t *rec = env ? NULL : json_load_file (path, 0, NULL);
    if (rec) {
        int rc = facts_from_json (rec, f);
        json_decref (rec);
        if (rc == 0)
            return 0;
    }
    return facts_from_broker (ag, f, env, error);
}

int facts_write_record (struct agent *ag, const struct job_facts *f, json_t *services)
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
    facts_record_path (ag, path, sizeof (path));
    int rc = fmb_mkdir_p (ag->args.state_dir, 0700, &e);
    if (rc == 0)
        /* not waited for on disk: the services it records do not
         * outlive a crash of the node (fileutil.h) */
        rc = fmb_write_file_replace_owned (
            path, 0600, (uid_t)-1, text, strlen (text), &e);
    if (rc < 0)
        fmb_log (LOG_WARNING, "job %s: %s", f->id, e.text);
    free (text);
    return rc;
}

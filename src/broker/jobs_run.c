/* jobs_run.c: RUN (jobs_run.h).
 *
 * PUT /v1/jobs/{job}: validate; VNIs from the pool and the job row with
 * hwcoll "reserving" committed together (the intent); then the FM
 * reservation within reserve_timeout_ms (a POST, or GET then POST for a
 * repeated RUN: reservations.c); the answer records the outcome.
 * Anything but success leaves hwcoll "unavailable" (the job runs with
 * software collectives) and an outbox entry that deletes whatever the FM
 * may still make.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "fmsession.h"
#include "httpreq.h"
#include "outbox.h"
#include "reservations.h"
#include "runmemo.h"
#include "store.h"
#include "jsonutil.h"
#include "jobs_run.h"
#include "jobs_view.h"
#include "hostlist.h"
#include "log.h"
#include "runopts.h"

/* ---- RUN ----------------------------------------------------------- */

/* Put the reason a RUN body is refused in 'why'; returns -1. */
static int refuse (char *why, size_t len, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static int refuse (char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, len, fmt, ap);
    va_end (ap);
    return -1;
}

static bool integer_in (json_t *v, json_int_t lo, json_int_t hi)
{
    return json_is_integer (v) && json_integer_value (v) >= lo &&
           json_integer_value (v) <= hi;
}

/* RUN's tcs: a mask ("0xa") or class names, within [cxi] allowed_tcs. */
static int parse_run_tcs (const struct fmb_config *cfg,
                          json_t *v,
                          struct run_request *rr,
                          char *why,
                          size_t len)
{
    struct fmb_error e;
    if (!json_is_string (v))
        snprintf (e.text, sizeof (e.text), "a string of traffic classes");
    else if (fmb_config_parse_tcs_within (
                 json_string_value (v), cfg->cxi_allowed_tcs, &rr->tcs, &e) == 0)
        return 0;
    return refuse (why, len, "tcs: %s ([cxi] allowed_tcs)", e.text);
}

static int check_run_fields (json_t *body, char *why, size_t len)
{
    static const char *const known[] = {
        "uid", "user", "nodes", "node_count", "ncores", "hwcoll", "vni_count", "tcs"};
    const char *key;
    json_t *v;
    json_object_foreach (body, key, v)
    {
        size_t i;
        for (i = 0; i < sizeof (known) / sizeof (known[0]); i++)
            if (strcmp (key, known[i]) == 0)
                break;
        if (i == sizeof (known) / sizeof (known[0]))
            return refuse (why, len, "unknown field '%.64s'", key);
    }
    return 0;
}

/* RUN's nodes: 1..NODES_MAX valid names, none twice. */
static int check_run_nodes (json_t *nodes, char *why, size_t len)
{
    size_t i;
    json_t *v;
    if (!json_is_array (nodes) || json_array_size (nodes) == 0 ||
        json_array_size (nodes) > NODES_MAX)
        return refuse (why, len, "nodes: an array of 1..%d node names", NODES_MAX);
    json_t *seen = json_object ();
    int rc = 0;
    json_array_foreach (nodes, i, v)
    {
        const char *name = json_string_value (v);
        if (!name || !valid_node_name (name))
            rc = refuse (why,
                         len,
                         "nodes[%zu]: node names are 1-64 characters of [A-Za-z0-9._-]",
                         i);
        else if (json_object_get (seen, name))
            rc = refuse (why, len, "nodes[%zu]: '%s' listed twice", i, name);
        else
            json_object_set_new (seen, name, json_true ());
        if (rc < 0)
            break;
    }
    json_decref (seen);
    return rc;
}

/* A hostlist ("nid[0001-9999]", as Slurm and Flux give it) in place of
 * the array it names: what the stored request and the job's nodes are. */
static int expand_nodes (json_t *body, json_t **nodes, char *why, size_t len)
{
    struct fmb_error e;
    json_t *names = json_array ();
    if (!names || hostlist_expand (json_string_value (*nodes), names, &e) < 0) {
        json_decref (names);
        return refuse (why, len, "nodes: %s", names ? e.text : "out of memory");
    }
    json_object_set_new (body, "nodes", names);
    *nodes = names;
    return 0;
}

/* RUN's nodes and node_count: one of them at least; if both, they agree. */
static int parse_run_nodes (json_t *body, struct run_request *rr, char *why, size_t len)
{
    json_t *nodes = json_object_get (body, "nodes");
    json_t *count = json_object_get (body, "node_count");
    if (!nodes && !count)
        return refuse (why, len, "nodes or node_count is required");
    if (json_is_string (nodes) && expand_nodes (body, &nodes, why, len) < 0)
        return -1;
    if (nodes) {
        if (check_run_nodes (nodes, why, len) < 0)
            return -1;
        rr->nodes = nodes;
        rr->node_count = (json_int_t)json_array_size (nodes);
    }
    if (count) {
        if (!integer_in (count, 1, 1000000))
            return refuse (why, len, "node_count: an integer 1..1000000");
        if (nodes && json_integer_value (count) != rr->node_count)
            return refuse (why,
                           len,
                           "node_count (%lld) differs from the length of nodes (%lld)",
                           (long long)json_integer_value (count),
                           (long long)rr->node_count);
        rr->node_count = json_integer_value (count);
    }
    return 0;
}

/* RUN's optional ncores, hwcoll, vni_count and tcs: the rules every
 * client checks before it sends them (runopts.h), in the server's words. */
static int parse_run_options (const struct fmb_config *cfg,
                              json_t *body,
                              struct run_request *rr,
                              char *why,
                              size_t len)
{
    json_t *v;
    if ((v = json_object_get (body, "ncores"))) {
        if (!json_is_integer (v) || !run_ncores_ok (json_integer_value (v)))
            return refuse (why, len, "ncores: an integer 0..%d", RUN_NCORES_MAX);
        rr->ncores = json_integer_value (v);
    }
    if ((v = json_object_get (body, "hwcoll"))) {
        int h = run_hwcoll_parse (json_string_value (v));
        if (h < 0)
            return refuse (why, len, "hwcoll: one of auto, on, off");
        rr->hwcoll = run_hwcoll_name ((enum run_hwcoll)h);
    }
    if ((v = json_object_get (body, "vni_count"))) {
        if (!json_is_integer (v) ||
            !run_vni_count_ok (json_integer_value (v), cfg->vni_max_per_job))
            return refuse (why,
                           len,
                           "vni_count: an integer 0..%u ([vni] max_per_job)",
                           cfg->vni_max_per_job);
        rr->vni_count = json_integer_value (v);
    }
    if ((v = json_object_get (body, "tcs")) && parse_run_tcs (cfg, v, rr, why, len) < 0)
        return -1;
    return 0;
}

int jobs_parse_run (const struct fmb_config *cfg,
                    json_t *body,
                    struct run_request *rr,
                    char *why,
                    size_t len)
{
    json_t *v;
    if (check_run_fields (body, why, len) < 0)
        return -1;
    *rr = (struct run_request){.hwcoll = "auto", .vni_count = cfg->vni_per_job};
    v = json_object_get (body, "uid");
    if (!integer_in (v, 0, UID_MAX_VALID))
        return refuse (why, len, "uid: required, an integer 0..%u", UID_MAX_VALID);
    rr->uid = json_integer_value (v);
    if ((v = json_object_get (body, "user"))) {
        if (!json_is_string (v) || !valid_user_name (json_string_value (v)))
            return refuse (
                why, len, "user: a name of 1-256 characters of [A-Za-z0-9._@\\+$-]");
        rr->user = json_string_value (v);
    }
    if (parse_run_nodes (body, rr, why, len) < 0)
        return -1;
    return parse_run_options (cfg, body, rr, why, len);
}

/* The request as stored: a repeated RUN must match it exactly. */
static char *canonical_request (const struct run_request *rr)
{
    json_t *o = json_pack ("{s:I, s:I, s:I, s:s, s:I}",
                           "uid",
                           rr->uid,
                           "node_count",
                           rr->node_count,
                           "ncores",
                           rr->ncores,
                           "hwcoll",
                           rr->hwcoll,
                           "vni_count",
                           rr->vni_count);
    if (rr->user)
        json_object_set_new (o, "user", json_string (rr->user));
    if (rr->nodes)
        json_object_set (o, "nodes", rr->nodes);
    if (rr->tcs) { /* only when asked: requests stored before tcs still match */
        char tcs[16];
        snprintf (tcs, sizeof (tcs), "0x%x", rr->tcs);
        json_object_set_new (o, "tcs", json_string (tcs));
    }
    char *s = fmb_json_dump (o);
    json_decref (o);
    return s;
}

/* Should this job get hardware collectives?  STORE_HWCOLL_RESERVING if
 * yes, otherwise the state to record and why. */
static enum store_hwcoll_state eligibility (struct broker *b,
                                            const struct run_request *rr,
                                            const char *fm_job_id,
                                            char *why,
                                            size_t len)
{
    struct fmb_error e;
    unsigned limit = fmb_config_mcast_limit (&b->cfg);
    bool on = strcmp (rr->hwcoll, "on") == 0;
    why[0] = '\0';
    if (!b->fmc)
        snprintf (why, len, "no fabric manager configured (VNI-only mode)");
    else if (strcmp (rr->hwcoll, "off") == 0)
        snprintf (why, len, "hwcoll=off requested");
    else if (limit == 0)
        snprintf (why, len, "no multicast addresses per job configured");
    else if (b->cfg.hwcoll_mode == FMB_HWCOLL_REQUEST && !on)
        snprintf (why, len, "hwcoll not requested ([hwcoll] mode = request)");
    else if (!on && rr->node_count < b->cfg.hwcoll_min_nodes)
        snprintf (why,
                  len,
                  "job has %lld node%s, [hwcoll] min_nodes is %u",
                  (long long)rr->node_count,
                  rr->node_count == 1 ? "" : "s",
                  b->cfg.hwcoll_min_nodes);
    if (why[0])
        return STORE_HWCOLL_NOT_ELIGIBLE;
    if (fmsession_state (b->fms) == FM_DOWN) {
        snprintf (
            why, len, "fabric manager unreachable: %.160s", fmsession_error (b->fms));
        return STORE_HWCOLL_UNAVAILABLE;
    }
    /* An earlier run of this job id (Slurm requeues under the same id)
     * left changes to its FM job queued -- its delete, a step's cleanup:
     * a reservation made now under the same FM id would go with them, or
     * lose a step's trees to them. */
    int queued = outbox_fm_job_queued (b->outbox, fm_job_id, &e);
    if (queued != 0) {
        if (queued > 0)
            snprintf (why,
                      len,
                      "the fabric manager has yet to delete %.120s, or steps of "
                      "it, for an earlier run of this job id",
                      fm_job_id);
        else
            snprintf (why,
                      len,
                      "cannot tell whether %.60s is deleted: %.160s",
                      fm_job_id,
                      e.text);
        return STORE_HWCOLL_UNAVAILABLE;
    }
    return STORE_HWCOLL_RESERVING;
}

/* The reservation's outcome, in the store (inside the loop pass). */
int jobs_record_outcome (struct broker *b,
                         const char *job,
                         const struct fmc_result *res,
                         struct fmb_error *e)
{
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    if (res->status == FMC_OK)
        return store_job_set_hwcoll (b->st,
                                     job,
                                     STORE_HWCOLL_RESERVED,
                                     NULL,
                                     fmb_config_mcast_limit (&b->cfg),
                                     res->session_token,
                                     e);
    char reason[600]; /* a refused POST's reason and its GET's: ~512 */
    snprintf (reason, sizeof (reason), "fabric manager: %s", res->error);
    broker_fm_id (b, job, fmid, sizeof (fmid));
    /* The FM may still finish a POST we gave up on: make sure it is
     * deleted (a 404 then simply ends the entry). */
    if (store_job_set_hwcoll (
            b->st, job, STORE_HWCOLL_UNAVAILABLE, reason, 0, NULL, e) < 0 ||
        outbox_queue_job_delete (
            b->outbox, fmid, now_wall () + b->cfg.fm_timeout_ms, e) < 0 ||
        broker_event (
            b, "hwcoll_unavailable", job, json_pack ("{s:s}", "reason", reason), e) < 0)
        return -1;
    fmb_logf (LOG_WARNING,
              &(struct fmb_log_fields){.job = job, .fm_call = fmc_op_name (res->op)},
              "job %s: hardware collectives unavailable: %s",
              job,
              res->error);
    outbox_changed (b->outbox); /* the delete */
    return 0;
}

/* A RUN for a job the RM has cleaned up (releasing or released): the
 * job's next run under the same id, as Slurm's requeue makes it.  The
 * old record goes (0), unless what it still waits for is keyed by the
 * job id -- a reservation call out, VNIs in quarantine until the nodes
 * report -- which a new run would take for its own: then -1, a 409 in
 * 'p'.  Its FM job's delete stays queued (keyed by the FM id;
 * eligibility keeps the new run off the FM until it is done). */
static int run_again (struct broker *b,
                      const struct store_job *old,
                      struct http_problem *p)
{
    struct fmb_error e;
    const char *id = old->id;
    if (reservations_busy (b->rsv, id))
        return http_problemf (p,
                              409,
                              "job '%s': the reservation call of its previous run "
                              "is still out at the fabric manager; retry in a moment",
                              id);
    if (store_job_delete (b->st, id, &e) < 0) {
        if (errno != EBUSY)
            return http_problem_errno (p, "%s", e.text);
        return http_problemf (p,
                              409,
                              "job '%s': the VNIs of its previous run are still "
                              "quarantined, waiting for its nodes to report their CXI "
                              "services destroyed (fmbroker vni list shows which)",
                              id);
    }
    if (old->state == STORE_JOB_RELEASING)
        fmb_logf (LOG_NOTICE,
                  &(struct fmb_log_fields){.job = id},
                  "job %s: run again while its previous run is still being "
                  "released (requeued?): a new run",
                  id);
    return 0;
}

/* The answer to a repeated RUN of live job 'j' (read whole or brief): 1
 * when answered or waiting for the reservation, -1 with 'p'. */
static int run_answer (struct broker *b,
                       struct http_req *req,
                       const struct store_job *j,
                       struct http_problem *p)
{
    const char *id = j->id;
    if (reservations_wait (b->rsv, id, req))
        return 1; /* answered with the reservation in flight */
    if (j->state == STORE_JOB_ACTIVE && j->hwcoll == STORE_HWCOLL_RESERVING) {
        /* None runs: its outcome was never recorded (a failed commit).
         * Started again, or answered as it completed at once. */
        if (!reservations_start (b->rsv, id, req, false))
            return jobs_reply (b, req, id, 200, p) < 0 ? -1 : 1;
        return 1;
    }
    http_reply (req, 200, jobs_view (b, j, http_caller (req)));
    return 1;
}

/* This request's body matched job 'j''s: the job's other nodes' RUNs,
 * the same bytes, are answered from the memo. */
static void remember_run (struct broker *b,
                          struct http_req *req,
                          const struct store_job *j)
{
    size_t len;
    const char *text = http_body_text (req, &len);
    if (text)
        runmemo_put (b->runmemo, j->id, j->created_ms, text, len);
}

/* A RUN for a job the store has: 1 when answered (a repeat: the same
 * answer, or 409 for a different request), 0 when there is none or the
 * RM cleaned it up (run_again). */
static int run_existing (struct broker *b,
                         struct http_req *req,
                         const char *canon,
                         struct http_problem *p)
{
    const char *id = http_job (req);
    struct store_job *old;
    struct fmb_error e;
    if (store_job_get (b->st, id, &old, &e) < 0)
        return errno == ENOENT ? 0 : http_problemf (p, 503, "%s", e.text);
    if (old->state == STORE_JOB_RELEASED || old->state == STORE_JOB_RELEASING) {
        int rc = run_again (b, old, p);
        store_job_free (old);
        return rc;
    }
    /* RUN repeated (RM retry, hook re-run): same job, same answer. */
    int rc;
    if (strcmp (old->request, canon) != 0)
        rc = http_problemf (p, 409, "job '%s' exists with a different request", id);
    else {
        remember_run (b, req, old);
        rc = run_answer (b, req, old, p);
    }
    store_job_free (old);
    return rc;
}

/* A node's RUN whose body, byte for byte, is one already taken for this
 * live job (runmemo.h): answered without reading its node list, as
 * every node but the first of a full-machine job sends it.  1:
 * answered (or refused: -1); 0: not known, the full check decides. */
static int run_memoized (struct broker *b, struct http_req *req, struct http_problem *p)
{
    size_t len;
    const char *text = http_body_text (req, &len);
    struct store_job *j;
    struct fmb_error e;
    if (!text || len > RUNMEMO_BODY_MAX ||
        store_job_get_brief (b->st, http_job (req), &j, &e) < 0)
        return 0;
    int rc = 0;
    if ((j->state == STORE_JOB_ACTIVE || j->state == STORE_JOB_LOST) &&
        runmemo_has (b->runmemo, j->id, j->created_ms, text, len))
        rc = jobs_node_member (b, http_caller (req), j)
                 ? run_answer (b, req, j, p)
                 : jobs_node_refused (
                       req, p, "may RUN only a job whose node list names it");
    store_job_free (j);
    return rc;
}

/* The intent of a RUN: job 'j' and its VNIs (and why no collectives) in
 * one transaction, before any FM call.  A crash after this is resolved
 * at start. */
static int run_write_intent (struct broker *b,
                             struct store_job *j,
                             unsigned vni_count,
                             struct fmb_error *e)
{
    if (store_begin (b->st, e) < 0)
        return -1;
    if (store_job_put (b->st, j, e) < 0 ||
        store_vni_alloc (
            b->st, j->id, vni_count, b->cfg.vni_min, b->cfg.vni_max, j->vnis, e) < 0 ||
        (j->hwcoll == STORE_HWCOLL_UNAVAILABLE &&
         broker_event (b,
                       "hwcoll_unavailable",
                       j->id,
                       json_pack ("{s:s}", "reason", j->hwcoll_reason),
                       e) < 0)) {
        store_rollback (b->st);
        return -1;
    }
    if (store_commit (b->st, e) < 0)
        return -1;
    j->nvnis = vni_count;
    return 0;
}

static bool run_names_node (const struct run_request *rr, const char *node)
{
    size_t i;
    json_t *n;
    json_array_foreach (rr->nodes, i, n)
    {
        if (json_is_string (n) && strcmp (json_string_value (n), node) == 0)
            return true;
    }
    return false;
}

/* A RUN of a job the store does not have (or has no more): its intent,
 * then its reservation if it may have one.  'canon': the request as
 * stored. */
static int run_new (struct broker *b,
                    struct http_req *req,
                    const struct run_request *rr,
                    char *canon,
                    struct http_problem *p)
{
    const char *id = http_job (req);
    struct fmb_error e;
    char reason[256], fm_job_id[STORE_FM_JOB_ID_MAX + 1];
    broker_fm_id (b, id, fm_job_id, sizeof (fm_job_id));
    enum store_hwcoll_state hw =
        eligibility (b, rr, fm_job_id, reason, sizeof (reason));
    char *nodes = rr->nodes ? fmb_json_dump (rr->nodes) : NULL;
    struct store_job j = {
        .uid = (uint32_t)rr->uid,
        .user = (char *)rr->user,
        .nodes = nodes,
        .node_count = (unsigned)rr->node_count,
        .ncores = (unsigned)rr->ncores,
        .request = canon,
        .state = STORE_JOB_ACTIVE,
        .hwcoll = hw,
        .hwcoll_reason = reason[0] ? reason : NULL,
        .mcast_limit =
            hw == STORE_HWCOLL_RESERVING ? fmb_config_mcast_limit (&b->cfg) : 0,
        .tcs = rr->tcs,
    };
    snprintf (j.id, sizeof (j.id), "%s", id);
    snprintf (j.fm_job_id, sizeof (j.fm_job_id), "%s", fm_job_id);
    int rc = run_write_intent (b, &j, (unsigned)rr->vni_count, &e);
    if (rc == 0)
        remember_run (b, req, &j);
    if (rc == 0 && hw != STORE_HWCOLL_RESERVING) /* the job as just written */
        http_reply (req, 201, jobs_view (b, &j, http_caller (req)));
    free (nodes);
    if (rc < 0) {
        int status = http_status_of_errno (errno);
        if (errno == ENOSPC)
            fmb_logf (
                LOG_ERR, &(struct fmb_log_fields){.job = id}, "job %s: %s", id, e.text);
        return http_problemf (p, status, "job '%s': %s", id, e.text);
    }
    if (hw != STORE_HWCOLL_RESERVING)
        return 0;
    /* completed (as unavailable) already: read what it wrote */
    if (!reservations_start (b->rsv, id, req, true))
        return jobs_reply (b, req, id, 201, p);
    return 0;
}

/* A node's RUN of a job the store does not have: refused while the node
 * is in [api] node_max_jobs jobs that still hold something.  A node's
 * credential (root on the node, a copy of its token) could otherwise
 * make jobs naming only itself until the VNI pool is empty; the cap
 * bounds what one node holds to node_max_jobs x [vni] per_job VNIs,
 * and leaves the RM's RUN, and a node joining a job that exists, alone.
 * 0: under the cap. */
static int run_node_cap (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const struct caller *c = http_caller (req);
    unsigned cap = b->cfg.api_node_max_jobs, n = 0;
    struct fmb_error e;
    if (store_node_live_jobs (b->st, c->node, cap, &n, &e) < 0)
        return http_problemf (p, 503, "%s", e.text);
    if (n < cap)
        return 0;
    return jobs_node_refused (
        req,
        p,
        "is in %u jobs that hold VNIs already, [api] node_max_jobs; "
        "a new job's RUN must come from the resource manager",
        n);
}

int jobs_run (struct broker *b, struct http_req *req, struct http_problem *p)
{
    struct run_request rr;
    char why[300];
    /* A node prolog's RUN (Slurm's launch setup), only where the site said so:
     * every holder of the agent token could then create jobs. */
    if (!(http_caller (req)->roles & ROLE_RM) && !b->cfg.api_agent_run)
        return http_problemf (
            p, 403, "an agent token may RUN a job only with [api] agent_run = true");
    if (jobs_node_only (http_caller (req))) {
        int known = run_memoized (b, req, p);
        if (known != 0)
            return known < 0 ? -1 : 0;
    }
    if (jobs_parse_run (&b->cfg, http_body (req), &rr, why, sizeof (why)) < 0)
        return http_problemf (p, 400, "%s", why);
    /* A node speaks only for itself: it may RUN only a job whose node
     * list names it (never one given only a node count). */
    const struct caller *c = http_caller (req);
    if (jobs_node_only (c) && !run_names_node (&rr, c->node))
        return jobs_node_refused (
            req, p, "may RUN only a job whose node list names it");
    char *canon = canonical_request (&rr);
    if (!canon)
        return http_problemf (p, 500, "out of memory");
    int rc = run_existing (b, req, canon, p);
    if (rc == 0 && jobs_node_only (c))
        rc = run_node_cap (b, req, p);
    if (rc == 0)
        rc = run_new (b, req, &rr, canon, p);
    free (canon);
    return rc < 0 ? -1 : 0;
}

/* jobs.c: the job lifecycle as the resource manager drives it.
 *
 * RUN    PUT /v1/jobs/{job}: validate; VNIs from the pool and the job
 *        row with hwcoll "reserving" committed together (the intent);
 *        then the FM reservation within reserve_timeout_ms (a POST,
 *        or GET then POST for a repeated RUN: reservations.c); the
 *        answer records the outcome.  Anything but success leaves
 *        hwcoll "unavailable" (the job runs with software collectives)
 *        and an outbox entry that deletes whatever the FM may still make.
 * CLEANUP DELETE /v1/jobs/{job}: one transaction moves the job to
 *        releasing, quarantines its VNIs and queues the FM delete; the
 *        answer is 202 at once and the outbox does the rest.
 * Steps, node reports and the job views live here too.
 */
#include <errno.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "fmsession.h"
#include "httpreq.h"
#include "metrics.h"
#include "outbox.h"
#include "pass.h"
#include "ratelimit.h"
#include "reconcile.h"
#include "reservations.h"
#include "store.h"
#include "timer.h"
#include "jsonutil.h"
#include "nsscache.h"
#include "log.h"
#include "monotime.h"

/* Does hwcoll state 's' stand for a reservation (made or being made),
 * which CLEANUP turns into 'released'?  The other states keep their
 * reason in the job's history. */
static bool jobs_hwcoll_held (enum store_hwcoll_state s)
{
    return s == STORE_HWCOLL_RESERVED || s == STORE_HWCOLL_RESERVING;
}

/* Does a reserve call for this job run right now? */
static bool jobs_reserving (struct broker *b, const char *job)
{
    return reservations_busy (b->rsv, job);
}

/* ---- a node's own credential ---------------------------------------- */

static int node_found (const struct store_node *n, void *arg)
{
    (void)n;
    *(bool *)arg = true;
    return 0;
}

/* Does the job include the calling node?  Callers that are not a node
 * (rm, admin, the shared agent token, a job's token) pass.  A job RUN
 * with only node_count has no node list to check: no node is its member
 * here (its VNIs and state may still be read and reported on, but not
 * its session token or its steps). */
static bool node_member (struct broker *b,
                         const struct caller *c,
                         const struct store_job *j)
{
    if (!c->node[0])
        return true;
    if (!j->node_list)
        return false;
    bool found = false;
    struct fmb_error e;
    if (store_node_list (b->st, j->id, c->node, node_found, &found, &e) < 0) {
        broker_log_store_error (b, "node membership", &e);
        return false;
    }
    return found;
}

/* 403 for a node acting beyond itself, logged with its identity. */
static int node_refused (struct http_req *req,
                         struct http_problem *p,
                         const char *fmt,
                         ...) __attribute__ ((format (printf, 3, 4)));
static int node_refused (struct http_req *req,
                         struct http_problem *p,
                         const char *fmt,
                         ...)
{
    char why[256];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    http_log_refusal (req, "job %s: %s", http_job (req), why);
    return http_problemf (p, 403, "node %s: %s", http_caller (req)->node, why);
}

/* ---- views --------------------------------------------------------- */

static bool may_see_token (struct broker *b,
                           const struct caller *c,
                           const struct store_job *j)
{
    return (c->roles & (ROLE_RM | ROLE_ADMIN)) ||
           ((c->roles & ROLE_AGENT) && node_member (b, c, j)) || c->job_token_ok ||
           (c->local && c->uid == j->uid);
}

/* The job's traffic classes: its own from RUN, else [cxi] tcs. */
static unsigned job_tcs (const struct broker *b, const struct store_job *j)
{
    return j->tcs ? j->tcs : b->cfg.cxi_tcs;
}

static json_t *job_env (struct broker *b, const struct store_job *j, bool token)
{
    json_t *env = json_object ();
    char buf[64];
    if (j->nvnis) {
        char vnis[64] = "";
        for (unsigned i = 0; i < j->nvnis; i++) {
            size_t used = strlen (vnis);
            snprintf (
                vnis + used, sizeof (vnis) - used, "%s%u", i ? "," : "", j->vnis[i]);
        }
        json_object_set_new (env, "SLINGSHOT_VNIS", json_string (vnis));
    }
    snprintf (buf, sizeof (buf), "0x%x", job_tcs (b, j));
    json_object_set_new (env, "SLINGSHOT_TCS", json_string (buf));
    bool live = j->state == STORE_JOB_ACTIVE;
    if (j->hwcoll == STORE_HWCOLL_RESERVED && live && b->fmc) {
        json_object_set_new (env, "FI_CXI_COLL_JOB_ID", json_string (j->fm_job_id));
        if (token && j->token)
            json_object_set_new (
                env, "FI_CXI_COLL_MCAST_TOKEN", json_string (j->token));
        json_object_set_new (env,
                             "FI_CXI_COLL_FABRIC_MGR_URL",
                             json_string (fmc_multicast_url (b->fmc)));
        snprintf (buf, sizeof (buf), "%u", j->mcast_limit);
        json_object_set_new (env, "FI_CXI_HWCOLL_ADDRS_PER_JOB", json_string (buf));
        snprintf (buf, sizeof (buf), "%u", b->cfg.hwcoll_min_nodes);
        json_object_set_new (env, "FI_CXI_HWCOLL_MIN_NODES", json_string (buf));
    }
    return env;
}

/* The job as the API shows it, but for the list of its nodes. */
static json_t *job_view_without_nodes (struct broker *b,
                                       const struct store_job *j,
                                       const struct caller *c)
{
    bool token = may_see_token (b, c, j);
    json_t *vnis = json_array ();
    char tcs[16];
    for (unsigned i = 0; i < j->nvnis; i++)
        json_array_append_new (vnis, json_integer (j->vnis[i]));
    snprintf (tcs, sizeof (tcs), "0x%x", job_tcs (b, j));
    json_t *hw = json_pack ("{s:s, s:s, s:i}",
                            "state",
                            store_hwcoll_state_name (j->hwcoll),
                            "fm_job_id",
                            j->fm_job_id,
                            "mcast_limit",
                            (int)j->mcast_limit);
    if (j->hwcoll_reason)
        json_object_set_new (hw, "reason", json_string (j->hwcoll_reason));
    if (token && j->token && j->hwcoll == STORE_HWCOLL_RESERVED)
        json_object_set_new (hw, "session_token", json_string (j->token));
    json_t *o = json_pack ("{s:s, s:s, s:I, s:i, s:i, s:o, s:s, s:o, s:o, s:I, s:I}",
                           "id",
                           j->id,
                           "state",
                           store_job_state_name (j->state),
                           "uid",
                           (json_int_t)j->uid,
                           "node_count",
                           (int)j->node_count,
                           "ncores",
                           (int)j->ncores,
                           "vnis",
                           vnis,
                           "tcs",
                           tcs,
                           "hwcoll",
                           hw,
                           "env",
                           job_env (b, j, token),
                           "created_ms",
                           (json_int_t)j->created_ms,
                           "updated_ms",
                           (json_int_t)j->updated_ms);
    if (j->user)
        json_object_set_new (o, "user", json_string (j->user));
    if (j->released_ms)
        json_object_set_new (o, "released_ms", json_integer (j->released_ms));
    return o;
}

static json_t *job_view (struct broker *b,
                         const struct store_job *j,
                         const struct caller *c)
{
    json_t *o = job_view_without_nodes (b, j, c);
    if (j->nodes)
        json_object_set_new (o, "nodes", json_loads (j->nodes, 0, NULL));
    return o;
}

static int node_report (const struct store_node *n, void *arg)
{
    json_t *o = json_pack ("{s:s, s:s, s:I}",
                           "node",
                           n->node,
                           "cxi",
                           store_cxi_state_name (n->cxi),
                           "updated_ms",
                           (json_int_t)n->updated_ms);
    if (o && n->detail)
        json_object_set_new (o, "detail", json_string (n->detail));
    return json_array_append_new (arg, o);
}

static int node_name (const struct store_node *n, void *arg)
{
    return json_array_append_new (arg, json_string (n->node));
}

/* The nodes whose agent has not reported the job's services destroyed
 * (pending, created or failed): who keeps its VNIs quarantined. */
static json_t *waiting_for (struct broker *b, const char *job)
{
    struct fmb_error e;
    json_t *a = json_array ();
    if (store_node_list_waiting (b->st, job, node_name, a, &e) < 0) {
        broker_log_store_error (b, "node reports", &e);
        json_decref (a);
        return NULL;
    }
    return a;
}

/* What each node's agent last reported, for GET of one job: which node
 * keeps the VNIs quarantined, and why.  Not in listings (a query each).
 * Once the job is over and still holds VNIs, 'waiting_for' names the
 * nodes that have not reported destroyed. */
static void add_node_reports (struct broker *b, const struct store_job *j, json_t *view)
{
    struct fmb_error e;
    json_t *a = json_array ();
    if (store_node_list (b->st, j->id, NULL, node_report, a, &e) < 0) {
        broker_log_store_error (b, "node reports", &e);
        json_decref (a);
        return;
    }
    json_object_set_new (view, "node_reports", a);
    if (j->nvnis && j->state != STORE_JOB_ACTIVE && j->state != STORE_JOB_LOST) {
        json_t *w = waiting_for (b, j->id);
        if (w)
            json_object_set_new (view, "waiting_for", w);
    }
}

/* Reply with the job as it is in the store now; 503 for an active job
 * still 'reserving' with no reservation running (its outcome could not be
 * written). */
static int reply_job (struct broker *b,
                      struct http_req *req,
                      const char *id,
                      int status,
                      struct http_problem *p)
{
    struct store_job *j;
    struct fmb_error e;
    if (store_job_get (b->st, id, &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    bool unrecorded = j->state == STORE_JOB_ACTIVE &&
                      j->hwcoll == STORE_HWCOLL_RESERVING &&
                      !reservations_busy (b->rsv, id);
    if (!unrecorded)
        http_reply (req, status, job_view (b, j, http_caller (req)));
    store_job_free (j);
    /* Its reservation ended (at once, say) but the outcome could not be
     * written: not an answer to build a job on; the repeated RUN starts
     * it again. */
    return unrecorded ? http_problemf (p,
                                       503,
                                       "job '%s': the outcome of its reservation could "
                                       "not be recorded; repeat the request",
                                       id)
                      : 0;
}

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

/* RUN's nodes and node_count: one of them at least; if both, they agree. */
static int parse_run_nodes (json_t *body, struct run_request *rr, char *why, size_t len)
{
    json_t *nodes = json_object_get (body, "nodes");
    json_t *count = json_object_get (body, "node_count");
    if (!nodes && !count)
        return refuse (why, len, "nodes or node_count is required");
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

/* RUN's optional ncores, hwcoll, vni_count and tcs. */
static int parse_run_options (const struct fmb_config *cfg,
                              json_t *body,
                              struct run_request *rr,
                              char *why,
                              size_t len)
{
    json_t *v;
    if ((v = json_object_get (body, "ncores"))) {
        if (!integer_in (v, 0, 1000000))
            return refuse (why, len, "ncores: an integer 0..1000000");
        rr->ncores = json_integer_value (v);
    }
    if ((v = json_object_get (body, "hwcoll"))) {
        const char *s = json_string_value (v);
        if (!s || (strcmp (s, "auto") && strcmp (s, "on") && strcmp (s, "off")))
            return refuse (why, len, "hwcoll: one of auto, on, off");
        rr->hwcoll = s;
    }
    if ((v = json_object_get (body, "vni_count"))) {
        if (!integer_in (v, 0, cfg->vni_max_per_job))
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
static int record_outcome (struct broker *b,
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
              &(struct fmb_log_fields){.job = job, .fm_call = res->op},
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
    int rc = 1;
    if (strcmp (old->request, canon) != 0)
        rc = http_problemf (p, 409, "job '%s' exists with a different request", id);
    else if (reservations_wait (b->rsv, id, req))
        rc = 1; /* answered with the reservation in flight */
    else if (old->state == STORE_JOB_ACTIVE && old->hwcoll == STORE_HWCOLL_RESERVING) {
        /* None runs: its outcome was never recorded (a failed commit).
         * Started again, or answered as it completed at once. */
        if (!reservations_start (b->rsv, id, req, false))
            rc = reply_job (b, req, id, 200, p) < 0 ? -1 : 1;
    } else
        http_reply (req, 200, job_view (b, old, http_caller (req)));
    store_job_free (old);
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

int jobs_run (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const char *id = http_job (req);
    struct run_request rr;
    char why[300];
    struct fmb_error e;
    /* A node prolog's RUN (Slurm's run=node), only where the site said so:
     * every holder of the agent token could then create jobs. */
    if (!(http_caller (req)->roles & ROLE_RM) && !b->cfg.api_agent_run)
        return http_problemf (
            p, 403, "an agent token may RUN a job only with [api] agent_run = true");
    if (jobs_parse_run (&b->cfg, http_body (req), &rr, why, sizeof (why)) < 0)
        return http_problemf (p, 400, "%s", why);
    /* A node speaks only for itself: it may RUN only a job whose node
     * list names it (never one given only a node count). */
    const struct caller *c = http_caller (req);
    if (c->node[0] && !(c->roles & (ROLE_RM | ROLE_ADMIN)) &&
        !run_names_node (&rr, c->node))
        return node_refused (req, p, "may RUN only a job whose node list names it");
    char *canon = canonical_request (&rr);
    if (!canon)
        return http_problemf (p, 500, "out of memory");
    int rc = run_existing (b, req, canon, p);
    if (rc != 0) {
        free (canon);
        return rc < 0 ? -1 : 0;
    }
    char reason[256], fm_job_id[STORE_FM_JOB_ID_MAX + 1];
    broker_fm_id (b, id, fm_job_id, sizeof (fm_job_id));
    enum store_hwcoll_state hw =
        eligibility (b, &rr, fm_job_id, reason, sizeof (reason));
    char *nodes = rr.nodes ? fmb_json_dump (rr.nodes) : NULL;
    struct store_job j = {
        .uid = (uint32_t)rr.uid,
        .user = (char *)rr.user,
        .nodes = nodes,
        .node_count = (unsigned)rr.node_count,
        .ncores = (unsigned)rr.ncores,
        .request = canon,
        .state = STORE_JOB_ACTIVE,
        .hwcoll = hw,
        .hwcoll_reason = reason[0] ? reason : NULL,
        .mcast_limit =
            hw == STORE_HWCOLL_RESERVING ? fmb_config_mcast_limit (&b->cfg) : 0,
        .tcs = rr.tcs,
    };
    snprintf (j.id, sizeof (j.id), "%s", id);
    snprintf (j.fm_job_id, sizeof (j.fm_job_id), "%s", fm_job_id);
    rc = run_write_intent (b, &j, (unsigned)rr.vni_count, &e);
    if (rc == 0 && hw != STORE_HWCOLL_RESERVING) /* the job as just written */
        http_reply (req, 201, job_view (b, &j, http_caller (req)));
    free (nodes);
    free (canon);
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
        return reply_job (b, req, id, 201, p);
    return 0;
}

/* ---- CLEANUP ------------------------------------------------------- */

/* Could the FM hold a reservation for this job?  Also when "unavailable"
 * (a POST we gave up on may still have succeeded) and "lost" (deleting
 * what is not there costs a 404 and nothing else). */
static bool needs_fm_release (const struct store_job *j)
{
    return j->hwcoll == STORE_HWCOLL_RESERVING || j->hwcoll == STORE_HWCOLL_RESERVED ||
           j->hwcoll == STORE_HWCOLL_UNAVAILABLE || j->hwcoll == STORE_HWCOLL_LOST;
}

static json_t *vni_array (const struct store_job *j)
{
    json_t *a = json_array ();
    for (unsigned i = 0; i < j->nvnis; i++)
        json_array_append_new (a, json_integer (j->vnis[i]));
    return a;
}

/* The job's VNIs go back to the pool now ('why' for the event). */
static int free_vnis (struct broker *b,
                      const struct store_job *j,
                      const char *why,
                      struct fmb_error *e)
{
    if (store_vni_free_job (b->st, j->id, e) < 0 ||
        broker_event (b,
                      "vni_released",
                      j->id,
                      json_pack ("{s:o, s:s}", "vnis", vni_array (j), "why", why),
                      e) < 0)
        return -1;
    return 0;
}

/* CLEANUP of an active or lost job: -> releasing while the FM may hold a
 * reservation ('fm': the outbox deletes it, then jobs_released), else
 * straight to released.  Its VNIs are freed if every node already said
 * its CXI services are gone, otherwise quarantined: until the nodes
 * report, or for [vni] quarantine_s when no node ever reported. */
static int job_release (struct broker *b,
                        const struct store_job *j,
                        bool fm,
                        struct fmb_error *e)
{
    const char *id = j->id;
    bool nodes, waiting;
    if (store_job_set_state (
            b->st, id, fm ? STORE_JOB_RELEASING : STORE_JOB_RELEASED, e) < 0 ||
        store_node_waiting (b->st, id, &nodes, &waiting, e) < 0)
        return -1;
    if (!fm && jobs_hwcoll_held (j->hwcoll) &&
        store_job_set_hwcoll (b->st, id, STORE_HWCOLL_RELEASED, NULL, 0, NULL, e) < 0)
        return -1;
    if (j->nvnis && nodes && !waiting && j->node_list) {
        if (free_vnis (b, j, "all nodes reported", e) < 0)
            return -1;
    } else if (j->nvnis) {
        /* A job RUN with only node_count: no report can say all its nodes
         * are done (any node may report for it), so its VNIs stay out for
         * quarantine_s whatever is reported. */
        int64_t until = nodes && j->node_list
                            ? 0
                            : now_wall () + (int64_t)b->cfg.vni_quarantine_s * 1000;
        if (store_vni_quarantine (b->st, id, until, e) < 0 ||
            broker_event (
                b,
                "vni_quarantined",
                id,
                json_pack (
                    "{s:o, s:I}", "vnis", vni_array (j), "until_ms", (json_int_t)until),
                e) < 0)
            return -1;
    }
    if (fm && outbox_queue_job_delete (b->outbox, j->fm_job_id, now_wall (), e) < 0)
        return -1;
    return 0;
}

int jobs_cleanup (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const char *id = http_job (req);
    bool force;
    struct store_job *j;
    struct fmb_error e;
    if (http_query_bool (req, "force", &force) < 0)
        return http_problemf (p, 400, "force: 1, true, 0 or false");
    if (force && !(http_caller (req)->roles & ROLE_ADMIN))
        return http_problemf (p, 403, "force=1 is for admins");
    if (store_job_get_brief (b->st, id, &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    bool live = j->state == STORE_JOB_ACTIVE || j->state == STORE_JOB_LOST;
    bool fm = b->fmc && needs_fm_release (j);
    if (store_begin (b->st, &e) < 0)
        goto fail;
    if (live && job_release (b, j, fm, &e) < 0)
        goto rollback;
    if (force && j->nvnis) {
        if (free_vnis (b, j, "forced by an admin", &e) < 0)
            goto rollback;
        fmb_logf (LOG_NOTICE,
                  &(struct fmb_log_fields){.job = id},
                  "job %s: VNIs released by force (uid %u)",
                  id,
                  (unsigned)http_caller (req)->uid);
    }
    if (store_commit (b->st, &e) < 0)
        goto fail;
    store_job_free (j);
    if (live && fm)
        outbox_changed (b->outbox);
    return reply_job (b, req, id, 202, p);
rollback:
    store_rollback (b->st);
fail:
    store_job_free (j);
    return http_problem_errno (p, "job '%s': %s", id, e.text);
}

/* ---- transitions the FM work observes ------------------------------ */

/* Job state transitions observed by the FM work (jobs_start hands them
 * to the outbox and reconciliation), each inside the caller's pass.
 * jobs_released: the FM no longer holds the job's reservation (its
 * delete ended 200 or 404): releasing -> released, and a held reservation
 * -> released.  jobs_lost: a listing taken at 'listed_at' (wall ms) lacks
 * the reservation of a job that is still active with it, recorded
 * before: -> lost, with an event (returns 1).  A job that is gone or has
 * moved on is left as it is (0). */
static int jobs_released (struct broker *b, const char *job, struct fmb_error *e)
{
    struct store_job *j;
    if (store_job_get_brief (b->st, job, &j, e) < 0)
        return errno == ENOENT ? 0 : -1; /* unreadable: the caller's write
                                          * fails and its FM call is retried */
    int rc = 0;
    if (j->state == STORE_JOB_RELEASING)
        rc = store_job_set_state (b->st, job, STORE_JOB_RELEASED, e);
    /* Only a reservation becomes 'released': 'unavailable', 'lost' and
     * 'not_eligible' keep their reason in the job's history. */
    if (rc == 0 && j->state != STORE_JOB_ACTIVE && j->state != STORE_JOB_LOST &&
        jobs_hwcoll_held (j->hwcoll))
        rc = store_job_set_hwcoll (
            b->st, job, STORE_HWCOLL_RELEASED, NULL, j->mcast_limit, NULL, e);
    store_job_free (j);
    return rc;
}

static int jobs_lost (struct broker *b,
                      const char *job,
                      int64_t listed_at,
                      struct fmb_error *e)
{
    struct store_job *j;
    if (store_job_get_brief (b->st, job, &j, e) < 0)
        return errno == ENOENT ? 0 : -1;
    bool still = j->state == STORE_JOB_ACTIVE && j->hwcoll == STORE_HWCOLL_RESERVED &&
                 j->updated_ms < listed_at;
    store_job_free (j);
    if (!still)
        return 0;
    static const char why[] = "the fabric manager no longer holds the reservation";
    fmb_logf (LOG_ERR,
              &(struct fmb_log_fields){.job = job},
              "job %s: the fabric manager lost its multicast reservation",
              job);
    if (store_job_set_state (b->st, job, STORE_JOB_LOST, e) < 0 ||
        store_job_set_hwcoll (b->st, job, STORE_HWCOLL_LOST, why, 0, NULL, e) < 0 ||
        broker_event (
            b, "reservation_lost", job, json_pack ("{s:s}", "reason", why), e) < 0)
        return -1;
    return 1;
}

/* ---- reading jobs -------------------------------------------------- */

/* GET of one job, whole (node NULL) or as the agent of 'node' needs it:
 * without the list of nodes and the other nodes' reports.  Each node's
 * prolog asks: for a 10,000-node job the whole job was 760 KB and 21 ms
 * of the loop per GET, 210 s for one job's prologs. */
static int get_job (struct broker *b,
                    struct http_req *req,
                    const char *node,
                    struct http_problem *p)
{
    const struct caller *c = http_caller (req);
    struct store_job *j;
    struct fmb_error e;
    /* the node view needs neither the node list nor the request */
    int got = node ? store_job_get_brief (b->st, http_job (req), &j, &e)
                   : store_job_get (b->st, http_job (req), &j, &e);
    if (got < 0)
        return http_problem_errno (p, "%s", e.text);
    /* The same answer as for a job that does not exist, word for word:
     * a plain user learns nothing about other users' job ids. */
    int rc = 0;
    if (!(c->roles & (ROLE_RM | ROLE_ADMIN | ROLE_AGENT)) && !c->job_token_ok &&
        !(c->local && c->uid == j->uid))
        rc = http_problemf (p, 404, "job '%s' not found", j->id);
    else if (c->node[0] && !(c->roles & (ROLE_RM | ROLE_ADMIN)) && !c->job_token_ok &&
             ((node && strcmp (node, c->node) != 0) ||
              (j->node_list && !node_member (b, c, j))))
        rc = node_refused (req,
                           p,
                           node && strcmp (node, c->node) ? "may read only its own "
                                                            "node's report"
                                                          : "does not run this job");
    else if (!node) {
        json_t *view = job_view (b, j, c);
        add_node_reports (b, j, view);
        http_reply (req, 200, view);
    } else {
        json_t *view = job_view_without_nodes (b, j, c);
        json_t *a = json_array ();
        if (store_node_list (b->st, j->id, node, node_report, a, &e) < 0) {
            broker_log_store_error (b, "node report", &e);
            json_decref (a); /* left out, as in the whole job's view */
        } else
            json_object_set_new (view, "node_reports", a);
        http_reply (req, 200, view);
    }
    store_job_free (j);
    return rc;
}

int jobs_get (struct broker *b, struct http_req *req, struct http_problem *p)
{
    return get_job (b, req, NULL, p);
}

int jobs_node_get (struct broker *b, struct http_req *req, struct http_problem *p)
{
    return get_job (b, req, http_node (req), p);
}

struct list_ctx {
    struct broker *b;
    const struct caller *c;
    json_t *jobs;
};

static int list_one (const struct store_job *j, void *arg)
{
    struct list_ctx *lc = arg;
    json_array_append_new (lc->jobs, job_view (lc->b, j, lc->c));
    return 0;
}

/* Stored jobs a page reads at most.  A filter that the listing's index
 * does not hold ('since'; a user within a state, a state within a user)
 * is tested job by job: with a million released jobs and none updated
 * since the given time, one page read them all and held the loop
 * 0.34-0.39 s (benchmark 5's store), ten times that at ten million.  A
 * page now stops after this many and gives the cursor on (fewer jobs
 * than 'limit', maybe none, with next_after): 8-15 ms of loop on that
 * store, and a client that follows next_after sees every match. */
#define LIST_SCAN_MAX 10000

int jobs_list (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const struct caller *c = http_caller (req);
    struct store_job_filter f = {.state = -1, .uid = -1, .limit = 100};
    const char *v;
    char after[JOB_ID_MAX + 1];
    struct fmb_error e;
    if ((v = http_query (req, "state")) && (f.state = store_job_state_parse (v)) < 0)
        return http_problemf (
            p, 400, "state: one of active, releasing, released, lost");
    if ((v = http_query (req, "user"))) {
        char *end;
        unsigned long uid = strtoul (v, &end, 10);
        uid_t named = 0;
        if (!*v)
            return http_problemf (p, 400, "user: a user name or uid");
        if (*end && !nss_uid_of (v, &named, now_mono ()))
            return http_problemf (p, 400, "user: no such user '%.64s'", v);
        f.uid = *end ? (int64_t)named : (int64_t)uid;
    }
    uint64_t since = 0;
    if (http_query_number (req, "since", 0, INT64_MAX, &since) < 0)
        return http_problemf (p, 400, "since: milliseconds since the epoch");
    f.since_ms = (int64_t)since;
    uint64_t limit = f.limit;
    if (http_query_number (req, "limit", 1, 1000, &limit) < 0)
        return http_problemf (p, 400, "limit: 1..1000");
    f.limit = (unsigned)limit;
    if ((v = http_query (req, "after"))) {
        if (!valid_job_id (v))
            return http_problemf (p, 400, "after: a job id");
        snprintf (after, sizeof (after), "%s", v);
        f.after = after;
    }
    /* Someone who is neither rm, admin nor agent sees their own jobs only. */
    if (!(c->roles & (ROLE_RM | ROLE_ADMIN | ROLE_AGENT))) {
        if (f.uid >= 0 && f.uid != (int64_t)c->uid)
            return http_problemf (p, 403, "you may list only your own jobs");
        f.uid = c->uid;
    }
    char next[STORE_JOB_ID_MAX + 1];
    f.scan_max = LIST_SCAN_MAX;
    f.next_after = next;
    struct list_ctx lc = {b, c, json_array ()};
    if (store_job_list (b->st, &f, list_one, &lc, &e) < 0) {
        json_decref (lc.jobs);
        return http_problemf (p, 503, "%s", e.text);
    }
    json_t *o = json_pack ("{s:o}", "jobs", lc.jobs);
    if (next[0])
        json_object_set_new (o, "next_after", json_string (next));
    http_reply (req, 200, o);
    return 0;
}

/* ---- steps --------------------------------------------------------- */

static json_t *step_view (const char *job,
                          const char *step,
                          const char *state,
                          const char *detail)
{
    json_t *o = json_pack ("{s:s, s:s, s:s}", "job", job, "step", step, "state", state);
    if (detail)
        json_object_set_new (o, "detail", json_string (detail));
    return o;
}

/* A node's credential cleans steps only of jobs that run on it: checked
 * before the job's bucket, so that no node can empty another job's. */
static int step_node_check (struct broker *b,
                            struct http_req *req,
                            struct http_problem *p)
{
    const struct caller *c = http_caller (req);
    struct store_job *j;
    struct fmb_error e;
    if (!c->node[0] || (c->roles & (ROLE_RM | ROLE_ADMIN)) || c->job_token_ok)
        return 0;
    if (store_job_get_brief (b->st, http_job (req), &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    bool member = node_member (b, c, j);
    store_job_free (j);
    if (!member)
        return node_refused (req,
                             p,
                             "may clean steps only of jobs that run on it (a job RUN "
                             "with node_count has no node list)");
    return 0;
}

/* Token holders and nodes share a bucket per job, so one job cannot turn
 * a burst of steps into as many FM calls (rm and admin callers are
 * trusted not to). */
static int step_rate_check (struct broker *b,
                            struct http_req *req,
                            struct http_problem *p)
{
    const char *id = http_job (req);
    if ((http_caller (req)->roles & (ROLE_RM | ROLE_ADMIN)) || !b->step_limit)
        return 0;
    int64_t ms = ratelimit_take (b->step_limit, id, now_mono ());
    if (ms <= 0)
        return 0;
    http_retry_after (req, (unsigned)((ms + 999) / 1000));
    return http_problemf (p,
                          429,
                          "job '%s': more than %u step cleanups per second "
                          "([api] step_cleanup_rate); retry later",
                          id,
                          b->cfg.api_step_cleanup_rate);
}

int jobs_step_cleanup (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const char *id = http_job (req);
    size_t step_len;
    const char *step = http_step (req, &step_len);
    uint64_t wait = 0;
    struct store_job *j;
    struct fmb_error e;
    if (http_query_number (req, "wait", 0, STEP_WAIT_MAX_S, &wait) < 0)
        return http_problemf (p, 400, "wait: seconds, 0..%d", STEP_WAIT_MAX_S);
    if (step_node_check (b, req, p) < 0 || step_rate_check (b, req, p) < 0)
        return -1;
    if (store_job_get_brief (b->st, id, &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    if (!b->fmc || j->hwcoll != STORE_HWCOLL_RESERVED ||
        j->state == STORE_JOB_RELEASED) {
        http_reply (
            req,
            200,
            step_view (id, step, "cleaned", "the job holds no multicast reservation"));
        store_job_free (j);
        return 0;
    }
    int64_t oid = 0;
    int rc = store_begin (b->st, &e);
    if (rc == 0 &&
        (store_step_put (b->st, id, step, STORE_STEP_CLEANING, NULL, &e) < 0 ||
         outbox_queue_step_delete (b->outbox, j->fm_job_id, step, &oid, &e) < 0)) {
        store_rollback (b->st);
        rc = -1;
    }
    if (rc == 0)
        rc = store_commit (b->st, &e);
    store_job_free (j);
    if (rc < 0)
        return http_problem_errno (p, "job '%s': %s", id, e.text);
    if (wait == 0) {
        outbox_changed (b->outbox);
        http_reply (req, 202, step_view (id, step, "cleaning", NULL));
        return 0;
    }
    outbox_steps_wait (b->outbox, req, oid, (unsigned)wait);
    outbox_changed (b->outbox);
    return 0;
}

/* ---- node reports -------------------------------------------------- */

/* A node report's body: {"cxi": created|destroyed|failed, "detail"?}. */
static int parse_node_report (json_t *body,
                              enum store_cxi_state *state,
                              const char **detail,
                              struct http_problem *p)
{
    json_t *cxi = json_object_get (body, "cxi");
    json_t *d = json_object_get (body, "detail");
    const char *key;
    json_t *v;
    json_object_foreach (body, key, v)
    {
        if (strcmp (key, "cxi") && strcmp (key, "detail"))
            return http_problemf (p, 400, "unknown field '%.64s'", key);
    }
    static const enum store_cxi_state reported[] = {
        STORE_CXI_CREATED, STORE_CXI_DESTROYED, STORE_CXI_FAILED};
    size_t i;
    for (i = 0; i < sizeof (reported) / sizeof (reported[0]); i++)
        if (json_is_string (cxi) &&
            strcmp (json_string_value (cxi), store_cxi_state_name (reported[i])) == 0)
            break;
    if (i == sizeof (reported) / sizeof (reported[0]))
        return http_problemf (p, 400, "cxi: one of created, destroyed, failed");
    if (d && (!json_is_string (d) || json_string_length (d) > 512))
        return http_problemf (p, 400, "detail: a string of at most 512 bytes");
    *state = reported[i];
    *detail = d ? json_string_value (d) : NULL;
    return 0;
}

static int node_cxi_of (const struct store_node *n, void *arg)
{
    *(enum store_cxi_state *)arg = n->cxi;
    return 0;
}

/* Record what a node's agent reports.  A failure to destroy the job's CXI
 * services (after CLEANUP, or once the node had reported them made or
 * failed) asks for the node to be drained: they hold the job's VNIs
 * there.  A failure to make them (the prolog's: a live job's first
 * report from the node) is the job's, told to its user and logged; the
 * node is not drained for it (doc/slurm.md's promise to Slurm sites).
 * Once the job is over and every node has reported its services
 * destroyed, the quarantined VNIs go back to the pool. */
static int record_node_report (struct broker *b,
                               const struct store_job *j,
                               const char *node,
                               enum store_cxi_state state,
                               const char *detail,
                               struct fmb_error *e)
{
    const char *id = j->id;
    bool nodes, waiting;
    enum store_cxi_state before = STORE_CXI_PENDING;
    if (state == STORE_CXI_FAILED &&
        store_node_list (b->st, id, node, node_cxi_of, &before, e) < 0)
        return -1;
    if (store_node_put (b->st, id, node, state, detail, e) < 0)
        return -1;
    bool setting_up = j->state == STORE_JOB_ACTIVE && before == STORE_CXI_PENDING;
    if (state == STORE_CXI_FAILED) {
        fmb_logf (LOG_WARNING,
                  &(struct fmb_log_fields){.job = id, .node = node},
                  "job %s: node %s failed to %s its CXI services: %s",
                  id,
                  node,
                  setting_up ? "set up" : "destroy",
                  detail ? detail : "(no detail)");
    }
    if (state == STORE_CXI_FAILED && !setting_up) {
        json_t *d = json_pack ("{s:s}", "node", node);
        if (detail)
            json_object_set_new (d, "detail", json_string (detail));
        if (broker_event (b, "node_drain_requested", id, d, e) < 0)
            return -1;
    }
    if (j->state == STORE_JOB_ACTIVE || j->state == STORE_JOB_LOST || !j->nvnis ||
        !j->node_list) /* a node_count job's: quarantine_s (job_release) */
        return 0;
    if (store_node_waiting (b->st, id, &nodes, &waiting, e) < 0)
        return -1;
    if (nodes && !waiting)
        return free_vnis (b, j, "all nodes reported", e);
    return 0;
}

int jobs_node_report (struct broker *b, struct http_req *req, struct http_problem *p)
{
    const char *id = http_job (req);
    const char *node = http_node (req);
    enum store_cxi_state state = STORE_CXI_PENDING;
    const char *detail = NULL;
    struct store_job *j;
    struct fmb_error e;
    const struct caller *c = http_caller (req);
    bool as_node = c->node[0] && !(c->roles & (ROLE_RM | ROLE_ADMIN));
    if (parse_node_report (http_body (req), &state, &detail, p) < 0)
        return -1;
    if (as_node && strcmp (node, c->node) != 0)
        return node_refused (
            req, p, "may report only for itself, not for node %s", node);
    if (store_job_get_brief (b->st, id, &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    if (as_node && j->node_list && !node_member (b, c, j)) {
        store_job_free (j);
        return node_refused (req, p, "is not one of the job's nodes");
    }
    if (store_begin (b->st, &e) < 0)
        goto fail;
    if (record_node_report (b, j, node, state, detail, &e) < 0) {
        store_rollback (b->st);
        goto fail;
    }
    if (store_commit (b->st, &e) < 0)
        goto fail;
    http_reply (req,
                200,
                json_pack ("{s:s, s:s, s:s}",
                           "job",
                           id,
                           "node",
                           node,
                           "cxi",
                           store_cxi_state_name (state)));
    store_job_free (j);
    return 0;
fail:
    store_job_free (j);
    return http_problem_errno (p, "job '%s': %s", id, e.text);
}

/* ---- VNIs ---------------------------------------------------------- */

static int list_vni (const struct store_vni *v, void *arg)
{
    json_t *o = json_pack ("{s:i, s:s, s:s}",
                           "vni",
                           (int)v->vni,
                           "job",
                           v->job_id,
                           "state",
                           v->quarantined ? "quarantined" : "held");
    if (v->quarantined)
        json_object_set_new (o, "until_ms", json_integer (v->until_ms));
    json_array_append_new (arg, o);
    return 0;
}

/* A page of the pool's VNIs: a whole pool in one answer was 3 MB and
 * held the loop 0.11-0.27 s at 64,512 held (every `fmbroker vni list`). */
#define VNI_PAGE_DEFAULT 1000
#define VNI_PAGE_MAX     1000

int jobs_vni_list (struct broker *b, struct http_req *req, struct http_problem *p)
{
    uint64_t after = 0, limit = VNI_PAGE_DEFAULT;
    struct fmb_error e;
    if (http_query_number (req, "after", 0, 65535, &after) < 0)
        return http_problemf (p, 400, "after: a VNI, 0..65535");
    if (http_query_number (req, "limit", 1, VNI_PAGE_MAX, &limit) < 0)
        return http_problemf (p, 400, "limit: 1..%d", VNI_PAGE_MAX);
    json_t *a = json_array ();
    if (store_vni_list (b->st, (unsigned)after, (unsigned)limit, list_vni, a, &e) < 0) {
        json_decref (a);
        return http_problemf (p, 503, "%s", e.text);
    }
    /* After the listing (no query inside another): per quarantined VNI,
     * the nodes it waits for, one query per job. */
    json_t *per_job = json_object (), *v;
    size_t i;
    json_array_foreach (a, i, v)
    {
        const char *job = json_string_value (json_object_get (v, "job"));
        if (strcmp (json_string_value (json_object_get (v, "state")), "quarantined"))
            continue;
        json_t *w = json_object_get (per_job, job);
        if (!w && (w = waiting_for (b, job)))
            json_object_set_new (per_job, job, w);
        if (w)
            json_object_set (v, "waiting_for", w);
    }
    json_decref (per_job);
    /* a full page: there may be more (the next page may be empty) */
    json_t *last = json_array_size (a) == limit ? json_array_get (a, limit - 1) : NULL;
    json_t *o = json_pack ("{s:o, s:i, s:i}",
                           "vnis",
                           a,
                           "pool_min",
                           (int)b->cfg.vni_min,
                           "pool_max",
                           (int)b->cfg.vni_max);
    if (last)
        json_object_set (o, "next_after", json_object_get (last, "vni"));
    http_reply (req, 200, o);
    return 0;
}

/* Rows per table per statement: a slice stops at the first statement
 * that ends after BACKGROUND_SLICE_US, so this bounds how far past it a
 * slice can go.  A released job takes its nodes and steps with it (7
 * nodes on average, 256 for a large job): at 64, slices of benchmark 5's
 * store of realistic jobs ran to 8-18 ms (76 over 8 ms in one run); at 8,
 * 3 did, none over 13 ms, and the prune of 250,000 jobs took 84-88 s
 * instead of 71. */
#define PRUNE_ROWS        8
#define PRUNE_INTERVAL_MS (3600 * 1000) /* between rounds */
#define PRUNE_FIRST_MS    (10 * 1000)   /* after start: reconcile first */
/* Between slices of a backlog: history can wait.  A slice in 22 ms
 * (~10,000 jobs a second here with the old benchmark's bare jobs, ~3,000
 * with realistic ones) keeps the disk traffic of deleting a quarter of
 * 1,000,000 jobs from slowing RUNs' commits: their p99 went from 15-37
 * ms to about 7 ms against 3-6 ms idle (bench 5, bare jobs). */
#define PRUNE_PAUSE_MS 20
#define DAY_MS         (86400LL * 1000)

/* One slice of retention (a timer, first PRUNE_FIRST_MS after start):
 * batches of PRUNE_ROWS until the backlog is gone or the slice's time is
 * up; the rest waits for the next slice.  Returns when to come back. */
static int64_t prune_history (void *arg, int64_t mono)
{
    struct broker *b = arg;
    unsigned jobs = 0, events = 0, nj, ne;
    struct fmb_error e;
    if (b->cfg.retain_days == 0)
        return PRUNE_INTERVAL_MS;
    if (pass_defer_background (b->pass, &b->prune_waits_since, mono))
        return 1;
    int64_t before = now_wall () - (int64_t)b->cfg.retain_days * DAY_MS;
    int64_t end = fmb_monotime_us () + BACKGROUND_SLICE_US;
    bool more;
    do {
        if (store_prune (b->st, before, before, PRUNE_ROWS, &nj, &ne, &e) < 0) {
            broker_log_store_error (b, "retention", &e);
            return PRUNE_INTERVAL_MS;
        }
        jobs += nj;
        events += ne;
        more = nj == PRUNE_ROWS || ne == PRUNE_ROWS; /* a full batch: more due */
    } while (more && fmb_monotime_us () < end);
    metrics_add (b->metrics, METRIC_PRUNED_JOBS, jobs);
    metrics_add (b->metrics, METRIC_PRUNED_EVENTS, events);
    if (jobs || events)
        metrics_add (b->metrics, METRIC_PRUNE_SLICES, 1);
    b->prune_round[0] += jobs;
    b->prune_round[1] += events;
    if (more)
        return PRUNE_PAUSE_MS;
    if (b->prune_round[0] || b->prune_round[1])
        fmb_log (LOG_INFO,
                 "retention: deleted %lu released jobs and %lu events older than %u "
                 "days",
                 b->prune_round[0],
                 b->prune_round[1],
                 b->cfg.retain_days);
    b->prune_round[0] = b->prune_round[1] = 0;
    return PRUNE_INTERVAL_MS;
}

void jobs_expire_quarantine (struct broker *b)
{
    unsigned freed = 0;
    struct fmb_error e;
    if (store_vni_expire (b->st, now_wall (), &freed, &e) < 0)
        broker_log_store_error (b, "quarantine expiry", &e);
    else if (freed)
        fmb_log (
            LOG_INFO, "%u VNIs left quarantine ([vni] quarantine_s passed)", freed);
}

static int64_t expire_quarantine (void *arg, int64_t mono)
{
    (void)mono;
    jobs_expire_quarantine (arg);
    return 1000;
}

/* RUNs waiting on their FM calls: background slices let them finish
 * first (the FM's answer would wait for the slice and its commit).  A
 * RUN every 20 ms during retention of 250,000 jobs: p99 6.5-9.8 ms with
 * this, 8.7-12.1 without (bench 5 at 1M, 4 and 5 runs).  (Aborted
 * reservations whose call is still out count too, for 25 ms at most.) */
static bool runs_in_flight (void *arg)
{
    return reservations_pending (arg);
}

void jobs_start (struct broker *b)
{
    /* The outbox and reconciliation see a reservation's delete finish and
     * a reservation lost; the transitions are here. */
    static const struct outbox_hooks outbox_hooks = {
        .reserving = jobs_reserving,
        .job_deleted = jobs_released,
    };
    static const struct reconcile_hooks reconcile_hooks = {
        .reserving = jobs_reserving,
        .lost = jobs_lost,
    };
    /* and the reservations in flight record and answer through these */
    static const struct reservations_ops reservations_ops = {record_outcome, reply_job};
    reservations_set_ops (b->rsv, &reservations_ops);
    pass_set_foreground (b->pass, runs_in_flight, b->rsv);
    outbox_set_hooks (b->outbox, &outbox_hooks);
    reconcile_set_hooks (b->rc, &reconcile_hooks);
    b->t_expire = timer_add (b->timers, "quarantine expiry", 0, expire_quarantine, b);
    b->t_prune = timer_add (b->timers, "retention", PRUNE_FIRST_MS, prune_history, b);
}

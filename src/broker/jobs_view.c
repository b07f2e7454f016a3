/* jobs_view.c: what the jobs look like from outside (jobs_view.h): who
 * may see what (a node's own credential), the job views and their env,
 * GET of one job or a node's part of it, listings, the pool's VNIs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "httpreq.h"
#include "reservations.h"
#include "store.h"
#include "jsonutil.h"
#include "jobs_view.h"
#include "log.h"
#include "nsscache.h"

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
bool jobs_node_only (const struct caller *c)
{
    return c->node[0] && !(c->roles & (ROLE_RM | ROLE_ADMIN));
}

bool jobs_node_member (struct broker *b,
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
int jobs_node_refused (struct http_req *req,
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
           ((c->roles & ROLE_AGENT) && jobs_node_member (b, c, j)) || c->job_token_ok ||
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

/* A node sees the job without the list of every node: its answers stay
 * O(1) for a 10,000-node job (node_count says how many). */
json_t *jobs_view (struct broker *b, const struct store_job *j, const struct caller *c)
{
    json_t *o = job_view_without_nodes (b, j, c);
    if (j->nodes && !jobs_node_only (c))
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
int jobs_reply (struct broker *b,
                struct http_req *req,
                const char *id,
                int status,
                struct http_problem *p)
{
    struct store_job *j;
    struct fmb_error e;
    int got = jobs_node_only (http_caller (req))
                  ? store_job_get_brief (b->st, id, &j, &e)
                  : store_job_get (b->st, id, &j, &e);
    if (got < 0)
        return http_problem_errno (p, "%s", e.text);
    bool unrecorded = j->state == STORE_JOB_ACTIVE &&
                      j->hwcoll == STORE_HWCOLL_RESERVING &&
                      !reservations_busy (b->rsv, id);
    if (!unrecorded)
        http_reply (req, status, jobs_view (b, j, http_caller (req)));
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

/* ---- reading jobs -------------------------------------------------- */

/* GET of one job, whole (node NULL; a node caller's own node then) or as
 * the agent of 'node' needs it: without the list of nodes and the other
 * nodes' reports.  Each node's
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
    /* A node's own credential reads its own node's view even when it
     * asks for the whole job: the whole job's reports grow with its
     * nodes (1.9 ms of the loop at 1,000), which one node could ask for
     * in a loop, and the other nodes' reports are not a node's to read. */
    if (!node && jobs_node_only (c) && !c->job_token_ok)
        node = c->node;
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
              (j->node_list && !jobs_node_member (b, c, j))))
        rc = jobs_node_refused (req,
                                p,
                                node && strcmp (node, c->node)
                                    ? "may read only its own "
                                      "node's report"
                                    : "does not run this job");
    else if (!node) {
        json_t *view = jobs_view (b, j, c);
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
    json_array_append_new (lc->jobs, jobs_view (lc->b, j, lc->c));
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
    /* A node's credential lists the jobs whose node list has it, as it
     * may read only those one by one (issue 51: a listing showed every
     * job's uid, user, nodes and VNIs). */
    if (jobs_node_only (c))
        f.node = c->node;
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

/* jobs_cleanup.c: CLEANUP, steps and node reports (jobs_cleanup.h), and
 * the transitions the FM work observes.
 *
 * CLEANUP DELETE /v1/jobs/{job}: one transaction moves the job to
 *        releasing, quarantines its VNIs and queues the FM delete; the
 *        answer is 202 at once and the outbox does the rest.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "httpreq.h"
#include "outbox.h"
#include "store.h"
#include "jsonutil.h"
#include "jobs_cleanup.h"
#include "jobs_view.h"
#include "log.h"
#include "ratelimit.h"

struct cleanups {
    struct ratelimit *step_limit; /* step cleanups per job ([api] step_cleanup_*) */
};

/* Does hwcoll state 's' stand for a reservation (made or being made),
 * which CLEANUP turns into 'released'?  The other states keep their
 * reason in the job's history. */
struct cleanups *cleanups_create (unsigned rate, unsigned burst)
{
    struct cleanups *c = calloc (1, sizeof (*c));
    if (!c)
        return NULL;
    /* 4096 buckets: more jobs cleaning steps at once than that recycle
     * the idlest bucket, which was full again anyway */
    if (!(c->step_limit = ratelimit_create (rate, burst, 4096))) {
        free (c);
        return NULL;
    }
    return c;
}

void cleanups_destroy (struct cleanups *c)
{
    if (!c)
        return;
    ratelimit_destroy (c->step_limit);
    free (c);
}

static bool jobs_hwcoll_held (enum store_hwcoll_state s)
{
    return s == STORE_HWCOLL_RESERVED || s == STORE_HWCOLL_RESERVING;
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
    return jobs_reply (b, req, id, 202, p);
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
int jobs_released (struct broker *b, const char *job, struct fmb_error *e)
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

int jobs_lost (struct broker *b,
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
    bool member = jobs_node_member (b, c, j);
    store_job_free (j);
    if (!member)
        return jobs_node_refused (
            req,
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
    if ((http_caller (req)->roles & (ROLE_RM | ROLE_ADMIN)) || !b->cleanups)
        return 0;
    int64_t ms = ratelimit_take (b->cleanups->step_limit, id, now_mono ());
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
        return jobs_node_refused (
            req, p, "may report only for itself, not for node %s", node);
    if (store_job_get_brief (b->st, id, &j, &e) < 0)
        return http_problem_errno (p, "%s", e.text);
    if (as_node && j->node_list && !jobs_node_member (b, c, j)) {
        store_job_free (j);
        return jobs_node_refused (req, p, "is not one of the job's nodes");
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

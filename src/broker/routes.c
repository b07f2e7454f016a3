/* routes.c: the REST API's routes (api/openapi.yaml describes each one;
 * a test checks the two agree) and the handlers that need no job logic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "events.h"
#include "fmsession.h"
#include "httpreq.h"
#include "jobs.h"
#include "pass.h"
#include "reconcile.h"
#include "store.h"
#include "routes.h"
#include "status.h"

static int status_cb (struct broker *b, struct http_req *req, struct http_problem *p)
{
    (void)p;
    http_reply (req, 200, broker_status (b));
    return 0;
}

static int health_cb (struct broker *b, struct http_req *req, struct http_problem *p)
{
    /* Serving, and able to read the store: 200.  "degraded" (still 200:
     * RUN and CLEANUP answer) while changes cannot commit, a configured
     * FM is not up or the VNI pool has none left or too few for a job,
     * with the reasons.  The answer claims no change, so it does not
     * wait for the pass's commit (which may be what fails). */
    unsigned depth, held, quarantined;
    int64_t free_vnis;
    struct fmb_error e;
    /* A TCP caller without a credential (a load balancer's probe, or
     * anyone who reaches the port) learns ok or degraded and the FM
     * session's state only: the reasons name files, the FM's URL and
     * its errors (issue 51). */
    const struct caller *c = http_caller (req);
    bool stranger = !c->local && !c->roles && !c->node[0];
    http_no_hold (req);
    if (store_outbox_depth (b->st, &depth, &e) < 0 ||
        store_vni_counts (b->st, &held, &quarantined, &e) < 0 ||
        store_vni_left (
            b->st, b->cfg.vni_min, b->cfg.vni_max, held, quarantined, &free_vnis, &e) <
            0)
        return http_problemf (
            p, 503, "store: %s", stranger ? "cannot be read" : e.text);
    json_t *reasons = json_array ();
    const char *commit_error;
    if (pass_commits_failing (b->pass, &commit_error))
        json_array_append_new (
            reasons, json_sprintf ("store: changes do not commit: %s", commit_error));
    if (b->fmc && fmsession_state (b->fms) != FM_UP) {
        /* a refusing FM is down with that reason; how long it has been */
        int64_t since = 0;
        unsigned refused = fmsession_refusals (b->fms, &since);
        char count[96] = "";
        if (refused)
            snprintf (count,
                      sizeof (count),
                      " (%u call%s refused over %lld s)",
                      refused,
                      refused == 1 ? "" : "s",
                      (long long)((now_wall () - since) / 1000));
        json_array_append_new (reasons,
                               json_sprintf ("fabric manager %s%s%s%s",
                                             fm_state_name (fmsession_state (b->fms)),
                                             fmsession_error (b->fms)[0] ? ": " : "",
                                             fmsession_error (b->fms),
                                             count));
    }
    if (b->reload_error[0])
        json_array_append_new (reasons,
                               json_sprintf ("configuration reload failed: %s; the "
                                             "broker runs the configuration it had, "
                                             "and a restart would fail until this is "
                                             "fixed and reloaded",
                                             b->reload_error));
    /* a job takes [vni] per_job VNIs unless its RUN asks otherwise */
    if (free_vnis < (b->cfg.vni_per_job ? b->cfg.vni_per_job : 1))
        json_array_append_new (reasons,
                               json_sprintf ("VNI pool %u-%u: %lld free (%u held, %u "
                                             "in quarantine); RUNs that need VNIs fail",
                                             b->cfg.vni_min,
                                             b->cfg.vni_max,
                                             (long long)(free_vnis > 0 ? free_vnis : 0),
                                             held,
                                             quarantined));
    json_t *o = json_pack ("{s:s, s:s}",
                           "status",
                           json_array_size (reasons) ? "degraded" : "ok",
                           "fabric_manager",
                           fm_state_name (fmsession_state (b->fms)));
    if (json_array_size (reasons) && !stranger)
        json_object_set_new (o, "reasons", reasons);
    else
        json_decref (reasons);
    http_reply (req, 200, o);
    return 0;
}

static int metrics_cb (struct broker *b, struct http_req *req, struct http_problem *p)
{
    char *text = broker_metrics_text (b);
    if (!text)
        return http_problemf (p, 500, "out of memory");
    http_reply_text (req, 200, "text/plain; version=0.0.4", text);
    return 0;
}

static int events_cb (struct broker *b, struct http_req *req, struct http_problem *p)
{
    uint64_t after = 0, wait = 0, limit = 100;
    if (http_query_number (req, "after", 0, INT64_MAX, &after) < 0)
        return http_problemf (p, 400, "after: a sequence number >= 0");
    if (http_query_number (req, "wait", 0, EVENT_WAIT_MAX_S, &wait) < 0)
        return http_problemf (p, 400, "wait: seconds, 0..%d", EVENT_WAIT_MAX_S);
    if (http_query_number (req, "limit", 1, 1000, &limit) < 0)
        return http_problemf (p, 400, "limit: 1..1000");
    events_wait (b->events, req, (long long)after, (unsigned)limit, (unsigned)wait);
    return 0;
}

static int reconcile_cb (struct broker *b, struct http_req *req, struct http_problem *p)
{
    if (!b->fmc)
        return http_problemf (p, 409, "no fabric manager configured (VNI-only mode)");
    bool reap;
    if (http_query_bool (req, "reap_foreign", &reap) < 0)
        return http_problemf (p, 400, "reap_foreign: 1, true, 0 or false");
    reconcile_now (b->rc, reap);
    http_reply (req,
                202,
                json_pack ("{s:s, s:b}",
                           "fabric_manager",
                           fm_state_name (fmsession_state (b->fms)),
                           "reap_foreign",
                           reap || b->cfg.reap_foreign));
    return 0;
}

/* clang-format off */
const struct route broker_routes[] = {
    /* method   path                            who may call                               body  handler */
    { "PUT",    "/v1/jobs/{job}",               ROLE_RM | ROLE_AGENT,                      true,  jobs_run },
    { "DELETE", "/v1/jobs/{job}",               ROLE_RM | ROLE_ADMIN,                      false, jobs_cleanup },
    { "GET",    "/v1/jobs/{job}",               ROLE_RM | ROLE_ADMIN | ROLE_AGENT | ROLE_JOB | ROLE_USER, false, jobs_get },
    { "GET",    "/v1/jobs",                     ROLE_RM | ROLE_ADMIN | ROLE_AGENT | ROLE_USER, false, jobs_list },
    { "DELETE", "/v1/jobs/{job}/steps/{step}",  ROLE_RM | ROLE_ADMIN | ROLE_AGENT | ROLE_JOB, false, jobs_step_cleanup },
    { "PUT",    "/v1/jobs/{job}/nodes/{node}",  ROLE_RM | ROLE_ADMIN | ROLE_AGENT,         true,  jobs_node_report },
    { "GET",    "/v1/jobs/{job}/nodes/{node}",  ROLE_RM | ROLE_ADMIN | ROLE_AGENT | ROLE_JOB | ROLE_USER, false, jobs_node_get },
    { "GET",    "/v1/vnis",                     ROLE_RM | ROLE_ADMIN,                      false, jobs_vni_list },
    { "GET",    "/v1/events",                   ROLE_RM | ROLE_ADMIN,                      false, events_cb },
    { "POST",   "/v1/reconcile",                ROLE_ADMIN,                                false, reconcile_cb },
    { "GET",    "/v1/status",                   ROLE_RM | ROLE_ADMIN | ROLE_AGENT | ROLE_USER, false, status_cb },
    { "GET",    "/v1/health",                   ROLE_ANY,                                  false, health_cb },
    { "GET",    "/metrics",                     ROLE_ANY,                                  false, metrics_cb },
};
/* clang-format on */

const unsigned broker_nroutes = sizeof (broker_routes) / sizeof (broker_routes[0]);

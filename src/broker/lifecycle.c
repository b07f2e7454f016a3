/* lifecycle.c: the broker's contexts made and freed in order (lifecycle.h). */
#include <errno.h>

#include "broker.h"
#include "events.h"
#include "fmclient.h"
#include "fmsession.h"
#include "http.h"
#include "jobs.h"
#include "lifecycle.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "pass.h"
#include "reconcile.h"
#include "reservations.h"
#include "retention.h"
#include "roles.h"
#include "routes.h"
#include "runmemo.h"
#include "store.h"
#include "timer.h"

int broker_create_early (struct broker *b)
{
    if (!(b->timers = timers_create ()) || !(b->events = events_create (b->timers)) ||
        !(b->roles = roles_create ()) || !(b->metrics = metrics_create ())) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void broker_attach_store (struct broker *b)
{
    store_set_damage_hook (b->st, events_token_damaged, b->events);
    store_set_clock (b->st, broker_wall_clock, NULL);
}

/* The FM client's observer: every FM call that completed, heard by the
 * session and counted by call and result. */
static void observe_fm (const struct fmc_result *res, void *arg)
{
    struct broker *b = arg;
    if (b->fms)
        fmsession_heard (b->fms, res);
    metrics_fm_call (b->metrics, res);
}

/* Jobs whose nodes' RUNs are remembered at once (runmemo.h): as many
 * large jobs as start together, with room to spare. */
#define RUN_MEMO_SLOTS 1024

/* HTTP and the pass that commits what its requests write. */
static int create_api (struct broker *b, struct fmb_error *error)
{
    b->cleanups =
        cleanups_create (b->cfg.api_step_cleanup_rate, b->cfg.api_step_cleanup_burst);
    if (!b->cleanups || !(b->runmemo = runmemo_create (RUN_MEMO_SLOTS)))
        return fmb_errorf (error, "out of memory");
    struct http_deps deps = {.routes = broker_routes,
                             .nroutes = broker_nroutes,
                             .route_arg = b,
                             .roles = b->roles,
                             .metrics = b->metrics,
                             .job_token_ok = broker_job_token_matches,
                             .job_token_arg = b};
    if (http_create (&b->cfg, &deps, &b->http, error) < 0)
        return -1;
    if (!(b->pass = pass_create (b->st, b->http, b->fmc)))
        return fmb_errorf (error, "out of memory");
    events_attach (b->events, b->st, b->pass);
    return 0;
}

/* The FM work: the session, the outbox, reservations, reconciliation. */
static int create_fm_work (struct broker *b, struct fmb_error *error)
{
    if (!(b->fms = fmsession_create (b->timers, b->fmc, &b->cfg, b->events)) ||
        !(b->outbox = outbox_create (
              &b->cfg, b->st, b->fmc, b->pass, b->timers, b->fms, &b->stopping)) ||
        !(b->rsv = reservations_create (&b->cfg, b->st, b->fmc, b->pass, b->fms)) ||
        !(b->rc = reconcile_create (&b->cfg,
                                    b->st,
                                    b->fmc,
                                    b->pass,
                                    b->timers,
                                    b->fms,
                                    b->outbox,
                                    b->metrics,
                                    &b->stopping)))
        return fmb_errorf (error, "out of memory");
    return 0;
}

int broker_create_serving (struct broker *b, struct fmb_error *error)
{
    roles_resolve (b->roles, &b->cfg);
    if (fmc_create_from_config (&b->cfg, &b->fmc, error) < 0)
        return -1;
    if (b->fmc)
        fmc_set_observer (b->fmc, observe_fm, b);
    else
        fmb_log (
            LOG_NOTICE,
            "[fabric_manager] url is not set: VNI-only mode, no hardware collectives");
    if (create_api (b, error) < 0 || create_fm_work (b, error) < 0)
        return -1;
    jobs_start (b); /* before recovery: the reservations' outcomes */
    if (!(b->retention = retention_create (b)))
        return fmb_errorf (error, "out of memory");
    reservations_recover (b->rsv);
    reconcile_start (b->rc, b->rsv);
    return 0;
}

void broker_quiesce (struct broker *b)
{
    b->stopping = true;
    fmsession_stop (b->fms);
    http_quiesce (b->http);
}

void broker_destroy (struct broker *b)
{
    http_destroy (b->http);
    fmc_destroy (b->fmc);
    pass_destroy (b->pass);
    events_destroy (b->events);
    roles_destroy (b->roles);
    timers_destroy (b->timers);
    reservations_destroy (b->rsv);
    reconcile_destroy (b->rc);
    outbox_destroy (b->outbox);
    fmsession_destroy (b->fms);
    store_close (b->st);
    cleanups_destroy (b->cleanups);
    runmemo_destroy (b->runmemo);
    retention_destroy (b->retention);
    metrics_destroy (b->metrics);
}

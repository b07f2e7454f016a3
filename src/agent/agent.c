/* agent.c: the run's failure reason and its calls to the broker. */
#include "agent.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "apiclient.h"
#include "jobrecord.h"
#include "log.h"
#include "monotime.h"

#define BROKER_TIMEOUT_S 5 /* the broker answers from its own store */
/* A call the broker did not answer in time (a whole machine's nodes
 * calling at once), or answered 429 (apiretry.h's API_OUTCOME_BUSY), is
 * made again, up to this many tries, after 250 ms then doubling, each
 * wait drawn within +-50% so that the nodes that missed together do not
 * come back together.  A broker that refused the connection, or answered
 * 5xx (API_OUTCOME_AWAY: down or failing over, not busy) is not waited
 * for here: the target's URL list and the caller's own fallbacks are
 * for that.  Every call a node makes may come twice (a RUN, a GET, a
 * report, a step's end: the broker takes a repeat as the same). */
#define BROKER_TRIES      3
#define BROKER_BACKOFF_MS 250
/* ... all within this long of the first try: a broker that answers no
 * one (down, not busy) fails a job's setup after this, not 3 timeouts */
#define BROKER_RETRY_WINDOW_MS 12000
#define BROKER_TRY_MIN_S       2 /* a try with less time left is not made */

int agent_fail_job (struct agent *ag, const char *fmt, ...)
{
    va_list ap;
    if (!ag->final_reason[0]) {
        va_start (ap, fmt);
        vsnprintf (ag->final_reason, sizeof (ag->final_reason), fmt, ap);
        va_end (ap);
    }
    return EXIT_FAIL;
}

static void sleep_ms (int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* One call, made again while the broker is busy (BROKER_TRIES). */
static int call_with_retries (struct agent *ag,
                              const char *method,
                              const char *path,
                              const char *body,
                              struct api_reply *r,
                              struct fmb_error *error)
{
    static bool seeded; /* each node its own waits */
    if (!seeded) {
        srandom ((unsigned)(fmb_monotime_ms () ^ ((int64_t)getpid () << 16)));
        seeded = true;
    }
    int64_t backoff = BROKER_BACKOFF_MS, first = fmb_monotime_ms ();
    long timeout_s = BROKER_TIMEOUT_S;
    for (int tries = 1;; tries++, backoff *= 2) {
        int64_t t0 = fmb_monotime_ms ();
        int rc = api_client_call (
            &ag->target, ag->keep, timeout_s, method, path, body, NULL, r, error);
        int err = errno;
        ag->broker_outcome =
            api_outcome_of (rc, err, rc < 0 ? 0 : r->status, fmb_monotime_ms () - t0);
        bool busy = ag->broker_outcome == API_OUTCOME_BUSY;
        int64_t left = first + BROKER_RETRY_WINDOW_MS - fmb_monotime_ms () - backoff;
        if (!busy || tries == BROKER_TRIES || !ag->target.url || ag->single_try ||
            left < BROKER_TRY_MIN_S * 1000) {
            errno = err;
            return rc;
        }
        timeout_s =
            left / 1000 < BROKER_TIMEOUT_S ? (long)(left / 1000) : BROKER_TIMEOUT_S;
        if (rc == 0)
            json_decref (r->body);
        fmb_log (
            LOG_INFO,
            "%s %s: %s; trying again (%d of %d)",
            method,
            path,
            rc < 0 && error ? error->text : "no answer, or 429 (the broker is busy)",
            tries + 1,
            BROKER_TRIES);
        api_keep_clear_away (ag->keep); /* this caller's own retry */
        sleep_ms (backoff / 2 + (int64_t)(random () % backoff));
    }
}

int agent_broker_call (struct agent *ag,
                       const char *method,
                       const char *path,
                       const char *body,
                       json_t **ret,
                       struct fmb_error *error)
{
    struct api_reply r;
    ag->broker_status = 0;
    if (call_with_retries (ag, method, path, body, &r, error) < 0) {
        ag->broker_down = true; /* kept reports wait: no second timeout */
        return -1;              /* errno EHOSTUNREACH */
    }
    ag->broker_status = r.status;
    if (r.status < 200 || r.status > 299) {
        const char *detail = json_string_value (json_object_get (r.body, "detail"));
        fmb_errorf (error,
                    "broker: %s %s: %ld %s",
                    method,
                    path,
                    r.status,
                    detail ? detail : "");
        json_decref (r.body);
        errno = r.status == 404 ? ENOENT : EIO;
        return -1;
    }
    if (ret)
        *ret = r.body;
    else
        json_decref (r.body);
    return 0;
}

int agent_config_load (struct fmb_config *cfg,
                       const struct agent_args *args,
                       struct fmb_error *e)
{
    fmb_config_defaults (cfg);
    const char *path =
        args->config ? args->config
                     : (access (FMB_CONFIG_PATH, F_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if (path && fmb_config_load_client (cfg, path, e) < 0)
        return -1;
    if (args->broker_url && api_config_broker_url (cfg, args->broker_url, e) < 0)
        return -1;
    return 0;
}

int agent_setup (struct agent *ag, const struct agent_args *service)
{
    struct fmb_error e;
    if (service) {
        ag->args.config = service->config;
        ag->args.libcxi = service->libcxi;
        ag->args.socket = service->socket;
        ag->args.broker_url = service->broker_url;
        ag->args.state_dir = service->state_dir;
    }
    ag->caller_uid = -1;
    if (agent_config_load (&ag->cfg, &ag->args, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return -1;
    }
    fmb_log_set_level (ag->cfg.log_level);
    if (!ag->args.libcxi)
        ag->args.libcxi = ag->cfg.cxi_libcxi;
    api_target_init (&ag->target, &ag->cfg, ag->args.socket);
    if (!ag->args.state_dir)
        ag->args.state_dir = JOBRECORD_DIR_DEFAULT;
    return 0;
}

/* fmsession.c: the FM session's state, probes and back-off (fmsession.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "fmclient.h"
#include "events.h"
#include "fmsession.h"
#include "log.h"
#include "timer.h"

#define WAKE_MAX 4
/* The id the idle liveness probe GETs: no cluster's prefix, so that no
 * reconciliation (ours or another broker's) ever takes it for a job. */
#define LIVENESS_JOB_ID "fmbroker-liveness"

struct fmsession {
    struct fmc *fmc;              /* NULL: VNI-only */
    const struct fmb_config *cfg; /* the running one ([fabric_manager] url) */
    struct events *events;        /* ups and downs are events */
    bool stopping;                /* shutting down: no more probes */
    enum fm_state state;
    int64_t since_ms;      /* wall clock of the last state change */
    char error[256];       /* why it is down */
    char refused[256];     /* why the FM refuses our credentials ("": it does not) */
    unsigned refusals;     /* calls refused since refused[] was set */
    int64_t refused_since; /* wall clock of the first of them */
    unsigned backoff_ms;
    bool probe_started; /* since the last back-off was set */
    bool probe_inflight;
    fmsession_probe_f probe;
    void *probe_arg;
    struct timer *probe_timer;
    /* While up: a probe when nothing was heard from the FM for
     * FM_LIVENESS_MS, so that an idle broker sees a dead FM in seconds. */
    struct timer *liveness_timer;
    int64_t heard_ms; /* monotonic: the last call the FM answered */
    bool liveness_inflight;
    /* the FM answered 404 where every collectives API answers: down
     * until a call proves the API there (a probe's 404 does not) */
    bool no_api;
    struct timer *wake[WAKE_MAX];
    int nwake;
};

const char *fm_state_name (enum fm_state s)
{
    switch (s) {
    case FM_DISABLED:
        return "disabled";
    case FM_CONNECTING:
        return "connecting";
    case FM_UP:
        return "up";
    case FM_DOWN:
        return "down";
    }
    return "?";
}

static void probe_now (struct fmsession *s)
{
    s->probe_started = true;
    s->probe_inflight = true;
    s->probe (s->probe_arg);
}

/* While down: a probe after each back-off. */
static int64_t probe_timer (void *arg, int64_t now)
{
    struct fmsession *s = arg;
    (void)now;
    if (!s->probe || s->stopping || s->state != FM_DOWN)
        return TIMER_IDLE; /* going down sets it */
    if (s->probe_inflight) /* the first contact's listing, or a probe */
        return 250;        /* look again once it has ended */
    probe_now (s);
    /* A failing probe sets the next (doubled) back-off; this is the net
     * should its answer never come. */
    return FM_PROBE_BACKOFF_MAX_MS;
}

static void liveness_done (const struct fmc_result *res, void *arg)
{
    struct fmsession *s = arg;
    s->liveness_inflight = false;
    fmsession_note (s, res);
}

/* While up and idle: one small request on the collectives API. */
static int64_t liveness_timer (void *arg, int64_t now)
{
    struct fmsession *s = arg;
    struct fmb_error e;
    if (!s->fmc || s->stopping)
        return TIMER_IDLE; /* no FM, or no more */
    if (s->state != FM_UP)
        return FM_LIVENESS_MS;
    int64_t quiet = now - s->heard_ms;
    if (s->liveness_inflight || quiet < FM_LIVENESS_MS)
        return s->liveness_inflight ? FM_LIVENESS_MS : FM_LIVENESS_MS - quiet;
    s->liveness_inflight = true;
    if (fmc_probe (s->fmc, LIVENESS_JOB_ID, liveness_done, s, &e) < 0) {
        s->liveness_inflight = false;
        fmb_log (LOG_ERR, "fabric manager liveness probe: %s", e.text);
    }
    return FM_LIVENESS_MS;
}

struct fmsession *fmsession_create (struct timers *timers,
                                    struct fmc *fmc,
                                    const struct fmb_config *cfg,
                                    struct events *events)
{
    struct fmsession *s = calloc (1, sizeof (*s));
    if (!s)
        return NULL;
    s->fmc = fmc;
    s->cfg = cfg;
    s->events = events;
    s->probe_timer = timer_add (timers, "FM probe", TIMER_IDLE, probe_timer, s);
    s->liveness_timer =
        timer_add (timers, "FM liveness", FM_LIVENESS_MS, liveness_timer, s);
    return s;
}

void fmsession_stop (struct fmsession *s)
{
    s->stopping = true;
}

void fmsession_heard (struct fmsession *s, const struct fmc_result *res)
{
    if (res->http_status != 0)
        s->heard_ms = now_mono ();
    if (res->no_api) /* whoever made the call: a wrong url is the session's */
        fmsession_note (s, res);
}

void fmsession_destroy (struct fmsession *s)
{
    free (s);
}

void fmsession_start (struct fmsession *s,
                      bool configured,
                      fmsession_probe_f probe,
                      void *arg)
{
    s->since_ms = now_wall ();
    if (!configured) {
        s->state = FM_DISABLED;
        return;
    }
    s->state = FM_CONNECTING;
    s->probe = probe;
    s->probe_arg = arg;
    s->probe_started = true;
    s->probe_inflight = true; /* the first contact is the first reconcile */
    probe (arg);
}

void fmsession_wake_on_up (struct fmsession *s, struct timer *tm)
{
    if (tm && s->nwake < WAKE_MAX)
        s->wake[s->nwake++] = tm;
}

/* The broker's store error line (as broker_log_store_error). */
static void log_event_error (const struct fmb_error *e)
{
    fmb_log (LOG_ERR, "%s: store: %s", "event", e->text);
}

static void changed (struct fmsession *s, enum fm_state old)
{
    const char *url = s->cfg->fm_url;
    struct fmb_error e;
    if (s->state == FM_UP) {
        s->backoff_ms = 0;
        for (int i = 0; i < s->nwake; i++) /* a new session: reconcile, outbox */
            timer_wake (s->wake[i], 0);
        fmb_log (LOG_NOTICE, "fabric manager %s: session up", url);
        if (old == FM_DOWN && events_append (s->events,
                                             "fm_reconnected",
                                             NULL,
                                             json_pack ("{s:s}", "url", url),
                                             &e) < 0)
            log_event_error (&e);
        return;
    }
    if (s->refused[0]) /* the refusal itself was logged just before */
        fmb_log (LOG_WARNING,
                 "fabric manager %s: down until it accepts fmbroker's credentials; FM "
                 "work waits, retrying in %u ms",
                 url,
                 s->backoff_ms);
    else
        fmb_log (LOG_WARNING,
                 "fabric manager %s: %s (%s); FM work waits, retrying in %u ms",
                 url,
                 s->no_api ? "no collectives API there" : "unreachable",
                 s->error,
                 s->backoff_ms);
    if (events_append (s->events,
                       "fm_disconnected",
                       NULL,
                       json_pack ("{s:s, s:s}", "url", url, "error", s->error),
                       &e) < 0)
        log_event_error (&e);
}

static void set_state (struct fmsession *s, enum fm_state to, const char *why)
{
    enum fm_state old = s->state;
    if (to == FM_DOWN) {
        snprintf (s->error, sizeof (s->error), "%s", why ? why : "");
        /* Back off per failed probe, not per failed call: many calls
         * failing together are one outage. */
        if (old != FM_DOWN)
            s->backoff_ms = 1000;
        else if (s->probe_started) /* a probe failed */
            s->backoff_ms = s->backoff_ms * 2 > FM_PROBE_BACKOFF_MAX_MS
                                ? FM_PROBE_BACKOFF_MAX_MS
                                : s->backoff_ms * 2;
        else
            return;
        s->probe_started = false;
        timer_set (s->probe_timer, s->backoff_ms);
    }
    if (old == to)
        return;
    s->state = to;
    s->since_ms = now_wall ();
    changed (s, old);
}

/* An FM that answers but refuses our credentials (a client secret
 * rotated at the FM only, a certificate it no longer trusts) gets
 * nothing the broker asks of it done: the session is down with that
 * reason (RUNs answer "unavailable" at once, the outbox waits, probes
 * back off) until a call succeeds.  The first refusal is logged; the
 * ones after it are counted (health shows the count, and the line
 * saying it is accepted again), so that every probe and listing does
 * not log the same line again. */
static void note_credentials (struct fmsession *s, const struct fmc_result *res)
{
    const char *url = s->cfg->fm_url;
    if (res->status == FMC_UNAUTHORIZED) {
        if (!s->refused[0]) {
            fmb_log (
                LOG_ERR,
                "fabric manager %s refuses fmbroker's credentials ([fabric_manager] "
                "auth): %s; further refusals are counted, not logged",
                url,
                res->error);
            s->refusals = 0;
            s->refused_since = now_wall ();
        }
        s->refusals++;
        snprintf (s->refused, sizeof (s->refused), "%s", res->error);
    } else if (res->status == FMC_OK && s->refused[0]) {
        fmb_log (LOG_NOTICE,
                 "fabric manager %s accepts fmbroker's credentials again (%u call%s "
                 "refused over %lld s)",
                 url,
                 s->refusals,
                 s->refusals == 1 ? "" : "s",
                 (long long)((now_wall () - s->refused_since) / 1000));
        s->refused[0] = '\0';
        s->refusals = 0;
    }
}

void fmsession_note (struct fmsession *s, const struct fmc_result *res)
{
    if (res->status == FMC_NOT_SENT || res->unsent)
        return; /* says nothing about the FM */
    note_credentials (s, res);
    if (res->no_api) {
        s->no_api = true;
        set_state (s, FM_DOWN, res->error);
        return;
    }
    if (s->refused[0]) { /* answered, but nothing it is asked gets done */
        char why[sizeof (s->error)];
        snprintf (why,
                  sizeof (why),
                  "refuses fmbroker's credentials ([fabric_manager] auth): %.190s",
                  s->refused);
        set_state (s, FM_DOWN, why);
        return;
    }
    if (s->no_api && res->status == FMC_OK && res->op != FMC_OP_PROBE)
        s->no_api = false; /* the API answered where only it can */
    /* counted in metrics by the client's observer, call by call */
    if (res->status != FMC_OK && res->http_status == 0)
        set_state (s, FM_DOWN, res->error);
    else if (s->state != FM_UP && !s->no_api)
        set_state (s, FM_UP, NULL);
}

void fmsession_probe_done (struct fmsession *s)
{
    s->probe_inflight = false;
}

bool fmsession_probe_inflight (const struct fmsession *s)
{
    return s->probe_inflight;
}

enum fm_state fmsession_state (const struct fmsession *s)
{
    return s->state;
}

const char *fmsession_error (const struct fmsession *s)
{
    return s->state == FM_DOWN ? s->error : "";
}

const char *fmsession_refused (const struct fmsession *s)
{
    return s->refused;
}

unsigned fmsession_refusals (const struct fmsession *s, int64_t *since_ms)
{
    if (since_ms)
        *since_ms = s->refused_since;
    return s->refused[0] ? s->refusals : 0;
}

int64_t fmsession_since (const struct fmsession *s)
{
    return s->since_ms;
}

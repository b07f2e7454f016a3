/* fmsession.c: the FM session's state, probes and back-off (fmsession.h). */
#include <stdio.h>
#include <stdlib.h>

#include "broker.h"
#include "fmsession.h"
#include "log.h"
#include "timer.h"

#define WAKE_MAX 4

struct fmsession {
    struct broker *b;
    enum fm_state state;
    int64_t since_ms;  /* wall clock of the last state change */
    char error[256];   /* why it is down */
    char refused[256]; /* why the FM refuses our credentials ("": it does not) */
    unsigned backoff_ms;
    bool probe_started; /* since the last back-off was set */
    bool probe_inflight;
    fmsession_probe_f probe;
    void *probe_arg;
    struct timer *probe_timer;
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
    if (!s->probe || s->b->stopping || s->state != FM_DOWN)
        return TIMER_IDLE; /* going down sets it */
    if (s->probe_inflight) /* the first contact's listing, or a probe */
        return 250;        /* look again once it has ended */
    probe_now (s);
    /* A failing probe sets the next (doubled) back-off; this is the net
     * should its answer never come. */
    return FM_PROBE_BACKOFF_MAX_MS;
}

struct fmsession *fmsession_create (struct broker *b)
{
    struct fmsession *s = calloc (1, sizeof (*s));
    if (!s)
        return NULL;
    s->b = b;
    s->probe_timer = timer_add (b->timers, "FM probe", TIMER_IDLE, probe_timer, s);
    return s;
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

static void changed (struct fmsession *s, enum fm_state old)
{
    struct broker *b = s->b;
    struct fmb_error e;
    if (s->state == FM_UP) {
        s->backoff_ms = 0;
        for (int i = 0; i < s->nwake; i++) /* a new session: reconcile, outbox */
            timer_wake (s->wake[i], 0);
        fmb_log (LOG_NOTICE, "fabric manager %s: session up", b->cfg.fm_url);
        if (old == FM_DOWN && broker_event (b,
                                            "fm_reconnected",
                                            NULL,
                                            json_pack ("{s:s}", "url", b->cfg.fm_url),
                                            &e) < 0)
            broker_log_store_error (b, "event", &e);
        return;
    }
    fmb_log (LOG_WARNING,
             "fabric manager %s: unreachable (%s); FM work waits, retrying in %u ms",
             b->cfg.fm_url,
             s->error,
             s->backoff_ms);
    if (broker_event (b,
                      "fm_disconnected",
                      NULL,
                      json_pack ("{s:s, s:s}", "url", b->cfg.fm_url, "error", s->error),
                      &e) < 0)
        broker_log_store_error (b, "event", &e);
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
 * rotated at the FM only, a certificate it no longer trusts) is up, yet
 * nothing the broker asks of it gets done: said once in the log, and in
 * health until a call succeeds. */
static void note_credentials (struct fmsession *s, const struct fmc_result *res)
{
    const char *url = s->b->cfg.fm_url;
    if (res->status == FMC_UNAUTHORIZED) {
        if (!s->refused[0])
            fmb_log (
                LOG_ERR,
                "fabric manager %s refuses fmbroker's credentials ([fabric_manager] "
                "auth): %s",
                url,
                res->error);
        snprintf (s->refused, sizeof (s->refused), "%s", res->error);
    } else if (res->status == FMC_OK && s->refused[0]) {
        fmb_log (
            LOG_NOTICE, "fabric manager %s accepts fmbroker's credentials again", url);
        s->refused[0] = '\0';
    }
}

void fmsession_note (struct fmsession *s, const struct fmc_result *res)
{
    if (res->status == FMC_NOT_SENT || res->unsent)
        return; /* says nothing about the FM */
    note_credentials (s, res);
    /* counted in metrics by the client's observer, call by call */
    if (res->status != FMC_OK && res->http_status == 0)
        set_state (s, FM_DOWN, res->error);
    else if (s->state != FM_UP)
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

int64_t fmsession_since (const struct fmsession *s)
{
    return s->since_ms;
}

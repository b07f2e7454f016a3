/* events.c: the event log's appends, its long-poll readers, and the
 * events that report damaged session tokens (events.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "httpreq.h"
#include "log.h"
#include "monotime.h"
#include "pass.h"
#include "store.h"
#include "timer.h"
#include "waitq.h"

struct events {
    struct store *st;
    struct pass *pass;    /* damage reports are forgotten at its commit */
    struct waitq readers; /* long-poll readers of /v1/events */
    struct timer *timer, *damage_timer;
    /* Jobs whose stored token did not decrypt: logged at once, an event
     * in the next pass; 'seen' keeps a listing from repeating them. */
    char damaged_new[16][STORE_JOB_ID_MAX + 1];
    int n_damaged_new;
    int n_damaged_reporting; /* the first ones, written in this pass */
    char damaged_seen[64][STORE_JOB_ID_MAX + 1];
    unsigned n_damaged_seen;
};

/* The broker's store error line (as broker_log_store_error). */
static void log_store_error (const char *what, const struct fmb_error *e)
{
    fmb_log (LOG_ERR, "%s: store: %s", what, e->text);
}

int events_append (struct events *ev,
                   const char *type,
                   const char *job,
                   json_t *detail,
                   struct fmb_error *error)
{
    char *text = detail ? json_dumps (detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref (detail);
    int rc = store_event_append (ev->st, type, job, text, NULL, error);
    free (text);
    if (rc == 0) {
        fmb_log (LOG_INFO, "event %s%s%s", type, job ? " job " : "", job ? job : "");
        /* long-poll readers have news (none: no pass just for them) */
        if (!waitq_empty (&ev->readers))
            timer_wake (ev->timer, 0);
    }
    return rc;
}

struct event_collect {
    json_t *list;
    int64_t last;
};

static int collect_event (const struct store_event *ev, void *arg)
{
    struct event_collect *c = arg;
    json_t *detail = json_loads (ev->detail, 0, NULL);
    json_t *o = json_pack ("{s:I, s:I, s:s, s:o}",
                           "seq",
                           (json_int_t)ev->seq,
                           "time_ms",
                           (json_int_t)ev->at_ms,
                           "type",
                           ev->type,
                           "detail",
                           detail ? detail : json_object ());
    if (ev->job_id)
        json_object_set_new (o, "job", json_string (ev->job_id));
    json_array_append_new (c->list, o);
    c->last = ev->seq;
    return 0;
}

/* The events after 'after' as the API shows them, or NULL on error. */
static json_t *events_after (struct events *ev,
                             int64_t after,
                             unsigned limit,
                             bool *any)
{
    struct event_collect c = {json_array (), after};
    struct fmb_error e;
    if (store_event_list (ev->st, after, limit, collect_event, &c, &e) < 0) {
        json_decref (c.list);
        log_store_error ("events", &e);
        return NULL;
    }
    /* A reader whose cursor is older than first_seq - 1 missed events that
     * [broker] retain_days pruned. */
    int64_t first = 0;
    if (store_event_first (ev->st, &first, &e) < 0)
        log_store_error ("events", &e);
    *any = json_array_size (c.list) > 0;
    return json_pack ("{s:o, s:I, s:I}",
                      "events",
                      c.list,
                      "last_seq",
                      (json_int_t)c.last,
                      "first_seq",
                      (json_int_t)first);
}

struct events_wake {
    struct events *ev;
    int64_t last, now;
    bool all;
};

static void event_reply (struct waiter *w, void *arg)
{
    struct events_wake *ew = arg;
    if (!ew->all && ew->last <= w->after && ew->now < w->deadline_ms)
        return;
    waitq_remove (w);
    bool any;
    json_t *o = events_after (ew->ev, w->after, (unsigned)w->key, &any);
    if (o)
        http_reply (w->req, 200, o);
    else
        http_reply_problem (w->req, 503, "event log unreadable");
}

void events_wake (struct events *ev, bool all)
{
    struct events_wake ew = {.ev = ev, .all = all};
    struct fmb_error e;
    if (waitq_empty (&ev->readers) || store_event_last (ev->st, &ew.last, &e) < 0)
        return;
    ew.now = fmb_monotime_ms ();
    waitq_each (&ev->readers, event_reply, &ew);
}

void events_wait (struct events *ev,
                  struct http_req *req,
                  int64_t after,
                  unsigned limit,
                  unsigned wait_s)
{
    struct waiter *w = http_wait (req);
    w->after = after;
    w->key = (int64_t)limit;
    w->deadline_ms = fmb_monotime_ms () + (int64_t)wait_s * 1000;
    waitq_add (&ev->readers, w);
    http_suspend (req);
    /* Answers now if there is news or no wait was asked for. */
    events_wake (ev, false);
    timer_wake (ev->timer, (int64_t)wait_s * 1000);
}

static int64_t events_timer (void *arg, int64_t now)
{
    struct events *ev = arg;
    events_wake (ev, false);
    return waitq_next_deadline_ms (&ev->readers, now);
}

void events_token_damaged (void *arg, const char *job, const char *why)
{
    struct events *ev = arg;
    unsigned kept = ev->n_damaged_seen < 64 ? ev->n_damaged_seen : 64;
    for (unsigned i = 0; i < kept; i++)
        if (strcmp (ev->damaged_seen[i], job) == 0)
            return;
    snprintf (ev->damaged_seen[ev->n_damaged_seen++ % 64],
              sizeof (ev->damaged_seen[0]),
              "%s",
              job);
    /* Never the token (it did not decrypt anyway), nor the blob. */
    fmb_log (LOG_ERR,
             "job %s: its stored session token does not decrypt (%s); the job "
             "goes on without it",
             job,
             why);
    if (ev->n_damaged_new < 16)
        snprintf (ev->damaged_new[ev->n_damaged_new++],
                  sizeof (ev->damaged_new[0]),
                  "%s",
                  job);
    timer_wake (ev->damage_timer, 0);
}

/* The pass that wrote the damage events ended: forget them once they
 * are durable; if not, they are written again in the next pass. */
static void damage_reported (void *arg, bool committed)
{
    struct events *ev = arg;
    int n = ev->n_damaged_reporting;
    ev->n_damaged_reporting = 0;
    if (!committed) {
        timer_wake (ev->damage_timer, 1000);
        return;
    }
    memmove (ev->damaged_new,
             ev->damaged_new + n,
             (size_t)(ev->n_damaged_new - n) * sizeof (ev->damaged_new[0]));
    ev->n_damaged_new -= n;
}

/* Outside any read of the jobs table: the events are written in the
 * pass's transaction. */
static void report_damage (struct events *ev)
{
    if (ev->n_damaged_new == 0 || ev->n_damaged_reporting)
        return;
    for (int i = 0; i < ev->n_damaged_new; i++) {
        struct fmb_error e;
        if (events_append (
                ev,
                "token_damaged",
                ev->damaged_new[i],
                json_pack (
                    "{s:s}", "detail", "the stored session token does not decrypt"),
                &e) < 0)
            log_store_error ("token_damaged event", &e);
    }
    ev->n_damaged_reporting = ev->n_damaged_new;
    if (!pass_open (ev->pass) || pass_on_end (ev->pass, damage_reported, ev) < 0)
        damage_reported (ev, true);
}

static int64_t damage_timer (void *arg, int64_t now)
{
    (void)now;
    report_damage (arg);
    return TIMER_IDLE;
}

struct events *events_create (struct timers *timers)
{
    struct events *ev = calloc (1, sizeof (*ev));
    if (!ev)
        return NULL;
    ev->damage_timer = timer_add (timers, "damage reports", 0, damage_timer, ev);
    ev->timer = timer_add (timers, "event readers", TIMER_IDLE, events_timer, ev);
    return ev;
}

void events_attach (struct events *ev, struct store *st, struct pass *pass)
{
    ev->st = st;
    ev->pass = pass;
}

void events_destroy (struct events *ev)
{
    free (ev);
}

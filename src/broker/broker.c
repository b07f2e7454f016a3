/* broker.c: what every file of the broker shares: clocks, job and FM ids,
 * the job token check, store error logs. */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "broker.h"
#include "events.h"
#include "store.h"
#include "fmids.h"
#include "log.h"
#include "monotime.h"

int64_t now_mono (void)
{
    return fmb_monotime_ms ();
}

int64_t now_wall (void)
{
    return fmb_realtime_ms ();
}

/* A wall clock stepped back (NTP, an admin) holds this one still until
 * real time catches up: a reservation recorded after a listing of the
 * FM's jobs was asked for must read as later than it, or reconciliation
 * judges it by a listing that cannot hold it and marks a live job lost.
 * Only for those times: due times (back-off, quarantine, retention) stay
 * on now_wall, which a held clock would stall.  The loop's thread only. */
int64_t now_recorded (void)
{
    static int64_t latest;
    int64_t t = fmb_realtime_ms ();
    if (t > latest)
        latest = t;
    return latest;
}

int64_t broker_wall_clock (void *unused)
{
    (void)unused;
    return now_recorded ();
}

void broker_fm_id (struct broker *b, const char *job, char *out, size_t len)
{
    fmids_of_job (b->cfg.cluster_name, job, out, len);
}

const char *broker_local_job (struct broker *b, const char *fm_job_id)
{
    return fmids_local_job (b->cfg.cluster_name, fm_job_id);
}

bool broker_job_token_matches (void *arg, const char *job, const char *token)
{
    struct broker *b = arg;
    struct store_job *j;
    struct fmb_error e;
    bool ok = false;
    if (store_job_get_brief (b->st, job, &j, &e) < 0)
        return false;
    /* A released job's token opens nothing any more. */
    if (j->token && j->state != STORE_JOB_RELEASED) {
        size_t a = strlen (j->token), t = strlen (token);
        /* constant time in the token's content; lengths are not secret */
        ok = a == t && CRYPTO_memcmp (j->token, token, a) == 0;
    }
    store_job_free (j);
    return ok;
}

int broker_event (struct broker *b,
                  const char *type,
                  const char *job,
                  json_t *detail,
                  struct fmb_error *error)
{
    return events_append (b->events, type, job, detail, error);
}

void broker_log_store_error (struct broker *b,
                             const char *what,
                             const struct fmb_error *e)
{
    (void)b;
    fmb_log (LOG_ERR, "%s: store: %s", what, e->text);
}

/* fmsession.h: the broker's session with the fabric manager.
 *
 * connecting -> up; any call that gets no HTTP answer at all (refused,
 * timed out, TLS or token failure) makes it down.  While down, the outbox
 * waits and RUN answers "unavailable" at once; a probe (the jobs listing,
 * which reconcile.c starts and answers) is retried with exponential
 * back-off, and when one answers the session is up again.  Coming up
 * wakes the timers registered with fmsession_wake_on_up (a new listing,
 * the outbox).  Every change is logged and an event.
 *
 * An FM that answers but refuses the broker's credentials (401/403 even
 * with a fresh token, or its token endpoint refuses them) is down too,
 * with that reason, until a call succeeds: logged once, then counted.
 *
 * An FM that answers, but 404 where every collectives API answers (the
 * listing, the POST of a new job: the url's path is wrong), is down
 * too, with that reason, until a call proves the API there.  While up,
 * a liveness probe every FM_LIVENESS_MS of silence keeps "up" true of
 * an idle broker.
 */
#ifndef FMB_FMSESSION_H
#define FMB_FMSESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "fmclient.h"

#define FM_PROBE_BACKOFF_MAX_MS 60000
/* While up, a probe (fmc_probe) after this long without an answer from
 * the FM: an idle broker sees a dead FM within about this plus a
 * connection's failure, and an idle FM gets one small GET this often. */
#define FM_LIVENESS_MS 2000

enum fm_state {
    FM_DISABLED,   /* no [fabric_manager] url: VNI-only */
    FM_CONNECTING, /* first contact not made yet */
    FM_UP,
    FM_DOWN, /* unreachable, or refusing our credentials: FM work waits,
              * reconnect is retried */
};

struct events;
struct fmb_config;
struct fmsession;
struct timer;
struct timers;

/* Starts a probe: a call whose answer comes back through fmsession_note
 * after fmsession_probe_done. */
typedef void (*fmsession_probe_f) (void *arg);

/* Its timers on 'timers'; probes through 'fmc' (NULL: VNI-only); its
 * changes logged with the url of 'cfg' (the running configuration) and
 * appended to 'events'. */
struct fmsession *fmsession_create (struct timers *timers,
                                    struct fmc *fmc,
                                    const struct fmb_config *cfg,
                                    struct events *events);
void fmsession_destroy (struct fmsession *s);
/* Shutting down: no more probes. */
void fmsession_stop (struct fmsession *s);
/* Disabled without an FM; else connecting, with the first probe now. */
void fmsession_start (struct fmsession *s,
                      bool configured,
                      fmsession_probe_f probe,
                      void *arg);
void fmsession_wake_on_up (struct fmsession *s, struct timer *tm);
/* A call came back (with an HTTP answer or without one). */
void fmsession_note (struct fmsession *s, const struct fmc_result *res);
/* Every FM call that completed (the client's observer): when the FM
 * was last heard from, and a wrong url whichever call met it. */
void fmsession_heard (struct fmsession *s, const struct fmc_result *res);
/* The probe's answer came (before fmsession_note of it). */
void fmsession_probe_done (struct fmsession *s);
bool fmsession_probe_inflight (const struct fmsession *s);

enum fm_state fmsession_state (const struct fmsession *s);
/* Why it is down ("" otherwise). */
const char *fmsession_error (const struct fmsession *s);
/* Why the FM refuses the broker's credentials (401/403 with a fresh
 * token, or from its token endpoint), since the last such answer and
 * until a call succeeds; "" otherwise. */
const char *fmsession_refused (const struct fmsession *s);
/* How many calls the FM refused since it began to (0 when it does not),
 * and the wall clock ms of the first in *since_ms (if not NULL). */
unsigned fmsession_refusals (const struct fmsession *s, int64_t *since_ms);
/* Wall clock ms of the last change. */
int64_t fmsession_since (const struct fmsession *s);
const char *fm_state_name (enum fm_state s);

#endif

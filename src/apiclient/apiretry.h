/* apiretry.h: what a call to the broker that did not succeed means for
 * the caller, one rule for every client: the node agent's calls
 * (agent.c: try again at once while the broker is busy), its kept
 * reports (report.c: keep for later, or drop), the Flux jobtap plugin's
 * CLEANUP (brokercall.c: try again with back-off) and the CLI's exit
 * status, which is how the shell hooks (deploy/hooklib.sh) learn it.
 *
 * The rule: an answer of 2xx is done; 4xx is a refusal that asking again
 * does not change, except 408 and 429 (the broker busy or slow to read);
 * 5xx (failing over, its disk failing) and no answer at all are
 * transient.  No answer after a wait of API_BUSY_WAIT_MS or more is a
 * broker that is there and loaded (busy: worth a quick retry); a
 * connection refused at once is a broker that is not there (away: its
 * standby, or a restart, takes seconds to tens of seconds).  A call never
 * made, for want of a client token this user may read, is the caller's
 * configuration: no wait mends it. */
#ifndef FMB_APIRETRY_H
#define FMB_APIRETRY_H

#include <stdbool.h>
#include <stdint.h>

/* a failed call that waited this long for an answer: busy, not down */
#define API_BUSY_WAIT_MS 1000

enum api_outcome {
    API_OUTCOME_DONE,     /* 2xx */
    API_OUTCOME_REFUSED,  /* 4xx but 408 and 429 (and 1xx/3xx: not ours) */
    API_OUTCOME_NOT_SENT, /* no call made: no client token (EACCES) */
    API_OUTCOME_BUSY,     /* 429, or no answer within API_BUSY_WAIT_MS */
    API_OUTCOME_AWAY,     /* no broker took the call at once, or 408, 5xx */
};

/* From api_client_call's return 'rc' and errno 'err' (when rc < 0), the
 * HTTP 'status' (when rc == 0) and how long the call took. */
enum api_outcome api_outcome_of (int rc, int err, long status, int64_t waited_ms);

/* Busy or away: the same request may succeed later. */
bool api_outcome_transient (enum api_outcome o);

/* The exit status a program gives a script for an outcome (sysexits.h's
 * EX_TEMPFAIL for "try again"; the CLI's EXIT_*, fmbroker(1)). */
#define API_EXIT_OK       0
#define API_EXIT_REFUSED  1  /* the broker said no: do not ask again */
#define API_EXIT_USAGE    3  /* the command line or the configuration */
#define API_EXIT_TEMPFAIL 75 /* no broker, or "not now": try again later */
int api_outcome_exit (enum api_outcome o);

#endif

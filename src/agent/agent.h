/* agent.h: one run of the node agent, the state its commands share.
 *
 * main() fills it (the parsed arguments, the configuration, the broker
 * target) and hands it to one command; the commands (prolog.h,
 * epilog.h, env.h, list.h, clean.h, report.h) and their helpers take it
 * first.  What a run learns on its way (the broker's last status,
 * whether the broker was away, the job's failure reason) is kept here so
 * that main() can act on it after the command. */
#ifndef FMB_AGENT_AGENT_H
#define FMB_AGENT_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "apiclient.h"
#include "apiretry.h"
#include "args.h"
#include "config.h"
#include "cxilib.h"
#include "error.h"

#define EXIT_FAIL  1 /* prolog: do not start here; epilog: drain the node */
#define EXIT_USAGE 2

struct agent {
    struct agent_args args;
    struct fmb_config cfg;
    struct api_target target;
    struct cxilib lib;
    long broker_status;              /* of the last broker call; 0: not reached */
    enum api_outcome broker_outcome; /* of the last broker call (apiretry.h) */
    bool broker_down;                /* a call found no broker in this run */
    /* prolog --report-later: a detached child delivers the kept reports
     * (report.c), or the node service after its answer (in_service) */
    bool delivery_detached;
    /* A run of the node service (serve.c): its connection to the broker
     * is kept from run to run, and it delivers the reports itself */
    bool in_service;
    /* the service's own background calls (reports, step ends, opening
     * its connection): one try each, the jobs behind them must not wait
     * for a busy broker's retries; they are tried again later anyway */
    bool single_try;
    struct api_keep *keep; /* NULL: a connection per broker call */
    /* The node service's caller when it is not root (the Flux job shell
     * asking for its own job's setup): the job must be this uid's; 0 or
     * -1 (root, or no service): any job. */
    int64_t caller_uid;
    /* Until when EBUSY is retried: one window for the whole run, however
     * many services are busy. */
    int64_t retry_deadline_ms;
    /* Why this run failed, in words for the job's user: main() prints it
     * as the run's last line, after any line about other jobs (kept
     * reports), so that a hook showing the last line (the SPANK plugin,
     * Flux's prolog) shows this job's own reason.  The first failure is
     * the reason; what follows from it (removing services, keeping a
     * report) is logged as it happens.  Advice for admins goes to other
     * lines, never into it. */
    char final_reason[FMB_ERROR_TEXT_MAX + 128];
};

/* The run's setup: the configuration (as a client reads it), libcxi, the
 * broker target and the state directory, with the node service's own
 * options first when 'service' is not NULL (its runs take them); -1
 * (logged) if the configuration is bad.  The node service reads it once
 * (engine.h: again on SIGHUP); the token is read afresh for every run,
 * so that a rotated token needs no restart of the service. */
int agent_setup (struct agent *ag, const struct agent_args *service);

/* The configuration for 'args' (-c, else /etc/fmbroker/fmbroker.conf if
 * there, else the built-in defaults; --broker-url over it): 0, or -1 with
 * 'e'. */
int agent_config_load (struct fmb_config *cfg,
                       const struct agent_args *args,
                       struct fmb_error *e);

/* Record the job's reason (the first one only); returns EXIT_FAIL. */
int agent_fail_job (struct agent *ag, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* One call to the broker; *ret gets the JSON answer (2xx only).  -1 with
 * errno EHOSTUNREACH (no broker: ag->broker_down set), ENOENT (404) or
 * EIO; ag->broker_status is the answer's status, 0 if none. */
int agent_broker_call (struct agent *ag,
                       const char *method,
                       const char *path,
                       const char *body,
                       json_t **ret,
                       struct fmb_error *error);

#endif

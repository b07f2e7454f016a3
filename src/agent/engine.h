/* engine.h: the node engine.  A job's setup on this node, its end, a
 * step's end and the node's reports, each from a typed request
 * (nodeproto.h), on the configuration it was created with.
 *
 * Why one engine: every resource manager's way onto a node (the SPANK
 * plugin, slurmd's Prolog=/Epilog=, the Flux job shell and epilog) comes
 * here through the node service (serve.h), which holds one engine; where
 * no service answers, fmbroker-cxi runs the same commands (prolog.c,
 * epilog.c) in its own process.  The engine is safe to call from several
 * threads at once for different jobs: each call is a run of its own
 * (struct agent) with a copy of the configuration and a broker
 * connection of its own, taken from a pool of kept ones.  The caller
 * orders the calls of one job (serve.c). */
#ifndef FMB_AGENT_ENGINE_H
#define FMB_AGENT_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "nodeproto.h"

struct engine;

/* What one call did. */
struct engine_outcome {
    int status; /* 0 done; EXIT_FAIL (an end: drain); NODE_SERVICE_BUSY; EXIT_USAGE */
    bool kept;  /* a report left for engine_deliver (the broker was not away) */
    char why[sizeof (((struct agent *)0)->final_reason)]; /* "" when 0 */
};

/* An engine on the service's own run: its arguments (state directory,
 * libcxi, broker overrides, --node) and its configuration, read once
 * (again at engine_reload).  NULL: out of memory. */
struct engine *engine_create (const struct agent *service);
void engine_destroy (struct engine *eng);

/* The configuration read again (SIGHUP): 0, or -1 with 'e' (the old one
 * stays in force). */
int engine_reload (struct engine *eng, struct fmb_error *e);

/* This node's name for reports and tokens: the request's, else the
 * service's --node, else $FMBROKER_NODE, else the short host name. */
const char *engine_node (const struct engine *eng);

/* The job's setup on this node (NODE_OP_SETUP).  'caller_uid': the
 * caller's uid when it is not root (the Flux job shell, asking for its
 * own job): the job must be that uid's, and no RUN is made for it;
 * -1 for root. */
void engine_setup (struct engine *eng,
                   const struct node_request *req,
                   int64_t caller_uid,
                   struct engine_outcome *out);

/* The job's end on this node (NODE_OP_END): its services destroyed
 * without waiting for one in use (NODE_SERVICE_BUSY: the caller's
 * fmbroker-cxi waits), reported. */
void engine_end (struct engine *eng,
                 const struct node_request *req,
                 struct engine_outcome *out);

/* The broker's DELETE of a step's trees ("/v1/jobs/J/steps/S"), one try:
 * 0, or -1 (logged) with *away set when the broker was not reached. */
int engine_step_end (struct engine *eng, const char *path, bool *away);

/* Reports kept on this node delivered, one try each: how many are left
 * (0 none). */
unsigned engine_deliver (struct engine *eng);

/* A connection to the broker opened (and authenticated) before a job
 * needs it, if none is kept open.  *local: the broker is on a Unix
 * socket (nothing to keep warm). */
void engine_warm (struct engine *eng, bool *local);

/* The descriptor of a kept, idle connection to the broker (readable when
 * the broker closed it), or -1. */
int engine_idle_fd (struct engine *eng);

#endif

/* nodeproto.h: what a caller asks of the node service (fmbroker-cxi
 * serve), typed, and its wire form.
 *
 * Why a protocol of its own: the node service is the one node engine for
 * every resource manager (doc/DESIGN.md, "One node engine").  Each
 * resource manager's client (the SPANK plugin, fmbroker-slurm-prolog, the
 * Flux shell plugin, the Flux epilog) turns what its RM gives it into
 * this request; the service never sees an RM's variables.  libc alone:
 * fmbroker-slurm-prolog and the plugins build it in.
 *
 * Wire form: a first line "fmbroker-node/1 OP", then KEY=VALUE lines,
 * then an empty line.  No value holds a newline.  The answer is one line,
 * "STATUS<TAB>WHY" (0: done; see nodeservice.h for the others). */
#ifndef FMB_NODEPROTO_NODEPROTO_H
#define FMB_NODEPROTO_NODEPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define NODE_PROTO_MAGIC "fmbroker-node/1"

enum node_op {
    NODE_OP_NONE = 0,
    /* The job's CXI services and records on this node, made unless its
     * record is there.  'early': answered once taken, before it is made
     * (slurmd's Prolog=: the step's own setup request waits for it). */
    NODE_OP_SETUP,
    /* The job's end on this node: its services destroyed, reported.
     * Answered NODE_SERVICE_BUSY when a service is still in use. */
    NODE_OP_END,
    /* A step's end: its multicast trees deleted at the broker, later. */
    NODE_OP_STEP_END,
    /* Answered once nothing for the job is in the making here. */
    NODE_OP_WAIT,
};

#define NODE_PROTO_JOB_MAX   128
#define NODE_PROTO_NODE_MAX  256
#define NODE_PROTO_NODES_MAX 8192 /* a compressed (hostlist) node list */

struct node_request {
    enum node_op op;
    char job[NODE_PROTO_JOB_MAX];  /* the job's id as the broker has it */
    char step[NODE_PROTO_JOB_MAX]; /* STEP_END: the step's id */
    char
        node[NODE_PROTO_NODE_MAX]; /* this node as the RM names it; "": the service's */
    bool early;                    /* SETUP: answer once taken */
    /* SETUP: the job's RUN, made from this node when its configuration
     * says so ([api] node_run, Slurm's launch setup) and 'nodes' is set */
    bool have_uid;
    uint32_t uid;
    char user[64];
    char nodes[NODE_PROTO_NODES_MAX];
    unsigned ncores; /* this node's CPUs for the job (0: unknown) */
    /* the user's options as given, checked by the service */
    char hwcoll[16];
    char vni_count[16];
    char tcs[64];
};

/* The request's wire form into buf: its length, or -1 with 'e' (a value
 * with a newline, too long for buf, no op). */
int node_request_encode (const struct node_request *r,
                         char *buf,
                         size_t len,
                         struct fmb_error *e);

/* A request from its wire form (buf holds it, without the empty line, as
 * a string; changed in place): 0, or -1 with 'e' naming what is wrong (no
 * magic, an unknown op, a line without '=', a value too long).  Unknown
 * keys are ignored: a newer client may send more. */
int node_request_decode (char *buf, struct node_request *r, struct fmb_error *e);

/* "setup", "end", "step-end", "wait" ("?" for none). */
const char *node_op_name (enum node_op op);

#endif

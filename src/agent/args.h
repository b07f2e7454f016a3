/* args.h: the node agent's command line, parsed and validated in one
 * pure function (no I/O, no exit), so that it can be unit-tested and
 * fuzzed: the agent runs as root from prolog and epilog with arguments
 * assembled by shell scripts. */
#ifndef FMB_AGENT_ARGS_H
#define FMB_AGENT_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "cxi_abi.h"
#include "error.h"

enum agent_cmd {
    AGENT_PROLOG,
    AGENT_EPILOG,
    AGENT_ENV,
    AGENT_LIST,
    AGENT_CLEAN,
    AGENT_REPORT,
    AGENT_HOUSEKEEPING,
    AGENT_SERVE
};
enum agent_format { AGENT_FORMAT_SHELL, AGENT_FORMAT_JSON, AGENT_FORMAT_SLURM };

#define AGENT_RETRY_BUSY_MAX          3600 /* seconds; an epilog has its own timeout */
#define AGENT_RETRY_BUSY_EPILOG       5    /* the epilog never holds the node long */
#define AGENT_RETRY_BUSY_HOUSEKEEPING 300  /* housekeeping: minutes, then drain */
#define AGENT_NCORES_MAX              1048576

struct agent_args {
    enum agent_cmd cmd;
    bool help; /* --help: print the usage, nothing else is valid */
    /* Strings point into argv. */
    const char *config;
    const char *libcxi;
    const char *socket;
    const char *broker_url; /* replaces [api] broker_url: URL[,URL...] */
    const char *state_dir;
    const char *node;
    const char *job;
    /* --uid with --vnis: the job's facts without the broker */
    bool have_facts;
    uint32_t uid;
    uint16_t vnis[CXI_SVC_MAX_VNIS];
    unsigned nvnis;
    long ncores; /* -1: not given */
    long tcs;    /* -1: not given; else a mask of 0x1..0xf */
    unsigned retry_busy;
    enum agent_format format;
    bool dry_run;
    bool json;
    bool lnx;
    bool no_report;
    bool report_later; /* prolog: the 'created' report after exit (hooks) */
    bool all;          /* clean --all */
    bool pending;      /* report --pending */
    /* prolog --run JSON: make the job's RUN from this node (Slurm's
     * launch setup); the RUN body, "nodes" possibly a hostlist */
    const char *run;
    const char *listen; /* serve: the node service's socket */
    /* --job given as a Flux f58 id ("ƒ..."), in decimal: job points here */
    char job_dec[24];
};

#define AGENT_RUN_MAX 16384 /* a RUN body with a compressed node list */

/* Parse argv (options before or after the command word).  0 with *a
 * filled, or -1 (errno EINVAL) with a message naming the argument. */
int agent_args_parse (int argc,
                      char **argv,
                      struct agent_args *a,
                      struct fmb_error *error);

/* Is there a command word in argv (whatever else is wrong with it)? */
bool agent_args_have_command (int argc, char **argv);

#endif

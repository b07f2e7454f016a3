/* args.c: the node agent's command line. */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "validate.h"

/* -1 with errno EINVAL.  Arguments may be anything: messages quote at
 * most 64 bytes of them. */
#define bad(error, ...) (errno = EINVAL, fmb_errorf ((error), __VA_ARGS__))

/* A whole decimal number in [min, max]; no sign, no spaces, no suffix. */
static bool parse_ulong (const char *s,
                         unsigned long min,
                         unsigned long max,
                         unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long v = strtoul (s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* "V[,V...]": 1 to CXI_SVC_MAX_VNIS distinct VNIs of 1..65535. */
static bool parse_vnis (const char *s, struct agent_args *a)
{
    a->nvnis = 0;
    while (true) {
        const char *comma = strchr (s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen (s);
        char tok[8];
        unsigned long v;
        if (len == 0 || len >= sizeof (tok) || a->nvnis == CXI_SVC_MAX_VNIS)
            return false;
        memcpy (tok, s, len);
        tok[len] = '\0';
        if (!parse_ulong (tok, 1, 65535, &v))
            return false;
        for (unsigned i = 0; i < a->nvnis; i++)
            if (a->vnis[i] == v)
                return false;
        a->vnis[a->nvnis++] = (uint16_t)v;
        if (!comma)
            return true;
        s = comma + 1;
    }
}

/* "0xN" (1..0xf) or traffic class names, as [cxi] tcs takes them. */
static int parse_tcs (const char *s, struct agent_args *a, struct fmb_error *error)
{
    unsigned mask;
    struct fmb_error e;
    if (fmb_config_parse_tcs (s, &mask, &e) < 0) {
        errno = EINVAL;
        return fmb_errorf (error, "--tcs %.64s: %s", s, e.text);
    }
    a->tcs = mask;
    return 0;
}

static const struct {
    const char *name;
    enum agent_cmd cmd;
    bool needs_job;
} commands[] = {
    {"prolog", AGENT_PROLOG, true},
    {"epilog", AGENT_EPILOG, true},
    {"env", AGENT_ENV, true},
    {"list", AGENT_LIST, false},
    {"clean", AGENT_CLEAN, false},
    {"report", AGENT_REPORT, false},
    {"housekeeping", AGENT_HOUSEKEEPING, true},
};

int agent_args_parse (int argc,
                      char **argv,
                      struct agent_args *a,
                      struct fmb_error *error)
{
    enum {
        O_LIBCXI = 256,
        O_SOCKET,
        O_BROKER_URL,
        O_STATE,
        O_NODE,
        O_JOB,
        O_UID,
        O_VNIS,
        O_NCORES,
        O_TCS,
        O_RETRY,
        O_FORMAT,
        O_LNX,
        O_JSON,
        O_NOREPORT,
        O_REPORT_LATER,
        O_ALL,
        O_PENDING,
        O_RUN
    };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"libcxi", required_argument, NULL, O_LIBCXI},
        {"socket", required_argument, NULL, O_SOCKET},
        {"broker-url", required_argument, NULL, O_BROKER_URL},
        {"state-dir", required_argument, NULL, O_STATE},
        {"node", required_argument, NULL, O_NODE},
        {"job", required_argument, NULL, O_JOB},
        {"uid", required_argument, NULL, O_UID},
        {"vnis", required_argument, NULL, O_VNIS},
        {"ncores", required_argument, NULL, O_NCORES},
        {"tcs", required_argument, NULL, O_TCS},
        {"retry-busy", required_argument, NULL, O_RETRY},
        {"format", required_argument, NULL, O_FORMAT},
        {"lnx", no_argument, NULL, O_LNX},
        {"json", no_argument, NULL, O_JSON},
        {"no-report", no_argument, NULL, O_NOREPORT},
        {"report-later", no_argument, NULL, O_REPORT_LATER},
        {"all", no_argument, NULL, O_ALL},
        {"pending", no_argument, NULL, O_PENDING},
        {"run", required_argument, NULL, O_RUN},
        {"dry-run", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = NULL, *vnis = NULL;
    bool have_uid = false, retry_given = false;
    unsigned long v;
    int c;

    memset (a, 0, sizeof (*a));
    a->ncores = -1;
    a->tcs = -1;
    a->retry_busy = AGENT_RETRY_BUSY_EPILOG;
    a->format = AGENT_FORMAT_SHELL;
    optind = 0; /* glibc: start afresh (the fuzzer calls this many times) */
    opterr = 0; /* our own messages, naming the argument */
    /* '-': the command word may come between options */
    while ((c = getopt_long (argc, argv, "-:c:nh", opts, NULL)) != -1) {
        switch (c) {
        case 1:
            if (cmd)
                return bad (error, "unexpected argument '%.64s'", optarg);
            cmd = optarg;
            break;
        case 'c':
            a->config = optarg;
            break;
        case O_LIBCXI:
            a->libcxi = optarg;
            break;
        case O_SOCKET:
            a->socket = optarg;
            break;
        case O_BROKER_URL:
            a->broker_url = optarg;
            break;
        case O_STATE:
            a->state_dir = optarg;
            break;
        case O_NODE:
            if (!valid_node_name (optarg))
                return bad (error,
                            "--node '%.64s': not a host name ([A-Za-z0-9._-]{1,64})",
                            optarg);
            a->node = optarg;
            break;
        case O_JOB:
            if (!valid_job_id (optarg))
                return bad (error,
                            "--job '%.64s': not a job id ([A-Za-z0-9._-]{1,128})",
                            optarg);
            a->job = optarg;
            break;
        case O_UID:
            if (!parse_ulong (optarg, 0, UID_MAX_VALID, &v))
                return bad (error, "--uid %.64s: not a uid (0..4294967294)", optarg);
            a->uid = (uint32_t)v;
            have_uid = true;
            break;
        case O_VNIS:
            if (!parse_vnis (optarg, a))
                return bad (
                    error,
                    "--vnis %.64s: 1-4 distinct VNIs of 1..65535, comma-separated",
                    optarg);
            vnis = optarg;
            break;
        case O_NCORES:
            if (!parse_ulong (optarg, 0, AGENT_NCORES_MAX, &v))
                return bad (error, "--ncores %.64s: not a core count", optarg);
            a->ncores = (long)v;
            break;
        case O_TCS:
            if (parse_tcs (optarg, a, error) < 0)
                return -1;
            break;
        case O_RETRY:
            if (!parse_ulong (optarg, 0, AGENT_RETRY_BUSY_MAX, &v))
                return bad (error, "--retry-busy %.64s: seconds, 0..3600", optarg);
            a->retry_busy = (unsigned)v;
            retry_given = true;
            break;
        case O_FORMAT:
            if (strcmp (optarg, "shell") == 0)
                a->format = AGENT_FORMAT_SHELL;
            else if (strcmp (optarg, "json") == 0)
                a->format = AGENT_FORMAT_JSON;
            else if (strcmp (optarg, "slurm") == 0)
                a->format = AGENT_FORMAT_SLURM;
            else
                return bad (error, "--format %.64s: shell, json or slurm", optarg);
            break;
        case O_LNX:
            a->lnx = true;
            break;
        case O_JSON:
            a->json = true;
            break;
        case O_NOREPORT:
            a->no_report = true;
            break;
        case O_REPORT_LATER:
            a->report_later = true;
            break;
        case O_ALL:
            a->all = true;
            break;
        case O_PENDING:
            a->pending = true;
            break;
        case O_RUN:
            if (optarg[0] != '{' || strlen (optarg) > AGENT_RUN_MAX)
                return bad (error,
                            "--run: a RUN request, a JSON object of at most %d bytes",
                            AGENT_RUN_MAX);
            a->run = optarg;
            break;
        case 'n':
            a->dry_run = true;
            break;
        case 'h':
            a->help = true;
            return 0;
        case ':':
            return bad (error, "%.64s: needs a value", argv[optind - 1]);
        default:
            if (optopt > 0 && optopt < 256)
                return bad (error, "unknown option '-%c'", optopt);
            return bad (error, "unknown option '%.64s'", argv[optind - 1]);
        }
    }
    if (!cmd)
        return bad (
            error,
            "no command (prolog, epilog, housekeeping, env, list, clean, report)");
    size_t i;
    for (i = 0; i < sizeof (commands) / sizeof (commands[0]); i++)
        if (strcmp (cmd, commands[i].name) == 0)
            break;
    if (i == sizeof (commands) / sizeof (commands[0]))
        return bad (error, "unknown command '%.64s'", cmd);
    a->cmd = commands[i].cmd;
    if (commands[i].needs_job && !a->job)
        return bad (error, "%s: --job ID is required", cmd);
    if (a->cmd == AGENT_HOUSEKEEPING && !retry_given)
        a->retry_busy = AGENT_RETRY_BUSY_HOUSEKEEPING;
    if (a->cmd == AGENT_REPORT && !a->pending)
        return bad (error, "report: --pending is required");
    if (have_uid != (vnis != NULL))
        return bad (error, "--uid and --vnis go together");
    a->have_facts = have_uid;
    if (a->report_later && a->cmd != AGENT_PROLOG)
        return bad (error, "--report-later: prolog only");
    if (a->run && (a->cmd != AGENT_PROLOG || a->have_facts))
        return bad (error, "--run: prolog only, and not with --uid/--vnis");
    return 0;
}

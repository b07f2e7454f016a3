/* args.c: the node agent's command line. */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
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

/* What the value parsers share while one command line is read. */
struct parse_state {
    bool have_uid;
    bool retry_given;
    const char *vnis;
};

struct agent_option;
typedef int (*agent_option_f) (const struct agent_option *o,
                               const char *value,
                               struct agent_args *a,
                               struct parse_state *st,
                               struct fmb_error *error);

/* The commands, as bits, for an option's 'cmds'. */
#define CMD(c)   (1u << (c))
#define CMDS_ALL 0x7fu

/* One option: its names, how its value is parsed and where it goes
 * ('field': the struct agent_args member that set_string and set_flag
 * fill), which commands take it and what the others are told. */
struct agent_option {
    const char *name;
    char short_name; /* 0: none */
    bool has_value;
    agent_option_f parse;
    size_t field;
    unsigned cmds;
    const char *only; /* the message when a command outside 'cmds' has it */
};

static int set_string (const struct agent_option *o,
                       const char *value,
                       struct agent_args *a,
                       struct parse_state *st,
                       struct fmb_error *error)
{
    (void)st;
    (void)error;
    *(const char **)((char *)a + o->field) = value;
    return 0;
}

static int set_flag (const struct agent_option *o,
                     const char *value,
                     struct agent_args *a,
                     struct parse_state *st,
                     struct fmb_error *error)
{
    (void)value;
    (void)st;
    (void)error;
    *(bool *)((char *)a + o->field) = true;
    return 0;
}

/* --help: print the usage, nothing else is looked at (1: stop here). */
static int set_help (const struct agent_option *o,
                     const char *value,
                     struct agent_args *a,
                     struct parse_state *st,
                     struct fmb_error *error)
{
    (void)o;
    (void)value;
    (void)st;
    (void)error;
    a->help = true;
    return 1;
}

static int parse_node (const struct agent_option *o,
                       const char *value,
                       struct agent_args *a,
                       struct parse_state *st,
                       struct fmb_error *error)
{
    (void)o;
    (void)st;
    if (!valid_node_name (value))
        return bad (
            error, "--node '%.64s': not a host name ([A-Za-z0-9._-]{1,64})", value);
    a->node = value;
    return 0;
}

static int parse_job (const struct agent_option *o,
                      const char *value,
                      struct agent_args *a,
                      struct parse_state *st,
                      struct fmb_error *error)
{
    (void)o;
    (void)st;
    if (!valid_job_id (value))
        return bad (
            error, "--job '%.64s': not a job id ([A-Za-z0-9._-]{1,128})", value);
    a->job = value;
    return 0;
}

static int parse_uid (const struct agent_option *o,
                      const char *value,
                      struct agent_args *a,
                      struct parse_state *st,
                      struct fmb_error *error)
{
    unsigned long v;
    (void)o;
    if (!parse_ulong (value, 0, UID_MAX_VALID, &v))
        return bad (error, "--uid %.64s: not a uid (0..4294967294)", value);
    a->uid = (uint32_t)v;
    st->have_uid = true;
    return 0;
}

static int parse_vnis_option (const struct agent_option *o,
                              const char *value,
                              struct agent_args *a,
                              struct parse_state *st,
                              struct fmb_error *error)
{
    (void)o;
    if (!parse_vnis (value, a))
        return bad (error,
                    "--vnis %.64s: 1-4 distinct VNIs of 1..65535, comma-separated",
                    value);
    st->vnis = value;
    return 0;
}

static int parse_ncores (const struct agent_option *o,
                         const char *value,
                         struct agent_args *a,
                         struct parse_state *st,
                         struct fmb_error *error)
{
    unsigned long v;
    (void)o;
    (void)st;
    if (!parse_ulong (value, 0, AGENT_NCORES_MAX, &v))
        return bad (error, "--ncores %.64s: not a core count", value);
    a->ncores = (long)v;
    return 0;
}

static int parse_tcs_option (const struct agent_option *o,
                             const char *value,
                             struct agent_args *a,
                             struct parse_state *st,
                             struct fmb_error *error)
{
    (void)o;
    (void)st;
    return parse_tcs (value, a, error);
}

static int parse_retry (const struct agent_option *o,
                        const char *value,
                        struct agent_args *a,
                        struct parse_state *st,
                        struct fmb_error *error)
{
    unsigned long v;
    (void)o;
    if (!parse_ulong (value, 0, AGENT_RETRY_BUSY_MAX, &v))
        return bad (error, "--retry-busy %.64s: seconds, 0..3600", value);
    a->retry_busy = (unsigned)v;
    st->retry_given = true;
    return 0;
}

static int parse_format (const struct agent_option *o,
                         const char *value,
                         struct agent_args *a,
                         struct parse_state *st,
                         struct fmb_error *error)
{
    (void)o;
    (void)st;
    if (strcmp (value, "shell") == 0)
        a->format = AGENT_FORMAT_SHELL;
    else if (strcmp (value, "json") == 0)
        a->format = AGENT_FORMAT_JSON;
    else if (strcmp (value, "slurm") == 0)
        a->format = AGENT_FORMAT_SLURM;
    else
        return bad (error, "--format %.64s: shell, json or slurm", value);
    return 0;
}

static int parse_run (const struct agent_option *o,
                      const char *value,
                      struct agent_args *a,
                      struct parse_state *st,
                      struct fmb_error *error)
{
    (void)o;
    (void)st;
    if (value[0] != '{' || strlen (value) > AGENT_RUN_MAX)
        return bad (error,
                    "--run: a RUN request, a JSON object of at most %d bytes",
                    AGENT_RUN_MAX);
    a->run = value;
    return 0;
}

#define FIELD(m) offsetof (struct agent_args, m)

/* Every option.  A new one: a row here (and a parser if its value is
 * more than a string or a flag), a member in struct agent_args, a line
 * in the usage (main.c). */
static const struct agent_option options[] = {
    {"config", 'c', true, set_string, FIELD (config), CMDS_ALL, NULL},
    {"libcxi", 0, true, set_string, FIELD (libcxi), CMDS_ALL, NULL},
    {"socket", 0, true, set_string, FIELD (socket), CMDS_ALL, NULL},
    {"broker-url", 0, true, set_string, FIELD (broker_url), CMDS_ALL, NULL},
    {"state-dir", 0, true, set_string, FIELD (state_dir), CMDS_ALL, NULL},
    {"node", 0, true, parse_node, 0, CMDS_ALL, NULL},
    {"job", 0, true, parse_job, 0, CMDS_ALL, NULL},
    {"uid", 0, true, parse_uid, 0, CMDS_ALL, NULL},
    {"vnis", 0, true, parse_vnis_option, 0, CMDS_ALL, NULL},
    {"ncores", 0, true, parse_ncores, 0, CMDS_ALL, NULL},
    {"tcs", 0, true, parse_tcs_option, 0, CMDS_ALL, NULL},
    {"retry-busy", 0, true, parse_retry, 0, CMDS_ALL, NULL},
    {"format", 0, true, parse_format, 0, CMDS_ALL, NULL},
    {"lnx", 0, false, set_flag, FIELD (lnx), CMDS_ALL, NULL},
    {"json", 0, false, set_flag, FIELD (json), CMDS_ALL, NULL},
    {"no-report", 0, false, set_flag, FIELD (no_report), CMDS_ALL, NULL},
    {"report-later",
     0,
     false,
     set_flag,
     FIELD (report_later),
     CMD (AGENT_PROLOG),
     "--report-later: prolog only"},
    {"all", 0, false, set_flag, FIELD (all), CMDS_ALL, NULL},
    {"pending", 0, false, set_flag, FIELD (pending), CMDS_ALL, NULL},
    {"run",
     0,
     true,
     parse_run,
     0,
     CMD (AGENT_PROLOG),
     "--run: prolog only, and not with --uid/--vnis"},
    {"dry-run", 'n', false, set_flag, FIELD (dry_run), CMDS_ALL, NULL},
    {"help", 'h', false, set_help, 0, CMDS_ALL, NULL},
};
#define NOPTIONS (sizeof (options) / sizeof (options[0]))

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

/* getopt_long's view of the table: 'val' is 256 + the row (a short name
 * maps back to its row in option_of). */
static void getopt_table (struct option *opts)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        opts[i] =
            (struct option){options[i].name,
                            options[i].has_value ? required_argument : no_argument,
                            NULL,
                            (int)(256 + i)};
    opts[NOPTIONS] = (struct option){NULL, 0, NULL, 0};
}

/* The row of getopt_long's answer c, or -1 (not an option of ours). */
static int option_of (int c)
{
    if (c >= 256 && c < 256 + (int)NOPTIONS)
        return c - 256;
    for (size_t i = 0; i < NOPTIONS; i++)
        if (c > 0 && options[i].short_name == c)
            return (int)i;
    return -1;
}

/* The checks that involve the command and several options, in the
 * order their messages have always come. */
static int check_command (const char *cmd,
                          const bool *given,
                          const struct parse_state *st,
                          struct agent_args *a,
                          struct fmb_error *error)
{
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
    if (a->cmd == AGENT_HOUSEKEEPING && !st->retry_given)
        a->retry_busy = AGENT_RETRY_BUSY_HOUSEKEEPING;
    if (a->cmd == AGENT_REPORT && !a->pending)
        return bad (error, "report: --pending is required");
    if (st->have_uid != (st->vnis != NULL))
        return bad (error, "--uid and --vnis go together");
    a->have_facts = st->have_uid;
    for (size_t o = 0; o < NOPTIONS; o++)
        if (given[o] && !(options[o].cmds & CMD (a->cmd)))
            return bad (error, "%s", options[o].only);
    if (a->run && a->have_facts)
        return bad (error, "--run: prolog only, and not with --uid/--vnis");
    return 0;
}

int agent_args_parse (int argc,
                      char **argv,
                      struct agent_args *a,
                      struct fmb_error *error)
{
    struct option opts[NOPTIONS + 1];
    struct parse_state st = {0};
    bool given[NOPTIONS] = {false};
    const char *cmd = NULL;
    int c;

    getopt_table (opts);
    memset (a, 0, sizeof (*a));
    a->ncores = -1;
    a->tcs = -1;
    a->retry_busy = AGENT_RETRY_BUSY_EPILOG;
    a->format = AGENT_FORMAT_SHELL;
    optind = 0; /* glibc: start afresh (the fuzzer calls this many times) */
    opterr = 0; /* our own messages, naming the argument */
    /* '-': the command word may come between options */
    while ((c = getopt_long (argc, argv, "-:c:nh", opts, NULL)) != -1) {
        int o = option_of (c);
        if (c == 1) {
            if (cmd)
                return bad (error, "unexpected argument '%.64s'", optarg);
            cmd = optarg;
        } else if (o >= 0) {
            int rc = options[o].parse (&options[o], optarg, a, &st, error);
            if (rc != 0)
                return rc < 0 ? -1 : 0; /* > 0: --help, nothing else */
            given[o] = true;
        } else if (c == ':')
            return bad (error, "%.64s: needs a value", argv[optind - 1]);
        else if (optopt > 0 && optopt < 256)
            return bad (error, "unknown option '-%c'", optopt);
        else
            return bad (error, "unknown option '%.64s'", argv[optind - 1]);
    }
    return check_command (cmd, given, &st, a, error);
}

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

struct agent_option;
typedef int (*agent_option_f) (const struct agent_option *o,
                               const char *value,
                               struct agent_args *a,
                               struct fmb_error *error);

/* The commands, as bits, for an option's 'cmds'. */
#define CMD(c)   (1u << (c))
#define CMDS_ALL 0x7fu /* every command but serve */
/* The run's setup (configuration, libcxi, broker, records), which the
 * node service's runs inherit */
#define CMDS_SETUP (CMDS_ALL | CMD (AGENT_SERVE))

/* One option: its names, how its value is parsed ('parse') and where it
 * goes ('field', 'size': the struct agent_args member), which commands
 * take it and what the others are told ('only').  'valid' and 'max'
 * bound the value of a name or a number, 'bad' says what is wrong
 * with one that is refused. */
struct agent_option {
    const char *name;
    char short_name; /* 0: none */
    bool has_value;
    agent_option_f parse;
    size_t field, size;
    bool (*valid) (const char *s);
    unsigned long max;
    const char *bad;
    unsigned cmds;
    const char *only;
};

#define FIELD(m) offsetof (struct agent_args, m), sizeof (((struct agent_args *)0)->m)

/* "--OPTION VALUE: what is wrong" ('VALUE' quoted for a name). */
static int bad_value (const struct agent_option *o,
                      const char *value,
                      struct fmb_error *error)
{
    const char *quote = o->valid ? "'" : "";
    return bad (error, "--%s %s%.64s%s: %s", o->name, quote, value, quote, o->bad);
}

static int set_string (const struct agent_option *o,
                       const char *value,
                       struct agent_args *a,
                       struct fmb_error *error)
{
    if (o->valid && !o->valid (value))
        return bad_value (o, value, error);
    *(const char **)((char *)a + o->field) = value;
    return 0;
}

/* A Flux job id in its f58 form ("ƒ" and base58, as Flux gives its
 * per-rank epilog FLUX_JOB_ID) into *id: 0, or -1 when 'text' is not
 * one.  Read here so that the epilog starts no `flux job id`. */
static int f58_decode (const char *text, uint64_t *id)
{
    static const char digits[] =
        "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    const unsigned char *s = (const unsigned char *)text;
    uint64_t n = 0;
    if (s[0] != 0xc6 || s[1] != 0x92 || !s[2]) /* U+0192, UTF-8 */
        return -1;
    for (s += 2; *s; s++) {
        const char *d = strchr (digits, *s);
        if (!d || n > (UINT64_MAX - (uint64_t)(d - digits)) / 58)
            return -1;
        n = n * 58 + (uint64_t)(d - digits);
    }
    *id = n;
    return 0;
}

/* --job: a job id, or a Flux f58 id taken in its decimal form (the
 * broker's). */
static int set_job (const struct agent_option *o,
                    const char *value,
                    struct agent_args *a,
                    struct fmb_error *error)
{
    uint64_t id;
    if (f58_decode (value, &id) < 0)
        return set_string (o, value, a, error);
    snprintf (a->job_dec, sizeof (a->job_dec), "%llu", (unsigned long long)id);
    a->job = a->job_dec;
    return 0;
}

static int set_flag (const struct agent_option *o,
                     const char *value,
                     struct agent_args *a,
                     struct fmb_error *error)
{
    (void)value;
    (void)error;
    *(bool *)((char *)a + o->field) = true;
    return 0;
}

/* A whole number 0..max into an unsigned, uint32_t or long member. */
_Static_assert(sizeof (unsigned) == sizeof (uint32_t), "set_number's members");
static int set_number (const struct agent_option *o,
                       const char *value,
                       struct agent_args *a,
                       struct fmb_error *error)
{
    unsigned long v;
    char *field = (char *)a + o->field;
    if (!parse_ulong (value, 0, o->max, &v))
        return bad_value (o, value, error);
    if (o->size == sizeof (long))
        *(long *)field = (long)v;
    else
        *(uint32_t *)field = (uint32_t)v;
    return 0;
}

/* --help: print the usage, nothing else is looked at (1: stop here). */
static int set_help (const struct agent_option *o,
                     const char *value,
                     struct agent_args *a,
                     struct fmb_error *error)
{
    (void)o;
    (void)value;
    (void)error;
    a->help = true;
    return 1;
}

static int set_vnis (const struct agent_option *o,
                     const char *value,
                     struct agent_args *a,
                     struct fmb_error *error)
{
    if (!parse_vnis (value, a))
        return bad_value (o, value, error);
    return 0;
}

static int set_tcs (const struct agent_option *o,
                    const char *value,
                    struct agent_args *a,
                    struct fmb_error *error)
{
    (void)o;
    return parse_tcs (value, a, error);
}

static int set_format (const struct agent_option *o,
                       const char *value,
                       struct agent_args *a,
                       struct fmb_error *error)
{
    if (strcmp (value, "shell") == 0)
        a->format = AGENT_FORMAT_SHELL;
    else if (strcmp (value, "json") == 0)
        a->format = AGENT_FORMAT_JSON;
    else if (strcmp (value, "slurm") == 0)
        a->format = AGENT_FORMAT_SLURM;
    else
        return bad_value (o, value, error);
    return 0;
}

static int set_run (const struct agent_option *o,
                    const char *value,
                    struct agent_args *a,
                    struct fmb_error *error)
{
    (void)o;
    if (value[0] != '{' || strlen (value) > AGENT_RUN_MAX)
        return bad (error,
                    "--run: a RUN request, a JSON object of at most %d bytes",
                    AGENT_RUN_MAX);
    a->run = value;
    return 0;
}

#define ALL                                                       \
    CMDS_ALL,                                                     \
        "serve takes only -c, --libcxi, --socket, --broker-url, " \
        "--state-dir, --node and --listen"
#define SETUP CMDS_SETUP, NULL

/* Every option.  A new one: a row here (and a parser if its value is
 * more than a string, a name, a number or a flag), a member in struct
 * agent_args, a line in the usage (main.c) and in
 * deploy/fmbroker.bash-completion. */
/* clang-format off */
static const struct agent_option options[] = {
    {"config",     'c', true,  set_string, FIELD (config),     NULL, 0, NULL, SETUP},
    {"libcxi",     0,   true,  set_string, FIELD (libcxi),     NULL, 0, NULL, SETUP},
    {"socket",     0,   true,  set_string, FIELD (socket),     NULL, 0, NULL, SETUP},
    {"broker-url", 0,   true,  set_string, FIELD (broker_url), NULL, 0, NULL, SETUP},
    {"state-dir",  0,   true,  set_string, FIELD (state_dir),  NULL, 0, NULL, SETUP},
    {"node",       0,   true,  set_string, FIELD (node),       valid_node_name, 0,
     "not a host name ([A-Za-z0-9._-]{1,64})", SETUP},
    {"job",        0,   true,  set_job,    FIELD (job),        valid_job_id, 0,
     "not a job id ([A-Za-z0-9._-]{1,128})", ALL},
    {"uid",        0,   true,  set_number, FIELD (uid),        NULL, UID_MAX_VALID,
     "not a uid (0..4294967294)", ALL},
    {"vnis",       0,   true,  set_vnis,   FIELD (vnis),       NULL, 0,
     "1-4 distinct VNIs of 1..65535, comma-separated", ALL},
    {"ncores",     0,   true,  set_number, FIELD (ncores),     NULL, AGENT_NCORES_MAX,
     "not a core count", ALL},
    {"tcs",        0,   true,  set_tcs,    FIELD (tcs),        NULL, 0, NULL, ALL},
    {"retry-busy", 0,   true,  set_number, FIELD (retry_busy), NULL, AGENT_RETRY_BUSY_MAX,
     "seconds, 0..3600", ALL},
    {"format",     0,   true,  set_format, FIELD (format),     NULL, 0,
     "shell, json or slurm", ALL},
    {"lnx",        0,   false, set_flag,   FIELD (lnx),        NULL, 0, NULL, ALL},
    {"json",       0,   false, set_flag,   FIELD (json),       NULL, 0, NULL, ALL},
    {"no-report",  0,   false, set_flag,   FIELD (no_report),  NULL, 0, NULL, ALL},
    {"report-later", 0, false, set_flag,   FIELD (report_later), NULL, 0, NULL,
     CMD (AGENT_PROLOG), "--report-later: prolog only"},
    {"all",        0,   false, set_flag,   FIELD (all),        NULL, 0, NULL, ALL},
    {"pending",    0,   false, set_flag,   FIELD (pending),    NULL, 0, NULL, ALL},
    {"run",        0,   true,  set_run,    FIELD (run),        NULL, 0, NULL,
     CMD (AGENT_PROLOG), "--run: prolog only, and not with --uid/--vnis"},
    {"listen",     0,   true,  set_string, FIELD (listen),     NULL, 0, NULL,
     CMD (AGENT_SERVE), "--listen: serve only"},
    {"dry-run",    'n', false, set_flag,   FIELD (dry_run),    NULL, 0, NULL, ALL},
    {"help",       'h', false, set_help,   FIELD (help),       NULL, 0, NULL, ALL},
};
/* clang-format on */
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
    {"serve", AGENT_SERVE, false},
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

/* Was the option 'name' given (and its value good)? */
static bool was_given (const bool *given, const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strcmp (options[i].name, name) == 0)
            return given[i];
    return false;
}

/* The checks that involve the command and several options, in the
 * order their messages have always come. */
static int check_command (const char *cmd,
                          const bool *given,
                          struct agent_args *a,
                          struct fmb_error *error)
{
    if (!cmd)
        return bad (
            error,
            "no command (prolog, epilog, housekeeping, env, list, clean, report, "
            "serve)");
    size_t i;
    for (i = 0; i < sizeof (commands) / sizeof (commands[0]); i++)
        if (strcmp (cmd, commands[i].name) == 0)
            break;
    if (i == sizeof (commands) / sizeof (commands[0]))
        return bad (error, "unknown command '%.64s'", cmd);
    a->cmd = commands[i].cmd;
    if (commands[i].needs_job && !a->job)
        return bad (error, "%s: --job ID is required", cmd);
    if (a->cmd == AGENT_HOUSEKEEPING && !was_given (given, "retry-busy"))
        a->retry_busy = AGENT_RETRY_BUSY_HOUSEKEEPING;
    if (a->cmd == AGENT_REPORT && !a->pending)
        return bad (error, "report: --pending is required");
    if (was_given (given, "uid") != was_given (given, "vnis"))
        return bad (error, "--uid and --vnis go together");
    a->have_facts = was_given (given, "uid");
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
            int rc = options[o].parse (&options[o], optarg, a, error);
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
    return check_command (cmd, given, a, error);
}

bool agent_args_have_command (int argc, char **argv)
{
    struct option opts[NOPTIONS + 1];
    int c;
    getopt_table (opts);
    optind = 0;
    opterr = 0;
    while ((c = getopt_long (argc, argv, "-:c:nh", opts, NULL)) != -1)
        if (c == 1)
            return true;
    return false;
}

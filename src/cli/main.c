/* fmbroker: the admin and hook CLI.  Talks to fmbrokerd over its Unix
 * socket; tables for people, --json for programs.
 *
 * Exit status (cli.h): 0 ok; 1 refused or failed; 3 usage or
 * configuration; 75 (EX_TEMPFAIL) the broker unreachable or answering
 * "not now": try again later.  `status` is a monitoring check and keeps
 * the Nagios plugin codes (1 degraded, 2 CRITICAL where the others say
 * 75).  Hooks (run-job, end-job, step-clean) use a short timeout and are
 * meant to be called so that a failure never holds a job (the deploy/
 * hooks ignore it, or retry a 75).  Every line the CLI prints on stderr
 * starts with "fmbroker: ", getopt's too (its argv[0] is made so).
 *
 * "--help" anywhere in a subcommand's arguments prints its usage and
 * exits 0 before anything is parsed or sent.  Numbers are parsed whole
 * (no "12abc", no "1e3", no empty string) and job ids checked, so a bad
 * argument is refused before any request.
 */
/* This file: the command table (name, function, one-line help, usage),
 * the global options and the dispatch; each command family is a file of
 * its own (README). */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "argcheck.h"
#include "cli.h"
#include "events.h"
#include "hooks.h"
#include "jobs.h"
#include "status.h"

static const struct {
    const char *name;
    int (*fn) (struct cli *, int, char **);
    const char *help;
    const char *usage; /* printed by "fmbroker NAME --help" */
    bool hook;         /* one call, bounded as a whole (arm_deadline) */
} cmds[] = {
    {"status",
     cmd_status,
     "the broker's state (a monitoring check: exit 0, 1, 2, 3)",
     "Usage: fmbroker status [--json]\n"
     "The broker's state: FM session, jobs, VNIs, hwcoll, outbox, events.\n"
     "Exit status (for monitoring, as Nagios plugins): 0 all well; 1 degraded\n"
     "(each reason on a 'degraded:' line: the fabric-manager session not up,\n"
     "the VNI pool full, ...) or the broker refused the check; 2 cannot reach\n"
     "the broker (or it answered 5xx); 3 the check could not run as asked\n"
     "(usage or configuration error).\n",
     false},
    {"metrics",
     cmd_metrics,
     "the broker's metrics (Prometheus text)",
     "Usage: fmbroker metrics\n"
     "Print GET /metrics: every metric family with its HELP and TYPE.\n",
     false},
    {"jobs",
     cmd_jobs,
     "list jobs [--state S] [--user U] [--limit N] [-o COLS] [--noheader]",
     "Usage: fmbroker jobs [--state S] [--user U] [--limit N] [-o COLS] [--noheader]\n"
     "List jobs (numeric ids by value, then the others by name).\n"
     "  -s, --state S     active, releasing, released or lost\n"
     "  -u, --user U      only this user's jobs (name or uid)\n"
     "  -l, --limit N     at most N jobs (1-100000; 100), page after page\n"
     "  -o, --output COLS the columns, comma-separated, from\n"
     "                    " JOBS_DEFAULT_COLS "\n"
     "  -n, --noheader    no header line\n",
     false},
    {"job",
     cmd_job,
     "job show JOB | job release JOB [--force]",
     "Usage: fmbroker job show JOB\n"
     "       fmbroker job release JOB [--force]\n"
     "Show one job (VNIs, hwcoll, environment, node reports), or release it\n"
     "(CLEANUP); --force frees its VNIs without waiting for node reports.\n",
     false},
    {"step-clean",
     cmd_step_clean,
     "release a step's multicast trees [JOB STEP]",
     "Usage: fmbroker step-clean [JOB STEP]\n"
     "Release a step's multicast trees.  Without arguments: the job and step of\n"
     "FI_CXI_COLL_JOB_ID / FI_CXI_COLL_JOB_STEP_ID, authorised by\n"
     "FI_CXI_COLL_MCAST_TOKEN.\n",
     true},
    {"events",
     cmd_events,
     "the event log [--after SEQ] [--follow] [--count N]",
     "Usage: fmbroker events [--after SEQ] [--follow] [--count N]\n"
     "Print events after SEQ (times in ISO 8601 with the offset); --follow waits\n"
     "for more (stop after N with --count).\n",
     false},
    {"reconcile",
     cmd_reconcile,
     "reconcile with the fabric manager now [--reap-foreign] (admin)",
     "Usage: fmbroker reconcile [--reap-foreign]\n"
     "Ask the broker to reconcile with the fabric manager now (admin).  FM\n"
     "reservations with this cluster's prefix that the broker has no record of\n"
     "are only reported (foreign_reservation events); --reap-foreign deletes\n"
     "them in this pass.\n",
     false},
    {"vni",
     cmd_vni,
     "vni list: VNIs held or quarantined",
     "Usage: fmbroker vni list\n"
     "VNIs held or quarantined, with the nodes a quarantine waits for.\n",
     false},
    {"run-job",
     cmd_run_job,
     "RUN hook: run-job JOB --uid U (--nodes L | --node-count N)",
     "Usage: fmbroker run-job JOB --uid UID [--user NAME] (--nodes HOSTLIST | "
     "--node-count N)\n"
     "                        [--ncores N] [--hwcoll auto|on|off] [--vni-count N] "
     "[--tcs LIST] [--quiet]\n"
     "RUN a job (resource-manager hook); prints its environment as export lines.\n"
     "--tcs: the job's traffic classes (names or a mask such as 0x6), within the\n"
     "broker's [cxi] allowed_tcs; default [cxi] tcs.\n"
     "HOSTLIST may be compressed: nid[001-004],login1.\n",
     true},
    {"end-job",
     cmd_end_job,
     "CLEANUP hook: end-job JOB",
     "Usage: fmbroker end-job JOB\n"
     "CLEANUP a job (resource-manager hook); 404 is fine.\n",
     true},
};

/* "--json" among a subcommand's arguments (before "--") is the global
 * option: taken out, so `fmbroker status --json` is `fmbroker --json
 * status`.  Returns the new argc. */
static int take_json (struct cli *cli, int argc, char **argv)
{
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--") == 0) {
            while (i < argc)
                argv[n++] = argv[i++];
            break;
        }
        if (strcmp (argv[i], "--json") == 0)
            cli->json = true;
        else
            argv[n++] = argv[i];
    }
    argv[n] = NULL;
    return n;
}

/* "--help" or "-h" among a subcommand's arguments (before "--"). */
static bool wants_help (int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
        if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0)
            return true;
    return false;
}

static void usage (FILE *f)
{
    fprintf (
        f,
        "Usage: fmbroker [-c CONFIG] [--socket PATH | --broker-url URL[,URL...]]\n"
        "                [--json] [--timeout S] COMMAND [ARGS]\n"
        "Administer fmbrokerd and call it from resource-manager hooks.\n"
        "--broker-url (or [api] broker_url): the broker's TLS listener, or an ordered\n"
        "list of brokers (active, standby) tried in turn within the "
        "timeout.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof (cmds) / sizeof (cmds[0]); i++)
        fprintf (f, "  %-11s %s\n", cmds[i].name, cmds[i].help);
    fprintf (
        f,
        "\nOptions:\n"
        "  -c, --config FILE         configuration (default " FMB_CONFIG_PATH
        ")\n"
        "  -s, --socket PATH         the broker's socket (default [api] socket)\n"
        "  -b, --broker-url URL[,URL...]  replaces [api] broker_url\n"
        "  -j, --json                the broker's JSON, for scripts (also after "
        "the\n"
        "                            command: fmbroker status --json)\n"
        "  -t, --timeout S           bound each call to S seconds (1-3600; 10);\n"
        "                            run-job, end-job, step-clean: the whole run,\n"
        "                            exit 75 at S + 1\n"
        "  -h, --help                this help ('fmbroker COMMAND --help': a "
        "command's)\n"
        "  -V, --version             print the version\n"
        "\nExit status, every command: 0 ok; 1 the broker refused (a 4xx) or the\n"
        "command failed; 3 usage or configuration error (nothing sent);\n"
        "75 the broker could not be reached or answered 408, 429 or 5xx: try\n"
        "again later.  status keeps the Nagios codes (1 degraded, 2 where the\n"
        "others say 75).  Every error line starts with 'fmbroker: '.\n");
}

/* After a usage error getopt or a check has named: where to look. */
static int usage_hint (void)
{
    fprintf (stderr, "fmbroker: 'fmbroker --help' lists the commands and options\n");
    return EXIT_USAGE;
}

/* The configuration (as a client reads it) and the broker to call. */
static int load_target (struct cli *cli)
{
    struct fmb_error e;
    fmb_config_defaults (&cli->cfg);
    const char *path =
        cli->config ? cli->config
                    : (access (FMB_CONFIG_PATH, R_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if ((path && fmb_config_load_client (&cli->cfg, path, &e) < 0) ||
        (cli->broker_url &&
         api_config_broker_url (&cli->cfg, cli->broker_url, &e) < 0)) {
        fprintf (stderr, "fmbroker: %s\n", e.text);
        return -1;
    }
    api_target_init (&cli->target, &cli->cfg, cli->socket);
    return 0;
}

/* The options before the command; -1 to go on, else the exit status
 * (--help, --version, a usage error). */
static int global_options (struct cli *cli, int argc, char **argv)
{
    static const struct option o[] = {{"config", 1, 0, 'c'},
                                      {"socket", 1, 0, 's'},
                                      {"broker-url", 1, 0, 'b'},
                                      {"json", 0, 0, 'j'},
                                      {"timeout", 1, 0, 't'},
                                      {"help", 0, 0, 'h'},
                                      {"version", 0, 0, 'V'},
                                      {0}};
    int c;
    argv[0] = (char *)"fmbroker"; /* getopt's messages: "fmbroker: ..." */
    while ((c = getopt_long (argc, argv, "+c:s:b:jt:hV", o, NULL)) != -1) {
        switch (c) {
        case 'c':
            cli->config = optarg;
            break;
        case 'b':
            cli->broker_url = optarg;
            break;
        case 's':
            cli->socket = optarg;
            break;
        case 'j':
            cli->json = true;
            break;
        case 't':
            if (!cli_parse_number ("--timeout", optarg, 1, 3600, &cli->timeout))
                return EXIT_USAGE;
            break;
        case 'h':
            usage (stdout);
            return 0;
        case 'V':
            printf ("fmbroker %s\n", FMB_VERSION);
            return 0;
        default:
            return usage_hint ();
        }
    }
    return -1;
}

/* A hook's call is bounded as a whole: the client library bounds the
 * connection, the TLS handshake and the exchange, but the name lookup
 * has no timeout of its own (apiclient.h), and a resolver that never
 * answers would hold the hook, and with it the job's launch or end,
 * until the resource manager kills it.  One second
 * past --timeout the run ends as one that found no broker (75: the hooks
 * retry it), saying so; the hooks need no timeout(1), a process more on
 * every job's launch and end. */
static char deadline_text[1024];
static size_t deadline_len;

static void deadline_passed (int sig)
{
    (void)sig;
    ssize_t w = write (STDERR_FILENO, deadline_text, deadline_len);
    (void)w;
    _exit (EXIT_TEMPFAIL);
}

static void arm_deadline (const char *cmd, const struct cli *cli)
{
    unsigned s = (unsigned)cli->timeout + 1;
    (void)snprintf (deadline_text,
                    sizeof (deadline_text),
                    "fmbroker: %s: no answer from the broker at %s within %u s (%s)",
                    cmd,
                    cli->target.url ? cli->target.url : cli->target.socket,
                    s,
                    cli->target.url
                        ? "name lookup, connection, TLS handshake and answer"
                        : "connection and answer");
    deadline_len = strlen (deadline_text); /* < its size: room for the end */
    deadline_text[deadline_len++] = '\n';
    struct sigaction sa = {.sa_handler = deadline_passed};
    sigemptyset (&sa.sa_mask);
    sigaction (SIGALRM, &sa, NULL);
    /* slurmctld runs its hooks with SIGALRM blocked (slurmscriptd
     * inherits its mask), and a shell passes the mask on */
    sigset_t alrm;
    sigemptyset (&alrm);
    sigaddset (&alrm, SIGALRM);
    sigprocmask (SIG_UNBLOCK, &alrm, NULL);
    alarm (s);
}

int main (int argc, char **argv)
{
    static struct cli cli_run = {.timeout = 10}; /* large: not on the stack */
    struct cli *cli = &cli_run;
    int done = global_options (cli, argc, argv);
    if (done >= 0)
        return done;
    if (optind >= argc) {
        fprintf (stderr, "fmbroker: no command given\n");
        return usage_hint ();
    }
    size_t which = 0, ncmds = sizeof (cmds) / sizeof (cmds[0]);
    while (which < ncmds && strcmp (argv[optind], cmds[which].name) != 0)
        which++;
    if (which == ncmds) {
        fprintf (stderr, "fmbroker: unknown command '%s'\n", argv[optind]);
        return usage_hint ();
    }
    if (wants_help (argc - optind, argv + optind)) {
        fputs (cmds[which].usage, stdout);
        return 0;
    }
    if (load_target (cli) < 0)
        return EXIT_USAGE;
    /* The command's argv[0] is what its getopt puts before a message:
     * "fmbroker: jobs: unrecognized option '--bogus'". */
    char prog[64];
    snprintf (prog, sizeof (prog), "fmbroker: %s", cmds[which].name);
    argv[optind] = prog;
    if (cmds[which].hook)
        arm_deadline (cmds[which].name, cli);
    int rc = cmds[which].fn (
        cli, take_json (cli, argc - optind, argv + optind), argv + optind);
    api_target_clear (&cli->target);
    return rc;
}

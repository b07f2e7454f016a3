/* test_agent_args.c: fmbroker-cxi's command line, as prolog and epilog
 * scripts build it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "testutil.h"

/* Parse a space-separated command line (no quoting needed here). */
static int parse (const char *line, struct agent_args *a, struct fmb_error *e)
{
    static char buf[1024];
    char *argv[32];
    int argc = 0;
    snprintf (buf, sizeof (buf), "fmbroker-cxi %s", line);
    for (char *save = NULL, *t = strtok_r (buf, " ", &save); t && argc < 31;
         t = strtok_r (NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    e->text[0] = '\0';
    return agent_args_parse (argc, argv, a, e);
}

static void prolog_with_facts (void **state)
{
    (void)state;
    struct agent_args a;
    struct fmb_error e;
    assert_int_equal (
        parse ("-c /etc/x.conf prolog --job 42 --uid 1000 --vnis 1024,1025 "
               "--ncores 8 --tcs 0xa --node nid001 --dry-run",
               &a,
               &e),
        0);
    assert_int_equal (a.cmd, AGENT_PROLOG);
    assert_string_equal (a.config, "/etc/x.conf");
    assert_string_equal (a.job, "42");
    assert_true (a.have_facts);
    assert_int_equal (a.uid, 1000);
    assert_int_equal (a.nvnis, 2);
    assert_int_equal (a.vnis[0], 1024);
    assert_int_equal (a.vnis[1], 1025);
    assert_int_equal (a.ncores, 8);
    assert_int_equal (a.tcs, 0xa);
    assert_string_equal (a.node, "nid001");
    assert_true (a.dry_run);
}

static void defaults_and_names (void **state)
{
    (void)state;
    struct agent_args a;
    struct fmb_error e;
    assert_int_equal (parse ("epilog --job j.1", &a, &e), 0);
    assert_int_equal (a.cmd, AGENT_EPILOG);
    assert_false (a.have_facts);
    assert_int_equal (a.ncores, -1);
    assert_int_equal (a.tcs, -1);
    assert_int_equal (a.retry_busy, 5);
    assert_int_equal (a.format, AGENT_FORMAT_SHELL);
    /* options after the command, TC names as [cxi] tcs takes them */
    assert_int_equal (parse ("env --format slurm --job 7 --lnx", &a, &e), 0);
    assert_int_equal (a.format, AGENT_FORMAT_SLURM);
    assert_true (a.lnx);
    assert_int_equal (
        parse ("prolog --job 7 --uid 0 --vnis 65535 --tcs BEST_EFFORT,LOW_LATENCY",
               &a,
               &e),
        0);
    assert_int_equal (a.tcs, 0xa);
    /* housekeeping: the same destruction, for minutes */
    assert_int_equal (parse ("housekeeping --job 7", &a, &e), 0);
    assert_int_equal (a.cmd, AGENT_HOUSEKEEPING);
    assert_int_equal (a.retry_busy, 300);
    assert_int_equal (parse ("housekeeping --retry-busy 2 --job 7", &a, &e), 0);
    assert_int_equal (a.retry_busy, 2);
    assert_int_equal (parse ("report --pending", &a, &e), 0);
    assert_int_equal (a.cmd, AGENT_REPORT);
    assert_int_equal (parse ("clean --all -n", &a, &e), 0);
    assert_true (a.all && a.dry_run);
    assert_int_equal (parse ("list --json", &a, &e), 0);
    assert_int_equal (a.cmd, AGENT_LIST);
    assert_int_equal (parse ("--help", &a, &e), 0);
    assert_true (a.help);
    /* --help stops the parse: what follows is not looked at */
    assert_int_equal (parse ("-h --frobnicate", &a, &e), 0);
    assert_true (a.help);
    assert_int_equal (parse ("prolog --job 7 --run {} --report-later", &a, &e), 0);
    assert_string_equal (a.run, "{}");
    assert_true (a.report_later);
    /* the node service: its runs' setup and its socket */
    assert_int_equal (parse ("-c /f --state-dir /s serve --listen /s/x.sock", &a, &e),
                      0);
    assert_int_equal (a.cmd, AGENT_SERVE);
    assert_string_equal (a.listen, "/s/x.sock");
    assert_string_equal (a.state_dir, "/s");
    /* a Flux f58 id (its per-rank epilog's FLUX_JOB_ID) in decimal */
    assert_int_equal (parse ("epilog --job \xc6\x92"
                             "2X8bJv2ob",
                             &a,
                             &e),
                      0);
    assert_string_equal (a.job, "194591606449930");
    assert_int_equal (parse ("epilog --job \xc6\x92"
                             "jpXCZedGfVQ",
                             &a,
                             &e),
                      0);
    assert_string_equal (a.job, "18446744073709551615");
    assert_int_equal (parse ("epilog --job \xc6\x92"
                             "1",
                             &a,
                             &e),
                      0);
    assert_string_equal (a.job, "0");
    /* ... and the node it serves (its reports, its token's %n) */
    assert_int_equal (parse ("serve --node n7", &a, &e), 0);
    assert_string_equal (a.node, "n7");
}

/* Each refused line and a word its message must contain. */
static void refuses_with_a_reason (void **state)
{
    (void)state;
    const struct {
        const char *line, *says;
    } cases[] = {
        {"", "no command"},
        {"reboot", "unknown command 'reboot'"},
        {"prolog", "--job ID is required"},
        {"prolog --job ../etc", "--job '../etc'"},
        {"prolog --job 42 --uid 1000", "go together"},
        {"prolog --job 42 --vnis 1024", "go together"},
        {"prolog --job 42 --uid 1000 --vnis 0", "--vnis 0"},
        {"prolog --job 42 --uid 1000 --vnis 65536", "--vnis"},
        {"prolog --job 42 --uid 1000 --vnis 5abc", "--vnis 5abc"},
        {"prolog --job 42 --uid 1000 --vnis 1,2,3,4,5", "1-4 distinct"},
        {"prolog --job 42 --uid 1000 --vnis 7,7", "distinct"},
        {"prolog --job 42 --uid 1000 --vnis 7,,8", "--vnis"},
        {"prolog --job 42 --uid 1000 --vnis 7,", "--vnis"},
        {"prolog --job 42 --uid -1 --vnis 7", "--uid -1"},
        {"prolog --job 42 --uid 4294967295 --vnis 7", "not a uid"},
        {"prolog --job 42 --ncores 2x", "--ncores 2x"},
        {"prolog --job 42 --tcs 0xZZ", "--tcs 0xZZ"},
        {"prolog --job 42 --tcs 0x10", "0x1..0xf"},
        {"prolog --job 42 --tcs FAST", "unknown traffic class"},
        {"epilog --job 42 --retry-busy 99999", "0..3600"},
        {"epilog --job 42 --retry-busy 5s", "--retry-busy"},
        {"housekeeping", "--job ID is required"},
        {"report", "--pending is required"},
        {"env --job 42 --format xml", "shell, json or slurm"},
        {"prolog --job 42 --node -bad", "not a host name"},
        {"prolog --job 42 --frobnicate", "unknown option '--frobnicate'"},
        {"prolog --job 42 -q", "unknown option '-q'"},
        {"prolog --job", "needs a value"},
        {"prolog epilog --job 42", "unexpected argument 'epilog'"},
        /* the options the table gives to one command only */
        {"epilog --job 42 --report-later", "--report-later: prolog only"},
        {"env --job 42 --run {}", "--run: prolog only"},
        {"prolog --job 42 --run {} --uid 1 --vnis 7", "not with --uid/--vnis"},
        {"prolog --job 42 --run [1]", "a RUN request"},
        {"list --lnx=1", "unknown option '--lnx=1'"},
        /* past 2^64, a digit not in f58, nothing after the sign */
        {"epilog --job \xc6\x92"
         "jpXCZedGfVR",
         "not a job id"},
        {"epilog --job \xc6\x92"
         "0",
         "not a job id"},
        {"epilog --job \xc6\x92", "not a job id"},
        /* the service takes its runs' setup only: a job is the caller's */
        {"serve --job 42", "serve takes only -c, --libcxi"},
        {"serve --ncores 4", "serve takes only"},
        {"prolog --job 42 --listen /x", "--listen: serve only"},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        struct agent_args a;
        struct fmb_error e;
        errno = 0;
        if (parse (cases[i].line, &a, &e) == 0)
            fail_msg ("'%s': accepted", cases[i].line);
        if (errno != EINVAL || !strstr (e.text, cases[i].says))
            fail_msg ("'%s': errno %d, message '%s' lacks '%s'",
                      cases[i].line,
                      errno,
                      e.text,
                      cases[i].says);
    }
}

/* A long hostile argument is quoted, not copied whole into the message. */
static void long_arguments_are_cut_in_messages (void **state)
{
    (void)state;
    char line[600];
    struct agent_args a;
    struct fmb_error e;
    snprintf (line, sizeof (line), "env --job 42 --format %0500d", 7);
    assert_int_equal (parse (line, &a, &e), -1);
    assert_true (strlen (e.text) < 200);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (prolog_with_facts),
        cmocka_unit_test (defaults_and_names),
        cmocka_unit_test (refuses_with_a_reason),
        cmocka_unit_test (long_arguments_are_cut_in_messages),
    };
    return cmocka_run_group_tests_name ("agent_args", tests, NULL, NULL);
}

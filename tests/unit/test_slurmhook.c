/* test_slurmhook.c: fmbroker-cxi run by slurmd as Prolog=/Epilog=: the
 * command line it builds from Slurm's variables (and only under them),
 * the RUN request every node builds alike, and the prolog's failure kept
 * in the job's record instead of failing to slurmd (which would drain
 * the node for a job's problem). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobrecord.h"
#include "slurmhook.h"
#include "testutil.h"

static void slurm_env (const char *ctx)
{
    setenv ("SLURM_SCRIPT_CONTEXT", ctx, 1);
    setenv ("SLURM_JOB_ID", "77", 1);
    setenv ("SLURMD_NODENAME", "n2", 1);
    setenv ("SLURM_JOB_UID", "65534", 1);
    setenv ("SLURM_JOB_USER", "nobody", 1);
    setenv ("SLURM_NODELIST", "n[1-2]", 1);
    unsetenv ("SPANK_FMB_RUN");
    unsetenv ("SPANK_FMB_HWCOLL");
}

static char *joined (const struct slurm_hook *h)
{
    static char out[4096];
    out[0] = '\0';
    for (int i = 0; i < h->argc; i++)
        snprintf (out + strlen (out),
                  sizeof (out) - strlen (out),
                  "%s%s",
                  i ? " " : "",
                  h->argv[i]);
    return out;
}

static void prolog_and_epilog_command_lines (void **state)
{
    struct slurm_hook h;
    struct fmb_error e;
    char *argv[] = {"fmbroker-cxi", "-c", "/x.conf", NULL};
    (void)state;
    slurm_env ("prolog_slurmd");
    /* the user's srun may set SPANK_FMB_*: it decides no RUN (the node's
     * configuration does, through slurm_hook_run) */
    setenv ("SPANK_FMB_RUN", "node", 1);
    assert_int_equal (slurm_hook_args (3, argv, NULL, &h, &e), 0);
    assert_true (h.active && h.prolog);
    assert_string_equal (h.job, "77");
    assert_string_equal (
        joined (&h),
        "fmbroker-cxi -c /x.conf prolog --job 77 --node n2 --report-later");
    /* the RUN request, when the node's configuration says it makes it */
    setenv ("SPANK_FMB_HWCOLL", "off", 1);
    assert_int_equal (slurm_hook_run (&h, &e), 0);
    assert_string_equal (h.run,
                         "{\"uid\":65534,\"nodes\":\"n[1-2]\",\"user\":\"nobody\","
                         "\"hwcoll\":\"off\"}");
    slurm_hook_clear (&h);
    slurm_env ("epilog_slurmd");
    assert_int_equal (slurm_hook_args (1, argv, NULL, &h, &e), 0);
    assert_true (h.active && !h.prolog);
    assert_string_equal (joined (&h),
                         "fmbroker-cxi epilog --job 77 --node n2 --retry-busy 30");
    slurm_hook_clear (&h);
}

/* A command given (a site's own prolog script calling the agent), or no
 * slurmd: the command line is the caller's.  Option values that look like
 * commands are values. */
static void only_slurmd_without_a_command (void **state)
{
    struct slurm_hook h;
    struct fmb_error e;
    char *with_cmd[] = {"fmbroker-cxi", "--state-dir", "/s", "env", "--job", "1", NULL};
    char *values[] = {"fmbroker-cxi", "-c", "prolog", "--state-dir", "env", NULL};
    char *bare[] = {"fmbroker-cxi", NULL};
    (void)state;
    slurm_env ("prolog_slurmd");
    assert_int_equal (slurm_hook_args (6, with_cmd, NULL, &h, &e), 0);
    assert_false (h.active);
    slurm_hook_clear (&h);
    assert_int_equal (slurm_hook_args (5, values, NULL, &h, &e), 0);
    assert_true (h.active);
    assert_string_equal (
        joined (&h),
        "fmbroker-cxi -c prolog --state-dir env prolog --job 77 --node n2 "
        "--report-later");
    slurm_hook_clear (&h);
    slurm_env ("prolog_slurmctld"); /* the controller's: not ours to run */
    assert_int_equal (slurm_hook_args (1, bare, NULL, &h, &e), -1);
    assert_false (h.active);
    assert_non_null (strstr (e.text, "only slurmd's Prolog= and Epilog="));
    unsetenv ("SLURM_SCRIPT_CONTEXT");
    assert_int_equal (slurm_hook_args (1, bare, NULL, &h, &e), 0);
    assert_false (h.active);
    /* slurmd's context without its variables: said, not guessed */
    slurm_env ("prolog_slurmd");
    unsetenv ("SLURMD_NODENAME");
    assert_int_equal (slurm_hook_args (1, bare, NULL, &h, &e), -1);
    assert_true (h.active && h.prolog);
    assert_non_null (strstr (e.text, "without SLURM_JOB_ID and SLURMD_NODENAME"));
    slurm_hook_clear (&h);
    /* a job id that is not one is refused by the command line's checks,
     * and is no job id for the record either */
    slurm_env ("prolog_slurmd");
    setenv ("SLURM_JOB_ID", "../7", 1);
    struct agent_args a;
    assert_int_equal (slurm_hook_args (1, bare, NULL, &h, &e), 0);
    assert_null (h.job);
    assert_int_equal (agent_args_parse (h.argc, h.argv, &a, &e), -1);
    assert_non_null (strstr (e.text, "not a job id"));
    slurm_hook_clear (&h);
    /* a uid that is not one makes no RUN request */
    slurm_env ("prolog_slurmd");
    setenv ("SLURM_JOB_UID", "x", 1);
    assert_int_equal (slurm_hook_args (1, bare, NULL, &h, &e), 0);
    assert_int_equal (slurm_hook_run (&h, &e), -1);
    assert_non_null (strstr (e.text, "SLURM_JOB_UID 'x' is not a uid"));
    slurm_hook_clear (&h);
}

/* The node service's runs take Slurm's variables from the request, not
 * from the service's own environment (which has none, or stale ones). */
static void variables_from_the_node_services_request (void **state)
{
    struct slurm_hook h;
    struct fmb_error e;
    char *bare[] = {"fmbroker-cxi", NULL};
    char *env[] = {"SLURM_SCRIPT_CONTEXT=prolog_slurmd",
                   "SLURM_JOB_ID=91",
                   "SLURMD_NODENAME=n1",
                   "SLURM_JOB_UID=1001",
                   "SLURM_NODELIST=n[1-4]",
                   NULL};
    char *no_node[] = {"SLURM_SCRIPT_CONTEXT=prolog_slurmd", "SLURM_JOB_ID=92", NULL};
    (void)state;
    slurm_env ("epilog_slurmd"); /* the process's own: not these */
    assert_int_equal (slurm_hook_args (1, bare, env, &h, &e), 0);
    assert_true (h.active && h.prolog);
    assert_string_equal (joined (&h),
                         "fmbroker-cxi prolog --job 91 --node n1 --report-later");
    assert_int_equal (slurm_hook_run (&h, &e), 0);
    assert_string_equal (h.run, "{\"uid\":1001,\"nodes\":\"n[1-4]\"}");
    assert_null (slurm_hook_var (&h, "SLURM_JOB_USER")); /* not in the request */
    slurm_hook_clear (&h);
    assert_int_equal (slurm_hook_args (1, bare, no_node, &h, &e), -1);
    assert_non_null (strstr (e.text, "without SLURM_JOB_ID and SLURMD_NODENAME"));
    slurm_hook_clear (&h);
    /* a step's setup: this node's CPUs from the step's credential size
     * its services; the RUN carries none */
    char *setup[] = {"SLURM_SCRIPT_CONTEXT=prolog_slurmd",
                     "SLURM_JOB_ID=93",
                     "SLURMD_NODENAME=n2",
                     "SLURM_JOB_UID=1001",
                     "SLURM_NODELIST=n[1-2]",
                     "FMB_SETUP=1",
                     "FMB_NCORES=6",
                     NULL};
    assert_int_equal (slurm_hook_args (1, bare, setup, &h, &e), 0);
    assert_string_equal (
        joined (&h),
        "fmbroker-cxi prolog --job 93 --node n2 --report-later --ncores 6");
    assert_int_equal (slurm_hook_run (&h, &e), 0);
    assert_string_equal (h.run, "{\"uid\":1001,\"nodes\":\"n[1-2]\"}");
    slurm_hook_clear (&h);
}

/* Every node builds the same RUN request from Slurm's words; values that
 * are not the options' (they come from the user's srun) are left out. */
static void run_request_from_slurms_words (void **state)
{
    struct fmb_error e;
    (void)state;
    char *r =
        slurm_run_request (65534, "nobody", "n[1-2]", "4(x2)", "off", "2", "0xa", &e);
    assert_string_equal (
        r,
        "{\"uid\":65534,\"nodes\":\"n[1-2]\",\"user\":\"nobody\","
        "\"ncores\":4,\"hwcoll\":\"off\",\"vni_count\":2,\"tcs\":\"0xa\"}");
    free (r);
    r = slurm_run_request (1000, NULL, "n1", NULL, NULL, NULL, NULL, &e);
    assert_string_equal (r, "{\"uid\":1000,\"nodes\":\"n1\"}");
    free (r);
    /* a value the SPANK plugin would have refused (the user's srun set
     * it): the job's reason names it, rather than a RUN without it */
    errno = 0;
    assert_null (slurm_run_request (1000, NULL, "n1", NULL, "maybe", "2", NULL, &e));
    assert_int_equal (errno, EINVAL);
    assert_string_equal (
        e.text, "SPANK_FMB_HWCOLL=maybe: on, off or auto (hardware collectives)");
    assert_null (slurm_run_request (1000, NULL, "n1", NULL, NULL, "7", NULL, &e));
    assert_string_equal (e.text, "SPANK_FMB_VNIS=7: the job's VNI count, 0..4");
    assert_null (slurm_run_request (1000, NULL, "n1", NULL, NULL, NULL, "0xz", &e));
    assert_non_null (strstr (e.text, "SPANK_FMB_TCS=0xz: "));
    assert_null (slurm_run_request (1000, "u", NULL, "1", NULL, NULL, NULL, &e));
    assert_non_null (strstr (e.text, "SLURM_NODELIST"));
}

/* The prolog's failure: exit 0, and the job's own reason in its record;
 * a record the agent wrote itself is kept.  The epilog's: drain only
 * when services stay. */
static void failures_are_the_jobs_own (void **state)
{
    static struct agent ag;
    struct slurm_hook h = {.active = true, .prolog = true, .job = "77"};
    struct jobrecord r;
    struct fmb_error e;
    (void)state;
    if (geteuid () != 0)
        skip (); /* the record is the job user's (chown) */
    char *dir = tu_mkdtemp ();
    slurm_env ("prolog_slurmd");
    memset (&ag, 0, sizeof (ag));
    ag.args.job = "77";
    ag.args.state_dir = dir;
    snprintf (ag.final_reason,
              sizeof (ag.final_reason),
              "job 77: cannot get the job's VNIs from the broker: broker down");
    assert_int_equal (slurm_hook_finish (&ag, &h, 1), 0);
    assert_int_equal (jobrecord_read (dir, "77", &r, &e), 0);
    assert_int_equal (r.nservices, 0);
    assert_int_equal (r.uid, 65534);
    assert_string_equal (r.reason, ag.final_reason);
    jobrecord_clear (&r);
    snprintf (ag.final_reason, sizeof (ag.final_reason), "a later reason");
    assert_int_equal (slurm_hook_finish (&ag, &h, 1), 0);
    assert_int_equal (jobrecord_read (dir, "77", &r, &e), 0);
    assert_non_null (strstr (r.reason, "broker down")); /* the first stays */
    jobrecord_clear (&r);
    h.prolog = false;
    assert_int_equal (slurm_hook_finish (&ag, &h, 0), 0);
    assert_int_equal (slurm_hook_finish (&ag, &h, 1), 1); /* services stay: drain */
    assert_int_equal (slurm_hook_finish (&ag, &h, 2), 0); /* its configuration */
    /* no valid job id from slurmd: nothing written, and still no drain */
    h.prolog = true;
    h.job = NULL;
    assert_int_equal (slurm_hook_finish (&ag, &h, 2), 0);
    tu_rmtree (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (prolog_and_epilog_command_lines),
        cmocka_unit_test (only_slurmd_without_a_command),
        cmocka_unit_test (run_request_from_slurms_words),
        cmocka_unit_test (variables_from_the_node_services_request),
        cmocka_unit_test (failures_are_the_jobs_own),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

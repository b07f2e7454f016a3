/* test_runopts.c: a RUN request's user options (runopts.h), the one
 * place the CLI, the SPANK plugin, slurmd's Prolog= and the Flux plugin
 * check them: each value's range, the caller's own spelling in the
 * message, nothing changed by a refusal, and the body they make. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "runopts.h"
#include "testutil.h"

static char *dumped (const struct run_options *o)
{
    static char out[512];
    json_t *body = json_object ();
    assert_int_equal (run_options_to_json (o, body, NULL), 0);
    char *text = json_dumps (body, JSON_COMPACT);
    snprintf (out, sizeof (out), "%s", text);
    free (text);
    json_decref (body);
    return out;
}

static void good_values_make_the_run_body (void **state)
{
    (void)state;
    struct run_options o;
    struct fmb_error e;
    run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    assert_string_equal (dumped (&o), "{}");
    const char *const values[RUN_OPT_COUNT] = {
        "nid[001-004],login1", "64", "off", "2", "BULK_DATA,low_latency"};
    const char *const names[RUN_OPT_COUNT] = {
        "--nodes ", "--ncores ", "--hwcoll ", "--vni-count ", "--tcs "};
    assert_int_equal (run_options_parse (&o, values, names, &e), 0);
    assert_int_equal (o.node_count, 5);
    /* the host list travels compressed, the classes as a mask */
    assert_string_equal (
        dumped (&o),
        "{\"nodes\":\"nid[001-004],login1\",\"ncores\":64,\"hwcoll\":\"off\","
        "\"vni_count\":2,\"tcs\":\"0x6\"}");
    /* 0 cores is "not known": not sent; 0 VNIs is asked for */
    run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    assert_int_equal (run_option_parse (&o, RUN_OPT_NCORES, "0", "--ncores ", &e), 0);
    assert_int_equal (run_option_parse (&o, RUN_OPT_VNI_COUNT, "0", "--vni-count ", &e),
                      0);
    assert_int_equal (run_option_parse (&o, RUN_OPT_TCS, "0xa", "--tcs ", &e), 0);
    for (const char *const *h = (const char *const[]){"auto", "on", "off", NULL}; *h;
         h++) {
        assert_int_equal (run_option_parse (&o, RUN_OPT_HWCOLL, *h, "--hwcoll ", &e),
                          0);
        assert_string_equal (run_hwcoll_name (o.hwcoll), *h);
    }
    assert_string_equal (dumped (&o),
                         "{\"hwcoll\":\"off\",\"vni_count\":0,\"tcs\":\"0xa\"}");
}

/* Each bad value: -EINVAL, errno EINVAL, the option as the caller spells
 * it with the value and what it takes, and the options as they were. */
static void bad_values_are_refused_in_the_callers_words (void **state)
{
    (void)state;
    static const struct {
        enum run_opt which;
        const char *name, *value, *message;
    } cases[] = {
        {RUN_OPT_HWCOLL,
         "--fmb-hwcoll=",
         "maybe",
         "--fmb-hwcoll=maybe: on, off or auto (hardware collectives)"},
        {RUN_OPT_HWCOLL,
         "--hwcoll ",
         "ON",
         "--hwcoll ON: on, off or auto (hardware collectives)"},
        {RUN_OPT_HWCOLL,
         "--hwcoll ",
         "",
         "--hwcoll : on, off or auto (hardware collectives)"},
        {RUN_OPT_VNI_COUNT,
         "--fmb-vnis=",
         "7",
         "--fmb-vnis=7: the job's VNI count, 0..4"},
        {RUN_OPT_VNI_COUNT,
         "SPANK_FMB_VNIS=",
         "-1",
         "SPANK_FMB_VNIS=-1: the job's VNI count, 0..4"},
        {RUN_OPT_VNI_COUNT,
         "--vni-count ",
         "2x",
         "--vni-count 2x: the job's VNI count, 0..4"},
        {RUN_OPT_VNI_COUNT,
         "--vni-count ",
         " 2",
         "--vni-count  2: the job's VNI count, 0..4"},
        {RUN_OPT_VNI_COUNT,
         "--vni-count ",
         "+2",
         "--vni-count +2: the job's VNI count, 0..4"},
        {RUN_OPT_VNI_COUNT,
         "--vni-count ",
         "99999999999999999999",
         "--vni-count 99999999999999999999: the job's VNI count, 0..4"},
        {RUN_OPT_NCORES,
         "--ncores ",
         "1000001",
         "--ncores 1000001: cores per node, 0..1000000"},
        {RUN_OPT_NCORES, "--ncores ", "", "--ncores : cores per node, 0..1000000"},
        {RUN_OPT_TCS,
         "--fmb-tcs=",
         "FAST",
         "--fmb-tcs=FAST: unknown traffic class 'FAST' (DEDICATED_ACCESS, LOW_LATENCY, "
         "BULK_DATA, BEST_EFFORT)"},
        {RUN_OPT_TCS,
         "system.fmbroker.tcs=",
         "0x10",
         "system.fmbroker.tcs=0x10: a mask of 0x1..0xf or traffic class names"},
        {RUN_OPT_TCS, "--tcs ", ",", "--tcs ,: at least one traffic class is needed"},
        {RUN_OPT_NODES, "--nodes ", "n[1-", "--nodes n[1-: "},
        {RUN_OPT_NODES, "--nodes ", "n1,n1", "--nodes n1,n1: 'n1' listed twice"},
        {RUN_OPT_NODES,
         "--nodes ",
         "n1,a/b",
         "--nodes n1,a/b: 'a/b': node names are 1-64 characters of [A-Za-z0-9._-]"},
        {RUN_OPT_NODES, "--nodes ", "", "--nodes : "},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        struct run_options o, before;
        struct fmb_error e;
        run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
        assert_int_equal (run_option_parse (&o, RUN_OPT_VNI_COUNT, "3", "", &e), 0);
        before = o;
        errno = 0;
        assert_int_equal (
            run_option_parse (&o, cases[i].which, cases[i].value, cases[i].name, &e),
            -EINVAL);
        assert_int_equal (errno, EINVAL);
        if (strncmp (e.text, cases[i].message, strlen (cases[i].message)) != 0)
            fail_msg ("case %zu: '%s', expected '%s...'", i, e.text, cases[i].message);
        assert_memory_equal (&o, &before, sizeof (o));
    }
}

/* vni_count within the caller's bound ([vni] max_per_job), never over
 * the API's 4; tcs within the classes the caller allows. */
static void bounds_come_from_the_caller (void **state)
{
    (void)state;
    struct run_options o;
    struct fmb_error e;
    run_options_init (&o, 2, 0xe);
    assert_int_equal (run_option_parse (&o, RUN_OPT_VNI_COUNT, "2", "--vnis=", &e), 0);
    assert_int_equal (run_option_parse (&o, RUN_OPT_VNI_COUNT, "3", "--vnis=", &e),
                      -EINVAL);
    assert_string_equal (e.text, "--vnis=3: the job's VNI count, 0..2");
    assert_int_equal (
        run_option_parse (&o, RUN_OPT_TCS, "DEDICATED_ACCESS", "--tcs=", &e), -EINVAL);
    assert_string_equal (e.text,
                         "--tcs=DEDICATED_ACCESS: this cluster allows only "
                         "LOW_LATENCY,BULK_DATA,BEST_EFFORT");
    run_options_init (&o, 9, RUN_TCS_ALL);
    assert_int_equal (o.vni_max, RUN_VNI_COUNT_MAX);
    assert_false (run_vni_count_ok (5, 9));
    assert_true (run_vni_count_ok (4, 4));
    assert_false (run_vni_count_ok (-1, 4));
    assert_true (run_ncores_ok (0));
    assert_false (run_ncores_ok (RUN_NCORES_MAX + 1));
    assert_int_equal (run_hwcoll_parse (NULL), -1);
    assert_null (run_hwcoll_name (RUN_HWCOLL_UNSET));
}

/* All at once: the first bad one is the error, and nothing is taken. */
static void a_bad_option_among_many_changes_nothing (void **state)
{
    (void)state;
    struct run_options o, before;
    struct fmb_error e;
    run_options_init (&o, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    before = o;
    const char *const values[RUN_OPT_COUNT] = {"n[1-2]", NULL, "on", "9", "0x1"};
    const char *const names[RUN_OPT_COUNT] = {"SLURM_NODELIST=",
                                              "SLURM_JOB_CPUS_PER_NODE=",
                                              "SPANK_FMB_HWCOLL=",
                                              "SPANK_FMB_VNIS=",
                                              "SPANK_FMB_TCS="};
    assert_int_equal (run_options_parse (&o, values, names, &e), -EINVAL);
    assert_string_equal (e.text, "SPANK_FMB_VNIS=9: the job's VNI count, 0..4");
    assert_memory_equal (&o, &before, sizeof (o));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (good_values_make_the_run_body),
        cmocka_unit_test (bad_values_are_refused_in_the_callers_words),
        cmocka_unit_test (bounds_come_from_the_caller),
        cmocka_unit_test (a_bad_option_among_many_changes_nothing),
    };
    return cmocka_run_group_tests_name ("runopts", tests, NULL, NULL);
}

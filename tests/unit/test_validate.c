/* test_validate.c: the API's input checks: ids, names, UTF-8, decoding. */
#include <string.h>

#include "testutil.h"
#include "validate.h"

static void job_ids (void **state)
{
    (void)state;
    char long_id[200];
    assert_true (valid_job_id ("42"));
    assert_true (valid_job_id ("f1.2_3-x"));
    assert_false (valid_job_id (""));
    assert_false (valid_job_id ("."));
    assert_false (valid_job_id (".."));
    assert_false (valid_job_id ("a/b"));
    assert_false (valid_job_id ("a b"));
    assert_false (valid_job_id ("ƒ"));
    memset (long_id, 'a', 128);
    long_id[128] = '\0';
    assert_true (valid_job_id (long_id));
    long_id[128] = 'a';
    long_id[129] = '\0';
    assert_false (valid_job_id (long_id));
}

static void node_and_user_names (void **state)
{
    (void)state;
    assert_true (valid_node_name ("nid000001"));
    assert_true (valid_node_name ("x1000c0s0b0n0"));
    assert_false (valid_node_name ("-n1"));
    assert_false (valid_node_name (".hidden"));
    assert_false (valid_node_name ("n1;rm"));
    assert_false (valid_node_name (""));
    assert_true (valid_user_name ("alice.b-c_d"));
    /* what directories give: sssd, winbind, Samba machine accounts */
    assert_true (valid_user_name ("jdoe@ad.example.com"));
    assert_true (valid_user_name ("EXAMPLE\\jdoe"));
    assert_true (valid_user_name ("EXAMPLE+jdoe"));
    assert_true (valid_user_name ("host01$"));
    assert_false (valid_user_name ("a b"));
    assert_false (valid_user_name ("a/b"));
    assert_false (valid_user_name ("a\nb"));
    assert_false (valid_user_name ("a;b"));
    assert_false (valid_user_name (""));
    char longest[USER_NAME_MAX + 2];
    memset (longest, 'u', sizeof (longest));
    longest[USER_NAME_MAX] = '\0';
    assert_true (valid_user_name (longest));
    longest[USER_NAME_MAX] = 'u';
    longest[USER_NAME_MAX + 1] = '\0';
    assert_false (valid_user_name (longest));
}

static void utf8_is_strict (void **state)
{
    (void)state;
    struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"plain", true},
        {"\xc6\x92/0/1", true},      /* ƒ/0/1 */
        {"\xf0\x9f\x98\x80", true},  /* U+1F600 */
        {"\xc3\x28", false},         /* bad continuation */
        {"\xc0\xaf", false},         /* overlong '/' */
        {"\xe0\x80\xaf", false},     /* overlong */
        {"\xed\xa0\x80", false},     /* surrogate */
        {"\xf4\x90\x80\x80", false}, /* above U+10FFFF */
        {"\xe2\x82", false},         /* truncated */
        {"\xff", false},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
        if (valid_utf8 (cases[i].s, strlen (cases[i].s)) != cases[i].ok)
            fail_msg ("case %zu", i);
    assert_false (valid_utf8 ("a\0b", 3));
    char step[300];
    memset (step, 's', sizeof (step));
    assert_true (valid_step_id (step, 256));
    assert_false (valid_step_id (step, 257));
    assert_false (valid_step_id (step, 0));
    /* no control characters: they would forge log lines */
    assert_true (valid_step_id ("f2Zx/f3AB", 9));
    assert_true (valid_step_id ("\xc2\xa0\xc3\xa9", 4)); /* U+00A0, U+00E9 */
    assert_false (valid_step_id ("0\n<2>x", 6));
    assert_false (valid_step_id ("0\r", 2));
    assert_false (valid_step_id ("\t", 1));
    assert_false (valid_step_id ("a\x7f", 2));
    assert_false (valid_step_id ("a\xc2\x85", 3)); /* NEL */
    assert_false (valid_step_id ("\xc2\x9b", 2));  /* CSI */
}

static void percent_decoding_is_strict (void **state)
{
    (void)state;
    char out[16];
    assert_int_equal (percent_decode ("a%2Fb", 5, out, sizeof (out)), 3);
    assert_string_equal (out, "a/b");
    assert_int_equal (percent_decode ("%C6%92", 6, out, sizeof (out)), 2);
    assert_string_equal (out, "\xc6\x92");
    assert_int_equal (percent_decode ("plain", 5, out, sizeof (out)), 5);
    assert_int_equal (percent_decode ("a%00b", 5, out, sizeof (out)), -1);
    assert_int_equal (percent_decode ("a%zzb", 5, out, sizeof (out)), -1);
    assert_int_equal (percent_decode ("a%2", 3, out, sizeof (out)), -1);
    assert_int_equal (percent_decode ("%", 1, out, sizeof (out)), -1);
    assert_int_equal (percent_decode ("0123456789abcdef", 16, out, sizeof (out)), -1);
    assert_int_equal (percent_decode ("0123456789abcde", 15, out, sizeof (out)), 15);
}

static void paths_split_before_decoding (void **state)
{
    (void)state;
    struct api_params p;
    char why[160];
    assert_int_equal (
        api_match_path ("/v1/jobs/{job}", "/v1/jobs/42", &p, why, sizeof (why)), 1);
    assert_string_equal (p.job, "42");
    /* an encoded slash is data, never a separator, and not a valid id */
    assert_int_equal (
        api_match_path ("/v1/jobs/{job}", "/v1/jobs/a%2Fb", &p, why, sizeof (why)), -1);
    assert_non_null (strstr (why, "bad job in path"));
    assert_int_equal (
        api_match_path ("/v1/jobs/{job}", "/v1/jobs/42/steps/1", &p, why, sizeof (why)),
        0);
    /* a last {step} takes the rest, decoded */
    assert_int_equal (api_match_path ("/v1/jobs/{job}/steps/{step}",
                                      "/v1/jobs/42/steps/%C6%92%2F0/1",
                                      &p,
                                      why,
                                      sizeof (why)),
                      1);
    assert_string_equal (p.step, "\xc6\x92/0/1");
    assert_int_equal (p.step_len, 6);
    assert_int_equal (api_match_path ("/v1/jobs/{job}/steps/{step}",
                                      "/v1/jobs/42/steps/%FF",
                                      &p,
                                      why,
                                      sizeof (why)),
                      -1);
    assert_int_equal (p.step_len, 0);
    assert_int_equal (api_match_path ("/v1/jobs/{job}/nodes/{node}",
                                      "/v1/jobs/42/nodes/-x",
                                      &p,
                                      why,
                                      sizeof (why)),
                      -1);
    assert_int_equal (
        api_match_path ("/v1/status", "/v1/status/", &p, why, sizeof (why)), 0);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (job_ids),
        cmocka_unit_test (node_and_user_names),
        cmocka_unit_test (utf8_is_strict),
        cmocka_unit_test (percent_decoding_is_strict),
        cmocka_unit_test (paths_split_before_decoding),
    };
    return cmocka_run_group_tests_name ("validate", tests, NULL, NULL);
}

/* test_rspec.c: what the Flux jobtap plugin sends as the RUN, from a
 * job's R (RFC 20, as flux-core 0.88 writes it) and jobspec. */
#include <string.h>

#include "rspec.h"
#include "testutil.h"

static json_t *R_of (const char *nodelist, const char *cores)
{
    return json_pack ("{s:i s:{s:[{s:s s:{s:s}}] s:[s] s:f s:f}}",
                      "version",
                      1,
                      "execution",
                      "R_lite",
                      "rank",
                      "0-1",
                      "children",
                      "core",
                      cores,
                      "nodelist",
                      nodelist,
                      "starttime",
                      0.0,
                      "expiration",
                      0.0);
}

static void nodes_and_cores_from_R (void **state)
{
    (void)state;
    struct fmb_error e;
    json_t *R = R_of ("nid[001-002]", "0-3,8");
    json_t *body = rspec_run_body (R, NULL, 1234, &e);
    assert_non_null (body);
    char *s = json_dumps (body, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal (s, "{\"ncores\":5,\"nodes\":\"nid[001-002]\",\"uid\":1234}");
    free (s);
    json_decref (body);
    json_decref (R);
}

static void user_options_pass_and_bad_ones_are_named (void **state)
{
    (void)state;
    struct fmb_error e;
    json_t *R = R_of ("n1", "0");
    json_t *js = json_pack ("{s:{s:{s:{s:s s:i s:s}}}}",
                            "attributes",
                            "system",
                            "fmbroker",
                            "hwcoll",
                            "off",
                            "vnis",
                            0,
                            "tcs",
                            "BEST_EFFORT");
    json_t *body = rspec_run_body (R, js, 7, &e);
    assert_non_null (body);
    assert_string_equal (json_string_value (json_object_get (body, "hwcoll")), "off");
    assert_int_equal (json_integer_value (json_object_get (body, "vni_count")), 0);
    assert_string_equal (json_string_value (json_object_get (body, "tcs")),
                         "0x8"); /* BEST_EFFORT, as a mask */
    json_decref (body);
    json_decref (js);
    js = json_pack ("{s:{s:{s:{s:i}}}}", "attributes", "system", "fmbroker", "vnis", 9);
    assert_null (rspec_run_body (R, js, 7, &e));
    assert_non_null (strstr (e.text, "system.fmbroker.vnis"));
    json_decref (js);
    json_decref (R);
}

static void an_R_without_nodes_is_refused (void **state)
{
    (void)state;
    struct fmb_error e;
    json_t *R = json_pack ("{s:i s:{}}", "version", 1, "execution");
    assert_null (rspec_run_body (R, NULL, 1, &e));
    assert_non_null (strstr (e.text, "nodelist"));
    assert_null (rspec_run_body (NULL, NULL, 1, &e));
    json_decref (R);
}

static void idsets (void **state)
{
    (void)state;
    assert_int_equal (rspec_idset_count ("0"), 1);
    assert_int_equal (rspec_idset_count ("0-63"), 64);
    assert_int_equal (rspec_idset_count ("0-1,4,6-7"), 5);
    assert_int_equal (rspec_idset_count (""), -1);
    assert_int_equal (rspec_idset_count ("3-1"), -1);
    assert_int_equal (rspec_idset_count ("1,,2"), -1);
    assert_int_equal (rspec_idset_count ("x"), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (nodes_and_cores_from_R),
        cmocka_unit_test (user_options_pass_and_bad_ones_are_named),
        cmocka_unit_test (an_R_without_nodes_is_refused),
        cmocka_unit_test (idsets),
    };
    return cmocka_run_group_tests_name ("rspec", tests, NULL, NULL);
}

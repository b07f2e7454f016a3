/* test_jobset.c: clean's set of unreleased jobs: pages add up, a page
 * that could mislead (bad job, a next_after that does not move) is
 * refused, and a service is claimed by its job or by any held VNI. */
#include <errno.h>
#include <string.h>

#include "jobset.h"
#include "testutil.h"

static json_t *page (const char *text)
{
    json_t *p = json_loads (text, 0, NULL);
    assert_non_null (p);
    return p;
}

static void pages_add_up_until_the_last (void **state)
{
    (void)state;
    struct job_set set = {0};
    struct fmb_error e;
    char after[JOB_ID_MAX + 1] = "";
    json_t *p = page (
        "{\"jobs\":[{\"id\":\"1\",\"uid\":5,\"vnis\":[1024]},"
        "{\"id\":\"2\",\"uid\":6,\"vnis\":[]}],\"next_after\":\"2\"}");
    assert_int_equal (job_set_add_page (&set, p, after, &e), 0);
    assert_string_equal (after, "2");
    json_decref (p);
    /* a page the broker stopped reading for (its 10,000 jobs) before it
     * found any: nothing to add, and the cursor goes on */
    p = page ("{\"jobs\":[],\"next_after\":\"2x\"}");
    assert_int_equal (job_set_add_page (&set, p, after, &e), 0);
    assert_string_equal (after, "2x");
    assert_int_equal (set.n, 2);
    json_decref (p);
    p = page ("{\"jobs\":[{\"id\":\"3\",\"uid\":7,\"vnis\":[1025,1026]}]}");
    assert_int_equal (job_set_add_page (&set, p, after, &e), 0);
    assert_string_equal (after, "");
    assert_int_equal (set.n, 3);
    assert_int_equal (set.jobs[2].nvnis, 2);
    json_decref (p);
    job_set_clear (&set);
}

static void misleading_pages_are_refused (void **state)
{
    (void)state;
    const char *bad[] = {
        "{}",
        "{\"jobs\":{}}",
        "{\"jobs\":[{\"id\":\"1\",\"vnis\":[1024]}]}",
        "{\"jobs\":[{\"id\":\"1\",\"uid\":\"5\",\"vnis\":[1024]}]}",
        "{\"jobs\":[{\"id\":\"1\",\"uid\":5,\"vnis\":[70000]}]}",
        "{\"jobs\":[{\"id\":\"1\",\"uid\":5,\"vnis\":[1,2,3,4,5]}]}",
        "{\"jobs\":[{\"id\":\"1\",\"uid\":5}]}",
        "{\"jobs\":[],\"next_after\":\"m\"}", /* does not move past "m" */
        "{\"jobs\":[],\"next_after\":\"a\"}", /* goes back */
        "{\"jobs\":[],\"next_after\":\"../x\"}",
        "{\"jobs\":[],\"next_after\":5}",
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        struct job_set set = {0};
        struct fmb_error e;
        char after[JOB_ID_MAX + 1] = "m";
        json_t *p = page (bad[i]);
        if (job_set_add_page (&set, p, after, &e) != -1 || errno != EPROTO)
            fail_msg ("page %zu was taken: %s", i, bad[i]);
        json_decref (p);
        job_set_clear (&set);
    }
}

static void services_are_claimed_by_uid_and_vnis_or_any_held_vni (void **state)
{
    (void)state;
    struct job_set set = {0};
    struct fmb_error e;
    char after[JOB_ID_MAX + 1] = "";
    json_t *p = page ("{\"jobs\":[{\"id\":\"1\",\"uid\":5,\"vnis\":[1024,1025]}]}");
    assert_int_equal (job_set_add_page (&set, p, after, &e), 0);
    json_decref (p);
    struct cxi_svc_desc d;
    memset (&d, 0, sizeof (d));
    d.svc_id = 7;
    d.restricted_members = d.restricted_vnis = 1;
    d.members[0].type = CXI_SVC_MEMBER_UID;
    d.members[0].svc_member.uid = 5;
    d.num_vld_vnis = 2;
    d.vnis[0] = 1024;
    d.vnis[1] = 1025;
    assert_true (job_set_claims (&set, &d));
    d.members[0].svc_member.uid = 9; /* another uid, a VNI the job holds */
    d.num_vld_vnis = 1;
    d.vnis[0] = 1025;
    assert_true (job_set_claims (&set, &d));
    d.vnis[0] = 2000; /* nobody's */
    assert_false (job_set_claims (&set, &d));
    job_set_clear (&set);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (pages_add_up_until_the_last),
        cmocka_unit_test (misleading_pages_are_refused),
        cmocka_unit_test (services_are_claimed_by_uid_and_vnis_or_any_held_vni),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

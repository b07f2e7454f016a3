/* test_slurmconf.c: --check-config's look at slurm.conf: Slurm's own
 * switch/hpe_slingshot must not hand out VNIs from the broker's pool. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slurmconf.h"
#include "testutil.h"

static int check (const char *text, unsigned lo, unsigned hi, char *out, size_t len)
{
    char *dir = tu_mkdtemp ();
    char *path = tu_path (dir, "slurm.conf");
    tu_write (path, text, 0644);
    int rc = slurmconf_check (path, lo, hi, out, len);
    free (path);
    tu_rmtree (dir);
    return rc;
}

static void slingshot_with_the_default_range_overlaps (void **state)
{
    (void)state;
    char w[1024];
    assert_int_equal (check ("ClusterName=c1\nswitchtype=switch/hpe_slingshot\n",
                             1024,
                             65535,
                             w,
                             sizeof (w)),
                      1);
    assert_non_null (
        strstr (w, "hands out VNIs 1024-65535, overlapping [vni] pool 1024-65535"));
    assert_non_null (strstr (w, "SwitchType=switch/none"));
    assert_null (strstr (w, "fm_url="));
}

static void disjoint_range_is_fine_unless_it_calls_the_fm (void **state)
{
    (void)state;
    char w[1024];
    const char *conf =
        "SwitchType=switch/hpe_slingshot\n"
        "SwitchParameters=job_vni=all,vnis=1024-2047\n";
    assert_int_equal (check (conf, 2048, 65535, w, sizeof (w)), 0);
    assert_int_equal (check (conf, 2000, 65535, w, sizeof (w)), 1);
    assert_non_null (
        strstr (w, "hands out VNIs 1024-2047, overlapping [vni] pool 2000-65535"));
    assert_int_equal (
        check ("SwitchType=switch/hpe_slingshot\n"
               "SwitchParameters=vnis=1024-2047,fm_url=https://fm/apis/fm\n",
               2048,
               65535,
               w,
               sizeof (w)),
        1);
    assert_non_null (strstr (w, "reserves at the fabric manager itself (fm_url=)"));
}

static void other_switch_types_and_comments_say_nothing (void **state)
{
    (void)state;
    char w[1024];
    assert_int_equal (check ("SwitchType=switch/none\n", 1024, 65535, w, sizeof (w)),
                      0);
    assert_int_equal (
        check ("#SwitchType=switch/hpe_slingshot\n", 1024, 65535, w, sizeof (w)), 0);
    assert_int_equal (check ("NodeName=n1 CPUs=2\n", 1024, 65535, w, sizeof (w)), 0);
    errno = 0;
    assert_int_equal (slurmconf_check ("/nonexistent/slurm.conf", 1, 2, w, sizeof (w)),
                      -1);
    assert_int_equal (errno, ENOENT);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (slingshot_with_the_default_range_overlaps),
        cmocka_unit_test (disjoint_range_is_fine_unless_it_calls_the_fm),
        cmocka_unit_test (other_switch_types_and_comments_say_nothing),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

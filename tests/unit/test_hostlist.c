/* test_hostlist.c: Slurm/Flux compressed host lists. */
#include <errno.h>
#include <string.h>

#include "hostlist.h"
#include "testutil.h"

static char *expand (const char *text)
{
    struct fmb_error e;
    json_t *a = json_array ();
    if (hostlist_expand (text, a, &e) < 0) {
        json_decref (a);
        return NULL;
    }
    char *s = json_dumps (a, JSON_COMPACT);
    json_decref (a);
    return s;
}

static void expands_like_slurm (void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } cases[] = {
        {"n1", "[\"n1\"]"},
        {"n1,n2", "[\"n1\",\"n2\"]"},
        {"nid[001-003]", "[\"nid001\",\"nid002\",\"nid003\"]"},
        {"nid[8-10,12]", "[\"nid8\",\"nid9\",\"nid10\",\"nid12\"]"},
        {"login1,nid[1-2]", "[\"login1\",\"nid1\",\"nid2\"]"},
        {"r[1-2]n[1-2]", "[\"r1n1\",\"r1n2\",\"r2n1\",\"r2n2\"]"},
        {"x[09-11]-ib", "[\"x09-ib\",\"x10-ib\",\"x11-ib\"]"},
        {"n[1,3-4]x", "[\"n1x\",\"n3x\",\"n4x\"]"},
        {"n[1-2]", "[\"n1\",\"n2\"]"},
        {"[1-2]", "[\"1\",\"2\"]"},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        char *got = expand (cases[i].in);
        if (!got || strcmp (got, cases[i].out) != 0)
            fail_msg ("%s: got %s, want %s",
                      cases[i].in,
                      got ? got : "(error)",
                      cases[i].out);
        free (got);
    }
}

static void refuses_malformed_and_huge (void **state)
{
    (void)state;
    const char *bad[] = {"n[1-",
                         "n[3-1]",
                         "n[a-b]",
                         "n1]",
                         "n[1-2",
                         "n[1-9999999]",
                         "n[]",
                         "n[1,]",
                         "n[-1]",
                         "n[1-]",
                         "a]b[1]",
                         "n[[1]]",
                         "n[1]]",
                         "n[0-300]x[0-300]",
                         /* found by fuzzing: an empty group deep inside a
                          * product once meant walking the whole product */
                         "a[0-99]b[0-99]c[0-99]d[]"};
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        char *got = expand (bad[i]);
        if (got)
            fail_msg ("%s: accepted as %s", bad[i], got);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (expands_like_slurm),
        cmocka_unit_test (refuses_malformed_and_huge),
    };
    return cmocka_run_group_tests_name ("hostlist", tests, NULL, NULL);
}

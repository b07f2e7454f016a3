/* test_jobrecord.c: the node's job record (contract C1): what the prolog
 * writes can be read back, and nothing a reader must not trust is read. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jobrecord.h"
#include "testutil.h"

struct fixture {
    char *dir;  /* the state dir */
    char *path; /* dir/42.env */
};

static int setup (void **state)
{
    struct fixture *f = calloc (1, sizeof (*f));
    f->dir = tu_mkdtemp ();
    chmod (f->dir, 0755);
    f->path = tu_path (f->dir, "42.env");
    *state = f;
    return 0;
}

static int teardown (void **state)
{
    struct fixture *f = *state;
    tu_rmtree (f->dir);
    free (f->path);
    free (f);
    return 0;
}

/* A two-NIC record for job 42 of the caller's uid (so the test runs as
 * root or not). */
static void sample (struct jobrecord *r)
{
    memset (r, 0, sizeof (*r));
    snprintf (r->job, sizeof (r->job), "42");
    r->uid = (uint32_t)geteuid ();
    r->nservices = 2;
    r->env = json_pack ("{s:s, s:s, s:s, s:s, s:s}",
                        "SLINGSHOT_VNIS",
                        "1024",
                        "SLINGSHOT_DEVICES",
                        "cxi0,cxi1",
                        "SLINGSHOT_SVC_IDS",
                        "5,6",
                        "SLINGSHOT_TCS",
                        "0xa",
                        "FI_CXI_COLL_JOB_ID",
                        "c-42");
}

static void written_record_reads_back (void **state)
{
    struct fixture *f = *state;
    struct jobrecord w, r;
    struct fmb_error e;
    struct stat st;
    sample (&w);
    assert_int_equal (jobrecord_write (f->dir, &w, &e), 0);
    assert_int_equal (stat (f->path, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0400);
    assert_int_equal (st.st_uid, w.uid);
    assert_int_equal (jobrecord_read (f->dir, "42", &r, &e), 0);
    assert_string_equal (r.job, "42");
    assert_int_equal (r.uid, w.uid);
    assert_int_equal (r.nservices, 2);
    assert_true (json_equal (r.env, w.env));
    jobrecord_clear (&r);
    assert_null (r.env);
    /* A second prolog run replaces it (0400 does not stop rename). */
    json_object_set_new (w.env, "SLINGSHOT_TCS", json_string ("0x2"));
    assert_int_equal (jobrecord_write (f->dir, &w, &e), 0);
    assert_int_equal (jobrecord_read (f->dir, "42", &r, &e), 0);
    assert_string_equal (json_string_value (json_object_get (r.env, "SLINGSHOT_TCS")),
                         "0x2");
    jobrecord_clear (&r);
    jobrecord_clear (&w);
    assert_int_equal (jobrecord_remove (f->dir, "42", &e), 0);
    assert_int_equal (access (f->path, F_OK), -1);
    assert_int_equal (jobrecord_remove (f->dir, "42", &e), 0); /* twice: fine */
}

static void no_service_record_has_a_reason_and_no_lists (void **state)
{
    struct fixture *f = *state;
    struct jobrecord w, r;
    struct fmb_error e;
    sample (&w);
    w.nservices = 0;
    assert_int_equal (jobrecord_write (f->dir, &w, &e), -1); /* lists still set */
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (e.text, "SLINGSHOT_DEVICES"));
    json_object_del (w.env, "SLINGSHOT_DEVICES");
    json_object_del (w.env, "SLINGSHOT_SVC_IDS");
    assert_int_equal (jobrecord_write (f->dir, &w, &e), -1); /* no reason */
    assert_non_null (strstr (e.text, "no reason"));
    snprintf (w.reason, sizeof (w.reason), "no Slingshot NICs on this node");
    assert_int_equal (jobrecord_write (f->dir, &w, &e), 0);
    assert_int_equal (jobrecord_read (f->dir, "42", &r, &e), 0);
    assert_int_equal (r.nservices, 0);
    assert_string_equal (r.reason, "no Slingshot NICs on this node");
    jobrecord_clear (&r);
    jobrecord_clear (&w);
}

static void writer_refuses_what_a_reader_must_not_trust (void **state)
{
    struct fixture *f = *state;
    struct {
        const char *name;
        json_t *value;
        const char *says;
    } cases[] = {
        {"SLINGSHOT_X", json_string ("a\nexport EVIL=1"), "control character"},
        {"SLINGSHOT_X", json_string ("a\rb"), "control character"},
        {"SLINGSHOT_X", json_stringn ("a\0b", 3), "control character"},
        {"SLINGSHOT_X", json_integer (3), "not a string"},
        {"lower", json_string ("x"), "is not [A-Z_]"},
        {"1ABC", json_string ("x"), "is not [A-Z_]"},
        {"A;B", json_string ("x"), "is not [A-Z_]"},
        {"A\nB", json_string ("x"), "(unprintable)"},
        {"FI_CXI_COLL_JOB_STEP_ID", json_string ("0"), "per step"},
    };
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++) {
        struct jobrecord w;
        struct fmb_error e;
        sample (&w);
        json_object_set_new (w.env, cases[i].name, cases[i].value);
        assert_int_equal (jobrecord_write (f->dir, &w, &e), -1);
        assert_int_equal (errno, EINVAL);
        if (!strstr (e.text, cases[i].says))
            fail_msg ("case %zu: '%s' does not say '%s'", i, e.text, cases[i].says);
        assert_non_null (strstr (e.text, f->path)); /* names the file */
        jobrecord_clear (&w);
    }
    assert_int_equal (access (f->path, F_OK), -1); /* nothing written */
    /* A value with ';' or quotes is fine: it is data, the printer quotes. */
    struct jobrecord w;
    struct fmb_error e;
    sample (&w);
    json_object_set_new (w.env, "FI_CXI_X", json_string ("a;b 'c' $(d)"));
    assert_int_equal (jobrecord_write (f->dir, &w, &e), 0);
    jobrecord_clear (&w);
    /* Misaligned device and service lists. */
    sample (&w);
    json_object_set_new (w.env, "SLINGSHOT_SVC_IDS", json_string ("5"));
    assert_int_equal (jobrecord_write (f->dir, &w, &e), -1);
    assert_non_null (strstr (e.text, "must each list the 2 device(s)"));
    jobrecord_clear (&w);
    /* Bad job ids never become a path. */
    char path[PATH_MAX];
    assert_int_equal (jobrecord_path (path, sizeof (path), f->dir, "../etc"), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (jobrecord_path (path, 8, f->dir, "42"), -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

/* Write 'text' as the record of job 42 the way the prolog would. */
static void plant (struct fixture *f, const char *text, unsigned mode)
{
    unlink (f->path);
    tu_write (f->path, text, mode);
}

static void expect_refused (struct fixture *f, int err, const char *says)
{
    struct jobrecord r;
    struct fmb_error e;
    assert_int_equal (jobrecord_read (f->dir, "42", &r, &e), -1);
    if (errno != err || !strstr (e.text, says))
        fail_msg (
            "errno %d (want %d), '%s' does not say '%s'", errno, err, e.text, says);
    assert_null (r.env);
}

static void reader_refuses_bad_files (void **state)
{
    struct fixture *f = *state;
    char good[512], text[600];
    snprintf (good,
              sizeof (good),
              "\"uid\":%u,\"services\":1,\"env\":{\"SLINGSHOT_DEVICES\":\"cxi0\","
              "\"SLINGSHOT_SVC_IDS\":\"3\"}}",
              (unsigned)geteuid ());
    expect_refused (f, ENOENT, "no record of the job on this node");
    snprintf (text, sizeof (text), "{\"version\":1,\"job\":\"42\",%s", good);
    plant (f, text, 0400);
    struct jobrecord r;
    struct fmb_error e;
    assert_int_equal (jobrecord_read (f->dir, "42", &r, &e), 0);
    jobrecord_clear (&r);
    snprintf (text, sizeof (text), "{\"version\":2,\"job\":\"42\",%s", good);
    plant (f, text, 0400);
    expect_refused (f, EINVAL, "not a version 1 job record");
    snprintf (text, sizeof (text), "{\"version\":1,\"job\":\"43\",%s", good);
    plant (f, text, 0400);
    expect_refused (f, EINVAL, "not job 42's");
    plant (f,
           "{\"version\":1,\"job\":\"42\",\"uid\":0,\"services\":0,"
           "\"env\":{\"X\":\"a\\nb\"},\"reason\":\"r\"}",
           0400);
    expect_refused (f, EINVAL, "X: the value holds a control character");
    plant (f,
           "{\"version\":1,\"job\":\"42\",\"uid\":0,\"services\":0,"
           "\"env\":{\"X\":\"a\"},\"reason\":\"r\\u001b[2J\"}",
           0400);
    expect_refused (f, EINVAL, "\"reason\" holds a control character");
    plant (f, "{\"version\":1,\"version\":1}", 0400);
    expect_refused (f, EINVAL, "invalid JSON at line 1");
    plant (f, "[1]", 0400);
    expect_refused (f, EINVAL, "top level must be an object");
    snprintf (text, sizeof (text), "{\"version\":1,\"job\":\"42\",%s", good);
    plant (f, text, 0644);
    expect_refused (f, EPERM, "mode 0644 lets others read");
    unlink (f->path);
    assert_int_equal (symlink ("/etc/passwd", f->path), 0);
    expect_refused (f, EPERM, "symbolic link");
    /* A state dir others may write in is not trusted. */
    plant (f, text, 0400);
    chmod (f->dir, 0777);
    expect_refused (f, EPERM, "others may write in it");
    chmod (f->dir, 0755);
    if (geteuid () == 0) {
        /* Owned by a user that is not the job's: refused. */
        assert_int_equal (chown (f->path, 4242, (gid_t)-1), 0);
        expect_refused (f, EPERM, "owned by uid 4242, not by root or the job's uid");
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (written_record_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown (
            no_service_record_has_a_reason_and_no_lists, setup, teardown),
        cmocka_unit_test_setup_teardown (
            writer_refuses_what_a_reader_must_not_trust, setup, teardown),
        cmocka_unit_test_setup_teardown (reader_refuses_bad_files, setup, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

/* test_jobs.c: the job transitions, the outbox, the reservations and
 * reconciliation, each through what a user of the broker relies on: a
 * real broker (brokerfix) with its store in a temporary directory, and
 * the mock FM on loopback where the FM matters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerfix.h"
#include "fmsession.h"
#include "outbox.h"
#include "reconcile.h"
#include "store.h"
#include "log.h"
#include "testutil.h"

static const char *fix_job; /* the job a condition looks at */
static int fix_want_state;  /* ...and the state it waits for */

static bool job_in_state (struct fix *f)
{
    return fix_job_state (f, fix_job, NULL) == fix_want_state;
}

static bool fm_up (struct fix *f)
{
    return fmsession_state (f->b.fms) == FM_UP;
}

static bool fm_has (struct fix *f, const char *fmid)
{
    json_t *s = mockfm_state (&f->fm);
    bool has = json_object_get (json_object_get (s, "jobs"), fmid) != NULL;
    json_decref (s);
    return has;
}

static void fmid_of (struct fix *f, const char *job, char *out, size_t len)
{
    broker_fm_id (&f->b, job, out, len);
}

static int queued (struct fix *f, const char *job)
{
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    struct fmb_error e;
    fmid_of (f, job, fmid, sizeof (fmid));
    return outbox_fm_job_queued (f->b.outbox, fmid, &e);
}

static const char run_body[] = "{\"uid\": 1000, \"node_count\": 2, \"hwcoll\": \"on\"}";

/* RUN with collectives at an FM that is up: 201, reserved. */
static void run_reserved (struct fix *f, const char *job)
{
    char path[128];
    json_t *view;
    assert_true (fix_until (f, fm_up, 5000));
    snprintf (path, sizeof (path), "/v1/jobs/%s", job);
    assert_int_equal (fix_request (f, "PUT", path, run_body, &view), 201);
    assert_string_equal (
        json_string_value (json_object_get (json_object_get (view, "hwcoll"), "state")),
        "reserved");
    json_decref (view);
}

/* ---- RUN ----------------------------------------------------------- */

/* The RM repeats a RUN (a retry, a hook run again): the same job, the
 * same VNIs, one reservation; a different request under the same id is
 * refused. */
static void test_run_twice_is_one_job (void **state)
{
    struct fix *f = *state;
    json_t *first, *again;
    const char *body = "{\"uid\": 1000, \"node_count\": 2}";
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/7", body, &first), 201);
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/7", body, &again), 200);
    assert_true (
        json_equal (json_object_get (first, "vnis"), json_object_get (again, "vnis")));
    unsigned held, quarantined;
    struct fmb_error e;
    assert_int_equal (store_vni_counts (f->b.st, &held, &quarantined, &e), 0);
    assert_int_equal (held, json_array_size (json_object_get (first, "vnis")));
    assert_int_equal (
        fix_request (
            f, "PUT", "/v1/jobs/7", "{\"uid\": 1000, \"node_count\": 3}", NULL),
        409);
    json_decref (first);
    json_decref (again);
}

/* The reservation's answer lands in the store: the job is reserved with
 * the FM's session token, and the FM holds it under our FM id. */
static void test_reservation_answer_lands_in_store (void **state)
{
    struct fix *f = *state;
    struct store_job *j;
    struct fmb_error e;
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    run_reserved (f, "r1");
    assert_int_equal (store_job_get (f->b.st, "r1", &j, &e), 0);
    assert_int_equal (j->hwcoll, STORE_HWCOLL_RESERVED);
    assert_non_null (j->token);
    store_job_free (j);
    fmid_of (f, "r1", fmid, sizeof (fmid));
    assert_true (fm_has (f, fmid));
}

/* An FM that refuses the reservation: the job runs without collectives
 * (unavailable), and a delete of whatever the FM may still make is owed. */
static void test_refused_reservation_is_unavailable (void **state)
{
    struct fix *f = *state;
    json_t *view;
    int hwcoll;
    assert_true (fix_until (f, fm_up, 5000));
    mockfm_ctl (&f->fm, "POST", "/_mock/faults", "POST /fabric/collectives/jobs 500\n");
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/u1", run_body, &view), 201);
    assert_string_equal (
        json_string_value (json_object_get (json_object_get (view, "hwcoll"), "state")),
        "unavailable");
    json_decref (view);
    assert_int_equal (fix_job_state (f, "u1", &hwcoll), STORE_JOB_ACTIVE);
    assert_int_equal (hwcoll, STORE_HWCOLL_UNAVAILABLE);
    assert_int_equal (queued (f, "u1"), 1);
}

/* ---- CLEANUP ------------------------------------------------------- */

/* CLEANUP of a job the broker never saw: 404, and nothing written. */
static void test_cleanup_of_unknown_job_is_404 (void **state)
{
    struct fix *f = *state;
    json_t *problem;
    assert_int_equal (fix_request (f, "DELETE", "/v1/jobs/nope", NULL, &problem), 404);
    assert_non_null (
        strstr (json_string_value (json_object_get (problem, "detail")), "nope"));
    json_decref (problem);
    assert_int_equal (fix_job_state (f, "nope", NULL), -1);
}

/* A CLEANUP's FM release is owed until the FM has done it: while the FM
 * refuses, the job stays releasing and the delete stays queued, across
 * a restart of the broker; once the FM takes it, the job is released and
 * the FM no longer holds the reservation. */
static void test_release_is_owed_until_done_across_reopen (void **state)
{
    struct fix *f = *state;
    char fmid[STORE_FM_JOB_ID_MAX + 1];
    run_reserved (f, "c1");
    fmid_of (f, "c1", fmid, sizeof (fmid));
    mockfm_ctl (
        &f->fm, "POST", "/_mock/faults", "DELETE /fabric/collectives/jobs/* 503\n");
    assert_int_equal (fix_request (f, "DELETE", "/v1/jobs/c1", NULL, NULL), 202);
    for (int i = 0; i < 50; i++) /* the outbox tries, the FM refuses */
        fix_pass (f, 10);
    assert_int_equal (fix_job_state (f, "c1", NULL), STORE_JOB_RELEASING);
    assert_int_equal (queued (f, "c1"), 1);
    fix_close (f);
    fix_open (f);
    assert_int_equal (fix_job_state (f, "c1", NULL), STORE_JOB_RELEASING);
    assert_int_equal (queued (f, "c1"), 1);
    assert_true (fm_has (f, fmid));
    mockfm_ctl (&f->fm, "POST", "/_mock/faults", "");
    fix_job = "c1";
    fix_want_state = STORE_JOB_RELEASED;
    assert_true (fix_until (f, job_in_state, 8000)); /* after its back-off */
    assert_int_equal (queued (f, "c1"), 0);
    assert_false (fm_has (f, fmid));
}

/* Quarantine holds a job's VNIs after CLEANUP until every node reports
 * its CXI services destroyed: the same job id cannot run again on them
 * meanwhile, and the last report gives them back to the pool. */
static void test_quarantine_holds_vnis (void **state)
{
    struct fix *f = *state;
    unsigned held, quarantined;
    struct fmb_error e;
    const char *body = "{\"uid\": 1000, \"nodes\": [\"n1\", \"n2\"]}";
    const char *destroyed = "{\"cxi\": \"destroyed\"}";
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/q1", body, NULL), 201);
    assert_int_equal (fix_request (f, "DELETE", "/v1/jobs/q1", NULL, NULL), 202);
    assert_int_equal (fix_job_state (f, "q1", NULL), STORE_JOB_RELEASED);
    assert_int_equal (store_vni_counts (f->b.st, &held, &quarantined, &e), 0);
    assert_true (quarantined > 0);
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/q1", body, NULL), 409);
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/q1/nodes/n1", destroyed, NULL),
                      200);
    assert_int_equal (store_vni_counts (f->b.st, &held, &quarantined, &e), 0);
    assert_true (quarantined > 0); /* n2 has not reported */
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/q1/nodes/n2", destroyed, NULL),
                      200);
    assert_int_equal (store_vni_counts (f->b.st, &held, &quarantined, &e), 0);
    assert_int_equal (quarantined, 0);
    assert_int_equal (fix_request (f, "PUT", "/v1/jobs/q1", body, NULL), 201);
}

/* ---- reconciliation ------------------------------------------------ */

/* A listing of the FM's jobs: a reservation with our prefix that no job
 * holds (one the FM made after the broker gave up on it and recorded its
 * job 'unavailable') is released, and a job whose reservation the FM no
 * longer lists is marked lost. */
static void test_reconcile_releases_orphan_and_marks_lost (void **state)
{
    struct fix *f = *state;
    char orphan[STORE_FM_JOB_ID_MAX + 1], lost[STORE_FM_JOB_ID_MAX + 1], url[512];
    struct fmb_error e;
    run_reserved (f, "o1");
    run_reserved (f, "l1");
    fmid_of (f, "o1", orphan, sizeof (orphan));
    fmid_of (f, "l1", lost, sizeof (lost));
    assert_int_equal (
        store_job_set_hwcoll (
            f->b.st, "o1", STORE_HWCOLL_UNAVAILABLE, "given up on", 0, NULL, &e),
        0);
    snprintf (url, sizeof (url), "%s/fabric/collectives/jobs/%s", f->fm.url, lost);
    assert_int_equal (http_call ("DELETE", url, NULL, NULL, NULL), 200);
    struct store_job *j;
    assert_int_equal (store_job_get_brief (f->b.st, "l1", &j, &e), 0);
    while (now_recorded () <= j->updated_ms) /* the listing: after the record */
        fix_pass (f, 1);
    store_job_free (j);
    reconcile_now (f->b.rc, false);
    fix_job = "l1";
    fix_want_state = STORE_JOB_LOST;
    assert_true (fix_until (f, job_in_state, 8000));
    for (int i = 0; i < 300 && fm_has (f, orphan); i++)
        fix_pass (f, 10);
    assert_false (fm_has (f, orphan));
    assert_int_equal (fix_job_state (f, "o1", NULL), STORE_JOB_ACTIVE);
}

/* ---- reservations --------------------------------------------------- */

/* A job left 'reserving' by a crash, and no FM configured any more: the
 * broker's start records it unavailable (no reservation can be made). */
static void test_recovery_without_fm_marks_unavailable (void **state)
{
    struct fix *f = *state;
    struct fmb_error e;
    int hwcoll;
    struct store_job j = {.uid = 1000,
                          .node_count = 1,
                          .request = "{}",
                          .state = STORE_JOB_ACTIVE,
                          .hwcoll = STORE_HWCOLL_RESERVING};
    snprintf (j.id, sizeof (j.id), "%s", "z1");
    fmid_of (f, "z1", j.fm_job_id, sizeof (j.fm_job_id));
    assert_int_equal (store_job_put (f->b.st, &j, &e), 0);
    fix_close (f);
    fix_open (f);
    assert_int_equal (fix_job_state (f, "z1", &hwcoll), STORE_JOB_ACTIVE);
    assert_int_equal (hwcoll, STORE_HWCOLL_UNAVAILABLE);
}

static int setup_vni (void **state)
{
    struct fix *f = calloc (1, sizeof (*f));
    fix_setup (f, false);
    *state = f;
    return 0;
}

static int setup_fm (void **state)
{
    struct fix *f = calloc (1, sizeof (*f));
    fix_setup (f, true);
    *state = f;
    return 0;
}

/* Also after a failure: no mock FM outlives its test. */
static int teardown (void **state)
{
    fix_teardown (*state);
    free (*state);
    return 0;
}

int main (void)
{
    fmb_log_init ("test_jobs",
                  getenv ("TEST_JOBS_LOG") ? LOG_DEBUG : LOG_EMERG); /* quiet */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (
            test_run_twice_is_one_job, setup_vni, teardown),
        cmocka_unit_test_setup_teardown (
            test_reservation_answer_lands_in_store, setup_fm, teardown),
        cmocka_unit_test_setup_teardown (
            test_refused_reservation_is_unavailable, setup_fm, teardown),
        cmocka_unit_test_setup_teardown (
            test_cleanup_of_unknown_job_is_404, setup_vni, teardown),
        cmocka_unit_test_setup_teardown (
            test_release_is_owed_until_done_across_reopen, setup_fm, teardown),
        cmocka_unit_test_setup_teardown (
            test_quarantine_holds_vnis, setup_vni, teardown),
        cmocka_unit_test_setup_teardown (
            test_reconcile_releases_orphan_and_marks_lost, setup_fm, teardown),
        cmocka_unit_test_setup_teardown (
            test_recovery_without_fm_marks_unavailable, setup_vni, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

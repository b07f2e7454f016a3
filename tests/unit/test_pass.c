/* test_pass.c: when background work leaves a loop pass to requests. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pass.h"
#include "store.h"
#include "testutil.h"

/* A pass that serves no request is background work's, at once. */
static void test_idle_pass_runs_background (void **state)
{
    (void)state;
    int64_t since = 0;
    assert_false (pass_background_waits (&since, false, 1000));
    assert_int_equal (since, 0);
}

/* A pass that holds answers leaves background work to the next one,
 * which holds none and runs it. */
static void test_serving_pass_defers_background (void **state)
{
    (void)state;
    int64_t since = 0;
    assert_true (pass_background_waits (&since, true, 1000));
    assert_false (pass_background_waits (&since, false, 1001));
    assert_true (pass_background_waits (&since, true, 1002)); /* afresh */
}

/* Requests in every pass: background work is put off for at most
 * PASS_BACKGROUND_DEFER_MAX_MS, then runs beside them, and the count
 * starts again. */
static void test_steady_requests_do_not_starve_background (void **state)
{
    (void)state;
    int64_t since = 0, t0 = 5000, now;
    for (now = t0; now < t0 + PASS_BACKGROUND_DEFER_MAX_MS; now++)
        assert_true (pass_background_waits (&since, true, now));
    assert_false (pass_background_waits (&since, true, now));
    assert_true (pass_background_waits (&since, true, now + 1));
}

/* Two pieces of background work (reconciliation's slices run before
 * retention's in every pass): each waits at most the bound on its own,
 * the first one's turn does not start the second's wait afresh. */
static void test_each_piece_waits_on_its_own (void **state)
{
    (void)state;
    int64_t slices = 0, prune = 0, now;
    bool slices_ran = false, prune_ran = false;
    for (now = 1000; now <= 1000 + PASS_BACKGROUND_DEFER_MAX_MS; now++) {
        slices_ran |= !pass_background_waits (&slices, true, now);
        prune_ran |= !pass_background_waits (&prune, true, now);
    }
    assert_true (slices_ran);
    assert_true (prune_ran);
}

/* One background slice a pass: the second piece waits for the next pass
 * (two slices and their writes would add up in one), whose first piece
 * runs again. */
static void test_one_background_slice_a_pass (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *db = tu_path (dir, "fmbroker.db"), *key = tu_path (dir, "token.key");
    struct store *st;
    struct fmb_error e;
    if (store_open (db, key, &st, &e) < 0)
        fail_msg ("store_open: %s", e.text);
    struct pass *p = pass_create (st, NULL, NULL);
    assert_non_null (p);
    int64_t slices = 0, prune = 0;
    pass_begin (p);
    assert_false (pass_defer_background (p, &slices, 1000));
    assert_true (pass_defer_background (p, &prune, 1000));
    assert_true (pass_end (p));
    pass_begin (p);
    assert_false (pass_defer_background (p, &prune, 1001));
    assert_true (pass_defer_background (p, &slices, 1001));
    assert_true (pass_end (p));
    pass_destroy (p);
    store_close (st);
    free (db);
    free (key);
    tu_rmtree (dir);
}

/* The broker's own pass: without an HTTP server (or outside a pass)
 * nothing waits for it, whatever was written. */
static void test_pass_without_requests_never_defers (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *db = tu_path (dir, "fmbroker.db"), *key = tu_path (dir, "token.key");
    struct store *st;
    struct fmb_error e;
    if (store_open (db, key, &st, &e) < 0)
        fail_msg ("store_open: %s", e.text);
    struct pass *p = pass_create (st, NULL, NULL);
    assert_non_null (p);
    int64_t since = 0;
    assert_false (pass_defer_background (p, &since, 1000));
    pass_begin (p);
    if (store_event_append (st, "test", NULL, NULL, NULL, &e) < 0)
        fail_msg ("store_event_append: %s", e.text);
    assert_false (pass_defer_background (p, &since, 1001));
    assert_true (pass_end (p));
    pass_destroy (p);
    store_close (st);
    free (db);
    free (key);
    tu_rmtree (dir);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_idle_pass_runs_background),
        cmocka_unit_test (test_serving_pass_defers_background),
        cmocka_unit_test (test_steady_requests_do_not_starve_background),
        cmocka_unit_test (test_each_piece_waits_on_its_own),
        cmocka_unit_test (test_one_background_slice_a_pass),
        cmocka_unit_test (test_pass_without_requests_never_defers),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

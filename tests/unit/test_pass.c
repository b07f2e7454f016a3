/* test_pass.c: when background work leaves a loop pass to requests. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>
#include <string.h>

#include "pass.h"
#include "store.h"
#include "store_private.h" /* the busy timeout, shortened */
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

/* Two pieces of background work (reconciliation's slices and
 * retention's, asked in that order): each waits for requests at most the
 * bound on its own, the first one's turn does not start the second's
 * wait afresh. */
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

/* A store in a directory of its own, and a pass over it without an HTTP
 * server or an FM client: the broker's own passes. */
struct pass_fx {
    char *dir, *db, *key;
    struct store *st;
    struct pass *p;
};

static int pass_setup (void **state)
{
    struct pass_fx *fx = calloc (1, sizeof (*fx));
    struct fmb_error e;
    fx->dir = tu_mkdtemp ();
    fx->db = tu_path (fx->dir, "fmbroker.db");
    fx->key = tu_path (fx->dir, "token.key");
    if (store_open (fx->db, fx->key, &fx->st, &e) < 0)
        fail_msg ("store_open: %s", e.text);
    fx->p = pass_create (fx->st, NULL, NULL);
    assert_non_null (fx->p);
    *state = fx;
    return 0;
}

static int pass_teardown (void **state)
{
    struct pass_fx *fx = *state;
    pass_destroy (fx->p);
    store_close (fx->st);
    tu_rmtree (fx->dir);
    free (fx->db);
    free (fx->key);
    free (fx);
    return 0;
}

/* One background slice a pass: the second piece to ask waits for the
 * next pass (two slices and their writes would add up in one), in which
 * whichever asks first runs. */
static void test_one_background_slice_a_pass (void **state)
{
    struct pass_fx *fx = *state;
    int64_t slices = 0, prune = 0;
    pass_begin (fx->p);
    assert_false (pass_defer_background (fx->p, &slices, 1000));
    assert_true (pass_defer_background (fx->p, &prune, 1000));
    assert_true (pass_end (fx->p));
    pass_begin (fx->p);
    assert_false (pass_defer_background (fx->p, &prune, 1001));
    assert_true (pass_defer_background (fx->p, &slices, 1001));
    assert_true (pass_end (fx->p));
}

/* The broker's own pass: without an HTTP server (or outside a pass)
 * nothing waits for it, whatever was written. */
static void test_pass_without_requests_never_defers (void **state)
{
    struct pass_fx *fx = *state;
    struct fmb_error e;
    int64_t since = 0;
    assert_false (pass_defer_background (fx->p, &since, 1000));
    pass_begin (fx->p);
    if (store_event_append (fx->st, "test", NULL, NULL, NULL, &e) < 0)
        fail_msg ("store_event_append: %s", e.text);
    assert_false (pass_defer_background (fx->p, &since, 1001));
    assert_true (pass_end (fx->p));
}

static bool busy_flag (void *arg)
{
    return *(bool *)arg;
}

/* Foreground work in flight (RUNs waiting on the FM) holds background
 * slices off like held answers do, and as long at most; none, and they
 * run. */
static void test_foreground_work_defers_background (void **state)
{
    struct pass_fx *fx = *state;
    bool busy = true;
    int64_t since = 0, now = 1000;
    pass_set_foreground (fx->p, busy_flag, &busy);
    pass_begin (fx->p);
    assert_true (pass_defer_background (fx->p, &since, now));
    assert_true (pass_end (fx->p));
    busy = false;
    pass_begin (fx->p);
    assert_false (pass_defer_background (fx->p, &since, now + 1));
    assert_true (pass_end (fx->p));
    busy = true;
    for (now = 2000; now < 2000 + PASS_BACKGROUND_DEFER_MAX_MS; now++) {
        pass_begin (fx->p);
        assert_true (pass_defer_background (fx->p, &since, now));
        assert_true (pass_end (fx->p));
    }
    pass_begin (fx->p);
    assert_false (pass_defer_background (fx->p, &since, now));
    assert_true (pass_end (fx->p));
}

/* Another process's write transaction on the store's file. */
static sqlite3 *other_writer (struct pass_fx *fx)
{
    sqlite3 *db;
    assert_int_equal (sqlite3_open (fx->db, &db), SQLITE_OK);
    assert_int_equal (sqlite3_exec (db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                      SQLITE_OK);
    return db;
}

/* Most passes touch no row (answers going out, FM replies that change
 * nothing): they take no lock and commit nothing.  One that writes
 * takes the lock with its first statement.  And one whose transaction
 * cannot begin (another writer holds the lock past the busy timeout)
 * fails whole, saying why (already while it runs, for health), though
 * what only reads still answers; the next pass commits. */
static void test_pass_begins_its_transaction_when_used (void **state)
{
    struct pass_fx *fx = *state;
    struct fmb_error e;
    const char *why;
    pass_begin (fx->p);
    sqlite3 *other = other_writer (fx); /* the idle pass holds no lock */
    sqlite3_busy_timeout (fx->st->db, 20);
    if (store_event_append (fx->st, "test", NULL, NULL, NULL, &e) == 0)
        fail_msg ("a write beside another writer's lock succeeded");
    /* what reads still answers (health), and says why writes fail */
    unsigned depth;
    if (store_outbox_depth (fx->st, &depth, &e) < 0)
        fail_msg ("a read after the failed BEGIN: %s", e.text);
    assert_true (pass_commits_failing (fx->p, &why));
    assert_non_null (strstr (why, "begin transaction: database is locked"));
    assert_false (pass_end (fx->p));
    assert_true (pass_commits_failing (fx->p, &why));
    assert_non_null (strstr (why, "begin transaction: database is locked"));

    assert_int_equal (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    pass_begin (fx->p);
    if (store_event_append (fx->st, "test", NULL, NULL, NULL, &e) < 0)
        fail_msg ("store_event_append: %s", e.text);
    assert_int_equal (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                      SQLITE_BUSY);
    assert_true (pass_end (fx->p));
    assert_false (pass_commits_failing (fx->p, NULL));
    sqlite3_close (other);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_idle_pass_runs_background),
        cmocka_unit_test (test_serving_pass_defers_background),
        cmocka_unit_test (test_steady_requests_do_not_starve_background),
        cmocka_unit_test (test_each_piece_waits_on_its_own),
        cmocka_unit_test_setup_teardown (
            test_one_background_slice_a_pass, pass_setup, pass_teardown),
        cmocka_unit_test_setup_teardown (
            test_pass_without_requests_never_defers, pass_setup, pass_teardown),
        cmocka_unit_test_setup_teardown (
            test_foreground_work_defers_background, pass_setup, pass_teardown),
        cmocka_unit_test_setup_teardown (
            test_pass_begins_its_transaction_when_used, pass_setup, pass_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

/* test_pass.c: the loop pass's group commit, as background work sees it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pass.h"
#include "store.h"
#include "testutil.h"

struct fx {
    char *dir;
    char *db;
    char *key;
    struct store *st;
    struct pass *pass;
};

static int setup (void **state)
{
    struct fx *fx = calloc (1, sizeof (*fx));
    struct fmb_error e;
    fx->dir = tu_mkdtemp ();
    fx->db = tu_path (fx->dir, "fmbroker.db");
    fx->key = tu_path (fx->dir, "token.key");
    if (store_open (fx->db, fx->key, &fx->st, &e) < 0)
        fail_msg ("store_open: %s", e.text);
    fx->pass = pass_create (fx->st, NULL, NULL);
    assert_non_null (fx->pass);
    *state = fx;
    return 0;
}

static int teardown (void **state)
{
    struct fx *fx = *state;
    pass_destroy (fx->pass);
    store_close (fx->st);
    free (fx->db);
    free (fx->key);
    tu_rmtree (fx->dir);
    free (fx);
    return 0;
}

/* What a request does in a pass: write (an event stands for any change). */
static void foreground_write (struct fx *fx)
{
    struct fmb_error e;
    if (store_event_append (fx->st, "test", NULL, NULL, NULL, &e) < 0)
        fail_msg ("store_event_append: %s", e.text);
}

/* A pass with nothing else in it is background work's. */
static void test_idle_pass_runs_background (void **state)
{
    struct fx *fx = *state;
    pass_begin (fx->pass);
    assert_false (pass_defer_background (fx->pass, 1000));
    assert_true (pass_end (fx->pass));
}

/* A pass that wrote for a request leaves background work to the next one,
 * which has no request and runs it. */
static void test_foreground_pass_defers_background (void **state)
{
    struct fx *fx = *state;
    pass_begin (fx->pass);
    foreground_write (fx);
    assert_true (pass_defer_background (fx->pass, 1000));
    assert_true (pass_end (fx->pass));
    pass_begin (fx->pass);
    assert_false (pass_defer_background (fx->pass, 1001));
    assert_true (pass_end (fx->pass));
}

/* Requests in every pass: background work is put off for at most
 * PASS_BACKGROUND_DEFER_MAX_MS, then runs beside them, and the count
 * starts again. */
static void test_steady_requests_do_not_starve_background (void **state)
{
    struct fx *fx = *state;
    int64_t t0 = 5000, now = t0;
    bool ran = false;
    for (; now <= t0 + 2 * PASS_BACKGROUND_DEFER_MAX_MS && !ran; now += 10) {
        pass_begin (fx->pass);
        foreground_write (fx);
        ran = !pass_defer_background (fx->pass, now);
        assert_true (pass_end (fx->pass));
    }
    assert_true (ran);
    assert_int_equal (now - 10 - t0, PASS_BACKGROUND_DEFER_MAX_MS);
    pass_begin (fx->pass);
    foreground_write (fx);
    assert_true (pass_defer_background (fx->pass, now));
    assert_true (pass_end (fx->pass));
}

/* Outside a pass nothing waits for a commit. */
static void test_outside_a_pass_never_defers (void **state)
{
    struct fx *fx = *state;
    foreground_write (fx);
    assert_false (pass_defer_background (fx->pass, 1000));
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (
            test_idle_pass_runs_background, setup, teardown),
        cmocka_unit_test_setup_teardown (
            test_foreground_pass_defers_background, setup, teardown),
        cmocka_unit_test_setup_teardown (
            test_steady_requests_do_not_starve_background, setup, teardown),
        cmocka_unit_test_setup_teardown (
            test_outside_a_pass_never_defers, setup, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

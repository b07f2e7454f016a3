/* test_apiretry.c: the one retry rule every client of the broker follows
 * (apiretry.h), and the exit status a script gets for each outcome. */
#include <errno.h>

#include "apiretry.h"
#include "testutil.h"

static void answers_are_judged_by_status (void **state)
{
    (void)state;
    assert_int_equal (api_outcome_of (0, 0, 200, 0), API_OUTCOME_DONE);
    assert_int_equal (api_outcome_of (0, 0, 202, 0), API_OUTCOME_DONE);
    /* a refusal does not change by asking again */
    for (long s = 400; s <= 499; s++)
        if (s != 408 && s != 429)
            assert_int_equal (api_outcome_of (0, 0, s, 0), API_OUTCOME_REFUSED);
    assert_int_equal (api_outcome_of (0, 0, 301, 0), API_OUTCOME_REFUSED);
    /* busy: try again soon; failing over or failing: later */
    assert_int_equal (api_outcome_of (0, 0, 429, 0), API_OUTCOME_BUSY);
    assert_int_equal (api_outcome_of (0, 0, 408, 0), API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (0, 0, 500, 0), API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (0, 0, 503, 0), API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (0, 0, 599, 0), API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (0, 0, 600, 0), API_OUTCOME_REFUSED);
}

/* No answer: a broker that took its time is there and loaded (busy); one
 * that refused the connection at once is away (restarting, failing
 * over); a call not made for want of a token is the caller's own. */
static void calls_without_an_answer (void **state)
{
    (void)state;
    assert_int_equal (api_outcome_of (-1, EHOSTUNREACH, 0, 3), API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (-1, EHOSTUNREACH, 0, API_BUSY_WAIT_MS - 1),
                      API_OUTCOME_AWAY);
    assert_int_equal (api_outcome_of (-1, EHOSTUNREACH, 0, API_BUSY_WAIT_MS),
                      API_OUTCOME_BUSY);
    assert_int_equal (api_outcome_of (-1, EHOSTUNREACH, 0, 5000), API_OUTCOME_BUSY);
    assert_int_equal (api_outcome_of (-1, EACCES, 0, 0), API_OUTCOME_NOT_SENT);
    assert_int_equal (api_outcome_of (-1, EACCES, 0, 5000), API_OUTCOME_NOT_SENT);
}

static void transient_outcomes_exit_tempfail (void **state)
{
    (void)state;
    assert_false (api_outcome_transient (API_OUTCOME_DONE));
    assert_false (api_outcome_transient (API_OUTCOME_REFUSED));
    assert_false (api_outcome_transient (API_OUTCOME_NOT_SENT));
    assert_true (api_outcome_transient (API_OUTCOME_BUSY));
    assert_true (api_outcome_transient (API_OUTCOME_AWAY));
    assert_int_equal (api_outcome_exit (API_OUTCOME_DONE), 0);
    assert_int_equal (api_outcome_exit (API_OUTCOME_REFUSED), 1);
    assert_int_equal (api_outcome_exit (API_OUTCOME_NOT_SENT), 3);
    assert_int_equal (api_outcome_exit (API_OUTCOME_BUSY), 75);
    assert_int_equal (api_outcome_exit (API_OUTCOME_AWAY), 75);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (answers_are_judged_by_status),
        cmocka_unit_test (calls_without_an_answer),
        cmocka_unit_test (transient_outcomes_exit_tempfail),
    };
    return cmocka_run_group_tests_name ("apiretry", tests, NULL, NULL);
}

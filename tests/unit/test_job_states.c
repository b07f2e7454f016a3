/* test_job_states.c: the store's list of job states (STORE_JOB_STATES)
 * is the one list: its names round-trip, each state is counted in a
 * fresh store, and the lists written outside C -- api/openapi.yaml, the
 * shell completion, the CLI's help -- name the same states in the same
 * order.  A new state that misses one of them fails here. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "testutil.h"

/* The states' names joined: 'sep' between them, 'last' before the last
 * ("active, releasing, released or lost"). */
static void joined (char *out, size_t len, const char *sep, const char *last)
{
    out[0] = '\0';
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        size_t used = strlen (out);
        const char *before = s == 0 ? "" : s == STORE_JOB_STATE_COUNT - 1 ? last : sep;
        snprintf (out + used, len - used, "%s%s", before, store_job_state_name (s));
    }
}

static char *slurp_source (const char *rel)
{
    char path[4096];
    snprintf (path, sizeof (path), "%s/%s", FMB_SOURCE_DIR, rel);
    return tu_slurp (path, NULL);
}

static void expect_in (const char *rel, const char *text)
{
    char *file = slurp_source (rel);
    assert_non_null (file);
    if (!strstr (file, text))
        fail_msg (
            "%s does not hold \"%s\": the job states in it differ from the "
            "store's (STORE_JOB_STATES in src/store/store.h)",
            rel,
            text);
    free (file);
}

static void names_round_trip (void **state)
{
    (void)state;
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        const char *name = store_job_state_name (s);
        assert_string_not_equal (name, "?");
        assert_int_equal (store_job_state_parse (name), s);
    }
    assert_string_equal (store_job_state_name (STORE_JOB_STATE_COUNT), "?");
    assert_int_equal (store_job_state_parse ("bogus"), -1);
}

/* The unreleased states are the ones store_job_list_unreleased takes,
 * and store_job_state_next_unreleased walks exactly them, in order. */
static void unreleased_walk (void **state)
{
    (void)state;
    int seen = 0;
    for (int s = store_job_state_next_unreleased (-1); s >= 0;
         s = store_job_state_next_unreleased (s)) {
        assert_true (store_job_state_unreleased (s));
        seen++;
    }
    int want = 0;
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++)
        want += store_job_state_unreleased (s);
    assert_int_equal (seen, want);
    assert_true (store_job_state_unreleased (STORE_JOB_ACTIVE));
    assert_true (store_job_state_unreleased (STORE_JOB_LOST));
    assert_false (store_job_state_unreleased (STORE_JOB_RELEASED));
}

/* Every state has its kept count (a job_counts row, made by the
 * migrations): a state added without its migration fails here. */
static void counted (void **state)
{
    (void)state;
    char *dir = tu_mkdtemp ();
    char *db = tu_path (dir, "fmbroker.db");
    char *key = tu_path (dir, "token.key");
    struct store *st;
    struct fmb_error e;
    assert_int_equal (store_open (db, key, &st, &e), 0);
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        unsigned n = 1;
        if (store_job_count (st, s, &n, &e) < 0)
            fail_msg ("state %s: %s", store_job_state_name (s), e.text);
        assert_int_equal (n, 0);
    }
    store_close (st);
    free (db);
    free (key);
    tu_rmtree (dir);
}

static void openapi_names_them (void **state)
{
    (void)state;
    char list[256], text[300];
    joined (list, sizeof (list), ", ", ", ");
    snprintf (text, sizeof (text), "enum: [%s]", list); /* JobState */
    expect_in ("api/openapi.yaml", text);
    snprintf (text, sizeof (text), "required: [%s]", list); /* status' jobs */
    expect_in ("api/openapi.yaml", text);
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        snprintf (text, sizeof (text), "%s: {type: integer}", store_job_state_name (s));
        expect_in ("api/openapi.yaml", text);
    }
}

static void completion_names_them (void **state)
{
    (void)state;
    char list[256], text[300];
    joined (list, sizeof (list), " ", " ");
    snprintf (text, sizeof (text), "--state) COMPREPLY=($(compgen -W \"%s\"", list);
    expect_in ("deploy/fmbroker.bash-completion", text);
}

/* The CLI talks to the broker's API and does not link the store: its
 * help for --state and its status line are checked here, wherever in
 * src/cli they are. */
static void cli_names_them (void **state)
{
    (void)state;
    char list[256], help[300], status[300] = "jobs: ";
    joined (list, sizeof (list), ", ", " or ");
    snprintf (help, sizeof (help), "--state S     %s\\n", list);
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        size_t used = strlen (status);
        snprintf (status + used,
                  sizeof (status) - used,
                  "%%lld %s%s",
                  store_job_state_name (s),
                  s + 1 < STORE_JOB_STATE_COUNT ? ", " : "\\n");
    }
    bool found_help = false, found_status = false;
    DIR *d = opendir (FMB_SOURCE_DIR "/src/cli");
    assert_non_null (d);
    struct dirent *de;
    while ((de = readdir (d))) {
        size_t n = strlen (de->d_name);
        if (n < 3 || strcmp (de->d_name + n - 2, ".c") != 0)
            continue;
        char rel[300];
        snprintf (rel, sizeof (rel), "src/cli/%s", de->d_name);
        char *file = slurp_source (rel);
        assert_non_null (file);
        found_help |= strstr (file, help) != NULL;
        found_status |= strstr (file, status) != NULL;
        free (file);
    }
    closedir (d);
    if (!found_help)
        fail_msg ("no src/cli/*.c holds the help \"%s\"", help);
    if (!found_status)
        fail_msg ("no src/cli/*.c holds the status line \"%s\"", status);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (names_round_trip),
        cmocka_unit_test (unreleased_walk),
        cmocka_unit_test (counted),
        cmocka_unit_test (openapi_names_them),
        cmocka_unit_test (completion_names_them),
        cmocka_unit_test (cli_names_them),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

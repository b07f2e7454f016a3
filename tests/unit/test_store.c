/* test_store.c: every table's operations through the store API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store.h"
#include "store_private.h" /* its connection: to roll back as SQLite may */
#include "testutil.h"

struct fx {
    char *dir;
    char *db;
    char *key;
    struct store *st;
    struct tu_clock clock;
};

static void fx_open (struct fx *fx)
{
    struct fmb_error e;
    if (store_open (fx->db, fx->key, &fx->st, &e) < 0)
        fail_msg ("store_open: %s", e.text);
    store_set_clock (fx->st, tu_clock_now, &fx->clock);
}

static void fx_reopen (struct fx *fx)
{
    store_close (fx->st);
    fx_open (fx);
}

static int setup (void **state)
{
    struct fx *fx = calloc (1, sizeof (*fx));
    fx->dir = tu_mkdtemp ();
    fx->db = tu_path (fx->dir, "fmbroker.db");
    fx->key = tu_path (fx->dir, "token.key");
    fx->clock.now_ms = 1000000;
    fx_open (fx);
    *state = fx;
    return 0;
}

static int teardown (void **state)
{
    struct fx *fx = *state;
    store_close (fx->st);
    free (fx->db);
    free (fx->key);
    tu_rmtree (fx->dir);
    free (fx);
    return 0;
}

static void put_job (
    struct fx *fx, const char *id, uint32_t uid, const char *nodes, const char *token)
{
    struct store_job j = {
        .uid = uid,
        .nodes = (char *)nodes,
        .node_count = 2,
        .ncores = 64,
        .request = "{\"uid\":1000}",
        .state = STORE_JOB_ACTIVE,
        .hwcoll = STORE_HWCOLL_RESERVING,
        .mcast_limit = 23,
        .tcs = 0xa,
        .token = (char *)token,
    };
    struct fmb_error e;
    snprintf (j.id, sizeof (j.id), "%s", id);
    snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-%s", id);
    if (store_job_put (fx->st, &j, &e) < 0)
        fail_msg ("store_job_put %s: %s", id, e.text);
}

/* ---- jobs ---------------------------------------------------------- */

static void job_round_trips_with_its_token (void **state)
{
    struct fx *fx = *state;
    struct store_job *j;
    struct fmb_error e;
    put_job (fx, "42", 1000, "[\"n1\",\"n2\"]", "tok-42");
    assert_int_equal (store_job_get (fx->st, "42", &j, &e), 0);
    assert_string_equal (j->id, "42");
    assert_string_equal (j->fm_job_id, "c1-42");
    assert_int_equal (j->uid, 1000);
    assert_null (j->user);
    assert_string_equal (j->nodes, "[\"n1\",\"n2\"]");
    assert_int_equal (j->node_count, 2);
    assert_int_equal (j->ncores, 64);
    assert_string_equal (j->request, "{\"uid\":1000}");
    assert_int_equal (j->state, STORE_JOB_ACTIVE);
    assert_int_equal (j->hwcoll, STORE_HWCOLL_RESERVING);
    assert_int_equal (j->mcast_limit, 23);
    assert_int_equal (j->tcs, 0xa);
    assert_string_equal (j->token, "tok-42");
    assert_int_equal (j->created_ms, 1000000);
    assert_int_equal (j->released_ms, 0);
    assert_int_equal (j->nvnis, 0);
    store_job_free (j);
    /* brief: the same but for the node list and the request */
    uint16_t v[1];
    assert_int_equal (store_vni_alloc (fx->st, "42", 1, 10, 10, v, &e), 0);
    assert_int_equal (store_job_get_brief (fx->st, "42", &j, &e), 0);
    assert_null (j->nodes);
    assert_null (j->request);
    assert_string_equal (j->fm_job_id, "c1-42");
    assert_int_equal (j->node_count, 2);
    assert_int_equal (j->tcs, 0xa);
    assert_string_equal (j->token, "tok-42");
    assert_int_equal (j->nvnis, 1);
    assert_int_equal (j->vnis[0], 10);
    store_job_free (j);
    assert_int_equal (store_job_get_brief (fx->st, "43", &j, &e), -1);
    assert_int_equal (errno, ENOENT);
}

static void token_never_reaches_the_disk_in_clear (void **state)
{
    struct fx *fx = *state;
    const char *tok = "PLAINTEXT-SESSION-TOKEN-d41d8cd98f00b204";
    put_job (fx, "7", 1000, NULL, tok);
    struct fmb_error e;
    assert_int_equal (
        store_job_set_hwcoll (fx->st, "7", STORE_HWCOLL_RESERVED, NULL, 23, tok, &e),
        0);
    store_close (fx->st);
    fx->st = NULL;
    const char *files[] = {"fmbroker.db", "fmbroker.db-wal"};
    for (int i = 0; i < 2; i++) {
        char *p = tu_path (fx->dir, files[i]);
        size_t len = 0;
        FILE *f = fopen (p, "rb");
        if (f) {
            fclose (f);
            char *buf = tu_slurp (p, &len);
            assert_null (memmem (buf, len, tok, strlen (tok)));
            free (buf);
        }
        free (p);
    }
    fx_open (fx);
}

static void duplicate_and_missing_jobs_are_errors (void **state)
{
    struct fx *fx = *state;
    struct store_job *j = NULL;
    struct store_job dup = {.id = "42", .fm_job_id = "c1-42", .request = "{}"};
    struct fmb_error e;
    put_job (fx, "42", 1000, NULL, NULL);
    assert_int_equal (store_job_put (fx->st, &dup, &e), -1);
    assert_int_equal (errno, EEXIST);
    assert_string_equal (e.text, "job '42' exists");
    assert_int_equal (store_job_get (fx->st, "43", &j, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_null (j);
    assert_int_equal (store_job_set_state (fx->st, "43", STORE_JOB_RELEASING, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (
        store_job_set_hwcoll (fx->st, "43", STORE_HWCOLL_LOST, NULL, 0, NULL, &e), -1);
    assert_int_equal (errno, ENOENT);
}

static void bad_node_list_stores_nothing (void **state)
{
    struct fx *fx = *state;
    struct store_job j = {
        .id = "9", .fm_job_id = "c1-9", .request = "{}", .nodes = "[\"a\",1]"};
    struct store_job *got;
    struct fmb_error e;
    assert_int_equal (store_job_put (fx->st, &j, &e), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (store_job_get (fx->st, "9", &got, &e), -1);
    assert_int_equal (errno, ENOENT);
}

static void state_changes_are_recorded (void **state)
{
    struct fx *fx = *state;
    struct store_job *j;
    struct fmb_error e;
    put_job (fx, "42", 1000, NULL, "t1");
    fx->clock.now_ms += 5000;
    assert_int_equal (
        store_job_set_hwcoll (
            fx->st, "42", STORE_HWCOLL_UNAVAILABLE, "FM timed out", 0, NULL, &e),
        0);
    assert_int_equal (store_job_get (fx->st, "42", &j, &e), 0);
    assert_int_equal (j->hwcoll, STORE_HWCOLL_UNAVAILABLE);
    assert_string_equal (j->hwcoll_reason, "FM timed out");
    assert_string_equal (j->token, "t1"); /* NULL token leaves it */
    assert_int_equal (j->updated_ms, 1005000);
    store_job_free (j);
    assert_int_equal (store_job_set_state (fx->st, "42", STORE_JOB_RELEASING, &e), 0);
    fx->clock.now_ms += 1000;
    assert_int_equal (store_job_set_state (fx->st, "42", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_job_get (fx->st, "42", &j, &e), 0);
    assert_int_equal (j->state, STORE_JOB_RELEASED);
    assert_int_equal (j->released_ms, 1006000);
    store_job_free (j);
    assert_string_equal (store_job_state_name (STORE_JOB_LOST), "lost");
    assert_int_equal (store_job_state_parse ("releasing"), STORE_JOB_RELEASING);
    assert_int_equal (store_job_state_parse ("bogus"), -1);
    assert_string_equal (store_hwcoll_state_name (STORE_HWCOLL_NOT_ELIGIBLE),
                         "not_eligible");
}

struct collect {
    char ids[16][STORE_JOB_ID_MAX + 1];
    int n;
};

static int collect_job (const struct store_job *j, void *arg)
{
    struct collect *c = arg;
    snprintf (c->ids[c->n++], sizeof (c->ids[0]), "%s", j->id);
    return 0;
}

static void listing_filters_and_pages (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct collect c;
    put_job (fx, "a", 1000, NULL, "ta");
    put_job (fx, "b", 2000, NULL, NULL);
    fx->clock.now_ms += 10;
    put_job (fx, "c", 1000, NULL, NULL);
    put_job (fx, "d", 1000, NULL, NULL);
    assert_int_equal (store_job_set_state (fx->st, "d", STORE_JOB_RELEASING, &e), 0);

    struct store_job_filter f = {.state = STORE_JOB_ACTIVE, .uid = -1};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 3);
    assert_string_equal (c.ids[2], "c");

    f = (struct store_job_filter){.state = -1, .uid = 1000};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 3); /* a, c, d */

    f = (struct store_job_filter){.state = -1, .uid = -1, .since_ms = 1000010};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 2);

    f = (struct store_job_filter){.state = -1, .uid = -1, .limit = 2};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 2);
    f.after = c.ids[1];
    struct collect c2 = {0};
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c2, &e), 0);
    assert_int_equal (c2.n, 2);
    assert_string_equal (c2.ids[0], "c");
    assert_string_equal (c2.ids[1], "d");

    /* a state and a user together, a page at a time (each listing has
     * its own query: by state, by user, neither) */
    static const char *const pages[] = {"a", "c", NULL};
    f = (struct store_job_filter){.state = STORE_JOB_ACTIVE, .uid = 1000, .limit = 1};
    for (int i = 0; i < 3; i++) {
        memset (&c, 0, sizeof (c));
        assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
        assert_int_equal (c.n, pages[i] ? 1 : 0);
        if (!pages[i])
            break;
        assert_string_equal (c.ids[0], pages[i]);
        snprintf (c2.ids[i], sizeof (c2.ids[i]), "%s", c.ids[0]);
        f.after = c2.ids[i];
    }
    f = (struct store_job_filter){.state = -1, .uid = 1000, .after = "a"};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 2);
    assert_string_equal (c.ids[0], "c");
    assert_string_equal (c.ids[1], "d");

    /* a user's released jobs (through the user's index), and only theirs */
    put_job (fx, "e", 1000, NULL, NULL);
    put_job (fx, "f", 2000, NULL, NULL);
    assert_int_equal (store_job_set_state (fx->st, "e", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "f", STORE_JOB_RELEASED, &e), 0);
    f = (struct store_job_filter){.state = STORE_JOB_RELEASED, .uid = 1000};
    memset (&c, 0, sizeof (c));
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 1);
    assert_string_equal (c.ids[0], "e");

    unsigned n;
    assert_int_equal (store_job_count (fx->st, STORE_JOB_ACTIVE, &n, &e), 0);
    assert_int_equal (n, 3);
    assert_int_equal (store_job_count (fx->st, STORE_JOB_RELEASING, &n, &e), 0);
    assert_int_equal (n, 1);
}

/* A filter that the listing's index does not hold is tested job by job:
 * a page reads at most scan_max jobs, stops there with a cursor however
 * few it listed, and a caller that follows the cursors sees every match
 * once, in order -- through each of the three listings. */
static void listing_pages_read_a_bounded_number_of_jobs (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    char id[16];
    for (int i = 0; i < 40; i++) { /* j00..j39; every tenth updated later */
        snprintf (id, sizeof (id), "j%02d", i);
        put_job (fx, id, 1000, NULL, NULL);
    }
    fx->clock.now_ms += 1000;
    for (int i = 5; i < 40; i += 10) {
        snprintf (id, sizeof (id), "j%02d", i);
        assert_int_equal (store_job_set_state (fx->st, id, STORE_JOB_RELEASING, &e), 0);
    }
    static const struct store_job_filter filters[] = {
        {.state = -1, .uid = -1},                  /* every job */
        {.state = STORE_JOB_RELEASING, .uid = -1}, /* by state */
        {.state = -1, .uid = 1000},                /* by user */
    };
    for (size_t k = 0; k < sizeof (filters) / sizeof (filters[0]); k++) {
        char next[STORE_JOB_ID_MAX + 1], after[STORE_JOB_ID_MAX + 1] = "";
        struct store_job_filter f = filters[k];
        struct collect all = {0};
        int pages = 0;
        f.since_ms = fx->clock.now_ms;
        f.limit = 100;
        f.scan_max = 8;
        f.next_after = next;
        do {
            struct collect c = {0};
            f.after = after[0] ? after : NULL;
            assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
            /* 8 read; one stored job in ten matches, every releasing one */
            assert_true (c.n <= (k == 1 ? 4 : 1));
            for (int i = 0; i < c.n; i++)
                snprintf (all.ids[all.n++], sizeof (all.ids[0]), "%s", c.ids[i]);
            if (next[0])
                assert_true (strcmp (next, after) > 0); /* forward only */
            snprintf (after, sizeof (after), "%s", next);
            assert_true (++pages <= 20);
        } while (next[0]);
        assert_int_equal (all.n, 4);
        assert_string_equal (all.ids[0], "j05");
        assert_string_equal (all.ids[3], "j35");
        /* the releasing state holds 4 jobs: one page; the others read all
         * 40, 8 a page, and a sixth page finds the end */
        assert_int_equal (pages, k == 1 ? 1 : 6);
        /* without the bound, one page lists them all and says it ended */
        f.scan_max = 0;
        f.after = NULL;
        struct collect c = {0};
        assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
        assert_int_equal (c.n, 4);
        assert_string_equal (next, "");
    }
    /* a full page stops there and gives its last job as the cursor */
    char next[STORE_JOB_ID_MAX + 1];
    struct store_job_filter f = {
        .state = -1, .uid = -1, .limit = 3, .next_after = next};
    struct collect c = {0};
    assert_int_equal (store_job_list (fx->st, &f, collect_job, &c, &e), 0);
    assert_int_equal (c.n, 3);
    assert_string_equal (next, "j02");
}

struct briefs {
    char text[8][80];
    int n;
};

static int collect_brief (const struct store_job_brief *j, void *arg)
{
    struct briefs *b = arg;
    if (b->n < 8)
        snprintf (b->text[b->n++],
                  sizeof (b->text[0]),
                  "%s %s %s %s %lld",
                  j->id,
                  j->fm_job_id,
                  store_job_state_name (j->state),
                  store_hwcoll_state_name (j->hwcoll),
                  (long long)j->updated_ms);
    return 0;
}

/* Reconciliation's view: the jobs an FM reservation may belong to, a
 * state at a time, in pages that go on from the last id. */
static void unreleased_jobs_are_listed_in_brief (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct briefs b = {0};
    put_job (fx, "a", 1000, NULL, "ta");
    put_job (fx, "b", 1000, NULL, NULL);
    put_job (fx, "c", 1000, NULL, NULL);
    put_job (fx, "d", 1000, NULL, NULL);
    put_job (fx, "e", 1000, NULL, NULL);
    put_job (fx, "f", 1000, NULL, NULL);
    fx->clock.now_ms += 7;
    assert_int_equal (
        store_job_set_hwcoll (fx->st, "a", STORE_HWCOLL_RESERVED, NULL, 4, "t", &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "b", STORE_JOB_LOST, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "c", STORE_JOB_RELEASING, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "d", STORE_JOB_RELEASING, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "d", STORE_JOB_RELEASED, &e), 0);
    /* active: a, e, f -- two pages of 2, the second short */
    assert_int_equal (store_job_list_unreleased (
                          fx->st, STORE_JOB_ACTIVE, "", 2, collect_brief, &b, &e),
                      2);
    assert_int_equal (store_job_list_unreleased (
                          fx->st, STORE_JOB_ACTIVE, "e", 2, collect_brief, &b, &e),
                      1);
    assert_int_equal (store_job_list_unreleased (
                          fx->st, STORE_JOB_LOST, "", 2, collect_brief, &b, &e),
                      1);
    assert_int_equal (b.n, 4);
    assert_string_equal (b.text[0], "a c1-a active reserved 1000007");
    assert_string_equal (b.text[1], "e c1-e active reserving 1000000");
    assert_string_equal (b.text[2], "f c1-f active reserving 1000000");
    assert_string_equal (b.text[3], "b c1-b lost reserving 1000007");
    /* the other states are not the FM's to hold */
    assert_int_equal (store_job_list_unreleased (
                          fx->st, STORE_JOB_RELEASING, "", 2, collect_brief, &b, &e),
                      -1);
    assert_int_equal (errno, EINVAL);
}

static void released_job_can_be_replaced_once_its_vnis_are_free (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[1];
    struct store_job *j;
    put_job (fx, "42", 1000, "[\"n1\"]", "t");
    assert_int_equal (store_step_put (fx->st, "42", "0", STORE_STEP_CLEANED, NULL, &e),
                      0);
    assert_int_equal (store_vni_alloc (fx->st, "42", 1, 10, 20, v, &e), 0);
    assert_int_equal (store_job_delete (fx->st, "42", &e), -1);
    assert_int_equal (errno, EBUSY);
    assert_int_equal (store_job_get (fx->st, "42", &j, &e), 0);
    store_job_free (j);
    assert_int_equal (store_vni_free_job (fx->st, "42", &e), 0);
    assert_int_equal (store_job_delete (fx->st, "42", &e), 0);
    assert_int_equal (store_job_get (fx->st, "42", &j, &e), -1);
    assert_int_equal (errno, ENOENT);
    put_job (fx, "42", 2000, NULL, NULL); /* steps and nodes went with it */
    enum store_step_state s;
    assert_int_equal (store_step_get (fx->st, "42", "0", &s, &e), -1);
    assert_int_equal (store_job_delete (fx->st, "43", &e), -1);
    assert_int_equal (errno, ENOENT);
}

/* ---- steps and nodes ----------------------------------------------- */

static void steps_are_upserted_per_job (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    enum store_step_state s;
    put_job (fx, "42", 1000, NULL, NULL);
    const char *flux_step = "\xc6\x92/0/1"; /* arbitrary UTF-8 with '/' */
    assert_int_equal (
        store_step_put (fx->st, "42", flux_step, STORE_STEP_CLEANING, NULL, &e), 0);
    assert_int_equal (store_step_get (fx->st, "42", flux_step, &s, &e), 0);
    assert_int_equal (s, STORE_STEP_CLEANING);
    assert_int_equal (
        store_step_put (fx->st, "42", flux_step, STORE_STEP_CLEANED, NULL, &e), 0);
    assert_int_equal (store_step_get (fx->st, "42", flux_step, &s, &e), 0);
    assert_int_equal (s, STORE_STEP_CLEANED);
    assert_int_equal (store_step_get (fx->st, "42", "other", &s, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (store_step_put (fx->st, "43", "0", STORE_STEP_CLEANING, NULL, &e),
                      -1);
    assert_int_equal (errno, ENOENT);
    assert_string_equal (e.text, "job '43' not found");
}

static int count_pending (const struct store_node *n, void *arg)
{
    if (n->cxi == STORE_CXI_PENDING)
        (*(int *)arg)++;
    return 0;
}

static int count_nodes (const struct store_node *n, void *arg)
{
    (void)n;
    (*(int *)arg)++;
    return 0;
}

/* store_node_waiting's two answers for job 'id', checked */
static void assert_waiting (struct fx *fx, const char *id, bool nodes, bool waiting)
{
    struct fmb_error e;
    bool n, w;
    assert_int_equal (store_node_waiting (fx->st, id, &n, &w, &e), 0);
    assert_int_equal (n, nodes);
    assert_int_equal (w, waiting);
}

static void node_reports_count_towards_release (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    int pending = 0;
    put_job (fx, "42", 1000, "[\"n1\",\"n2\"]", NULL);
    assert_waiting (fx, "42", true, true);
    assert_int_equal (store_node_list (fx->st, "42", NULL, count_pending, &pending, &e),
                      0);
    assert_int_equal (pending, 2);
    assert_int_equal (
        store_node_put (fx->st, "42", "n1", STORE_CXI_DESTROYED, NULL, &e), 0);
    assert_int_equal (
        store_node_put (fx->st, "42", "n2", STORE_CXI_FAILED, "EBUSY for 30 s", &e), 0);
    assert_waiting (fx, "42", true, true);
    pending = 0; /* n2 (failed) is still to report destroyed, n1 not */
    assert_int_equal (store_node_list_waiting (fx->st, "42", count_nodes, &pending, &e),
                      0);
    assert_int_equal (pending, 1);
    /* one node's report alone: n2's (failed), and none for a stranger */
    pending = 0;
    assert_int_equal (store_node_list (fx->st, "42", "n2", count_nodes, &pending, &e),
                      0);
    assert_int_equal (pending, 1);
    assert_int_equal (store_node_list (fx->st, "42", "n1", count_pending, &pending, &e),
                      0);
    assert_int_equal (pending, 1); /* n1 is destroyed, not pending */
    assert_int_equal (store_node_list (fx->st, "42", "n7", count_nodes, &pending, &e),
                      0);
    assert_int_equal (pending, 1);
    assert_int_equal (
        store_node_put (fx->st, "42", "n2", STORE_CXI_DESTROYED, NULL, &e), 0);
    assert_waiting (fx, "42", true, false);
    /* a report that comes back (created again) waits again */
    assert_int_equal (store_node_put (fx->st, "42", "n1", STORE_CXI_CREATED, NULL, &e),
                      0);
    assert_waiting (fx, "42", true, true);
    /* a job given only a node count learns its nodes from the reports */
    put_job (fx, "43", 1000, NULL, NULL);
    assert_waiting (fx, "43", false, false);
    assert_int_equal (store_node_put (fx->st, "43", "n9", STORE_CXI_CREATED, NULL, &e),
                      0);
    assert_waiting (fx, "43", true, true);
    assert_int_equal (store_node_put (fx->st, "44", "n9", STORE_CXI_CREATED, NULL, &e),
                      -1);
    assert_int_equal (errno, ENOENT);
}

/* ---- VNI pool ------------------------------------------------------ */

static void vni_allocation_is_next_fit_round_robin (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[4];
    put_job (fx, "a", 1, NULL, NULL);
    put_job (fx, "b", 1, NULL, NULL);
    put_job (fx, "c", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "a", 2, 100, 104, v, &e), 0);
    assert_int_equal (v[0], 100);
    assert_int_equal (v[1], 101);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 100, 104, v, &e), 0);
    assert_int_equal (v[0], 102);
    assert_int_equal (store_vni_free_job (fx->st, "a", &e), 0);
    /* 100 and 101 are free again, but next-fit goes on from 102 and wraps */
    assert_int_equal (store_vni_alloc (fx->st, "c", 3, 100, 104, v, &e), 0);
    assert_int_equal (v[0], 103);
    assert_int_equal (v[1], 104);
    assert_int_equal (v[2], 100);
    struct store_job *j;
    assert_int_equal (store_job_get (fx->st, "c", &j, &e), 0);
    assert_int_equal (j->nvnis, 3);
    assert_int_equal (j->vnis[0], 103); /* in allocation order */
    assert_int_equal (j->vnis[2], 100);
    store_job_free (j);
}

/* Next-fit over a pool with holes: past runs of held VNIs, a hole at the
 * bottom after the wrap, and none left at the end. */
static void next_fit_finds_the_holes_in_order (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[1];
    char id[8];
    for (int i = 0; i <= 20; i++) {
        snprintf (id, sizeof (id), "j%d", i);
        put_job (fx, id, 1, NULL, NULL);
        assert_int_equal (store_vni_alloc (fx->st, id, 1, 100, 120, v, &e), 0);
        assert_int_equal (v[0], 100 + i);
    }
    static const char *const freed[] = {"j0", "j5", "j10", "j11"};
    static const unsigned want[] = {100, 105, 110, 111};
    for (int i = 0; i < 4; i++)
        assert_int_equal (store_vni_free_job (fx->st, freed[i], &e), 0);
    for (int i = 0; i < 4; i++) {
        snprintf (id, sizeof (id), "n%d", i);
        put_job (fx, id, 1, NULL, NULL);
        assert_int_equal (store_vni_alloc (fx->st, id, 1, 100, 120, v, &e), 0);
        assert_int_equal (v[0], want[i]);
    }
    put_job (fx, "full", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "full", 1, 100, 120, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_string_equal (e.text, "no free VNI in 100-120");
    /* pools of two and one: the hole at the very top, and none */
    assert_int_equal (store_vni_alloc (fx->st, "full", 1, 120, 121, v, &e), 0);
    assert_int_equal (v[0], 121);
    put_job (fx, "one", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "one", 1, 120, 120, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_int_equal (store_vni_alloc (fx->st, "one", 1, 122, 122, v, &e), 0);
    assert_int_equal (v[0], 122);
}

/* The VM steps SQLite ran for the cached statement 'sql' since the last
 * call. */
static int statement_steps (struct fx *fx, const char *sql)
{
    for (sqlite3_stmt *s = sqlite3_next_stmt (fx->st->db, NULL); s;
         s = sqlite3_next_stmt (fx->st->db, s))
        if (strcmp (sqlite3_sql (s), sql) == 0)
            return sqlite3_stmt_status (s, SQLITE_STMTSTATUS_VM_STEP, 1);
    fail_msg ("the statement was never prepared: %s", sql);
    return -1;
}

static int first_free_steps (struct fx *fx)
{
    return statement_steps (fx, SQL_VNI_FIRST_FREE);
}

/* Jobs j1000 to j5000, each holding its VNI of the pool 1000-5000. */
static void fill_pool (struct fx *fx)
{
    struct fmb_error e;
    uint16_t v[1];
    char id[16];
    assert_int_equal (store_begin (fx->st, &e), 0);
    for (int i = 1000; i <= 5000; i++) {
        snprintf (id, sizeof (id), "j%d", i);
        put_job (fx, id, 1, NULL, NULL);
        assert_int_equal (store_vni_alloc (fx->st, id, 1, 1000, 5000, v, &e), 0);
    }
    assert_int_equal (store_commit (fx->st, &e), 0);
}

/* Finding a free VNI reads the held ones up to the first hole, however
 * many more are held: with 4,000 held and the cursor wrapped, a hole
 * 100 VNIs on costs a small part of one 3,400 on.  (Taking the least of
 * every candidate read all 4,000 both times.) */
static void finding_a_free_vni_reads_up_to_the_first_hole (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[1];
    fill_pool (fx);
    assert_int_equal (store_vni_free_job (fx->st, "j1100", &e), 0);
    assert_int_equal (store_vni_free_job (fx->st, "j4500", &e), 0);
    put_job (fx, "near", 1, NULL, NULL);
    put_job (fx, "far", 1, NULL, NULL);
    first_free_steps (fx);
    assert_int_equal (store_vni_alloc (fx->st, "near", 1, 1000, 5000, v, &e), 0);
    assert_int_equal (v[0], 1100);
    int near = first_free_steps (fx);
    assert_int_equal (store_vni_alloc (fx->st, "far", 1, 1000, 5000, v, &e), 0);
    assert_int_equal (v[0], 4500);
    int far = first_free_steps (fx);
    print_message ("# VM steps: hole 100 on %d, 3,400 on %d\n", near, far);
    if (near * 10 > far)
        fail_msg ("a hole 100 VNIs on cost %d steps, one 3,400 on %d", near, far);
}

/* An exhausted pool is refused from the kept counts, without a search
 * (which would read all 4,001 VNIs twice at each try); VNIs taken outside
 * the pool (it was changed) do not count against it, and one free VNI is
 * not two. */
static void an_exhausted_pool_is_refused_without_a_search (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[2];
    fill_pool (fx);
    put_job (fx, "late", 1, NULL, NULL);
    first_free_steps (fx);
    assert_int_equal (store_vni_alloc (fx->st, "late", 1, 1000, 5000, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_string_equal (e.text, "no free VNI in 1000-5000");
    assert_int_equal (first_free_steps (fx), 0);
    /* the pool moved up: 4,000 VNIs below it are no reason to refuse */
    assert_int_equal (store_vni_alloc (fx->st, "late", 1, 5000, 5001, v, &e), 0);
    assert_int_equal (v[0], 5001);
    /* quarantine holds a VNI as holding does; one free is not two */
    assert_int_equal (store_vni_quarantine (fx->st, "j1000", 0, &e), 0);
    assert_int_equal (store_vni_free_job (fx->st, "j1001", &e), 0);
    put_job (fx, "pair", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "pair", 2, 1000, 5000, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_int_equal (store_vni_alloc (fx->st, "pair", 1, 1000, 5000, v, &e), 0);
    assert_int_equal (v[0], 1001);
    /* a job that takes no VNI does not ask, even of counts gone wrong */
    assert_int_equal (
        sqlite3_exec (fx->st->db,
                      "UPDATE tallies SET n = n + 10 WHERE name = 'vnis_held'",
                      NULL,
                      NULL,
                      NULL),
        SQLITE_OK);
    assert_int_equal (store_vni_alloc (fx->st, "pair", 0, 1000, 5000, v, &e), 0);
    /* counts that cannot be read leave it to the search */
    assert_int_equal (store_vni_free_job (fx->st, "j1002", &e), 0);
    assert_int_equal (sqlite3_exec (fx->st->db,
                                    "DELETE FROM tallies WHERE name = 'vnis_held'",
                                    NULL,
                                    NULL,
                                    NULL),
                      SQLITE_OK);
    put_job (fx, "blind", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "blind", 1, 1000, 5000, v, &e), 0);
    assert_int_equal (v[0], 1002);
}

/* Whether a node is still to report costs the same for a job of 3,000
 * nodes, reported in node order but for the last, as for one of 3: the
 * epilog wave of a large job asks it at every report (counting the
 * nodes read all 3,000 each time). */
static void a_node_left_to_report_is_found_in_a_lookup (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    char name[16];
    char *nodes = malloc (3000 * 12 + 4), *at = nodes;
    assert_non_null (nodes);
    *at++ = '[';
    for (int i = 0; i < 3000; i++)
        at += sprintf (at, "%s\"n%04d\"", i ? "," : "", i);
    strcpy (at, "]");
    put_job (fx, "big", 1000, nodes, NULL);
    put_job (fx, "small", 1000, "[\"n0000\",\"n0001\",\"n0002\"]", NULL);
    free (nodes);
    assert_int_equal (store_begin (fx->st, &e), 0);
    for (int i = 0; i < 2999; i++) {
        snprintf (name, sizeof (name), "n%04d", i);
        assert_int_equal (
            store_node_put (fx->st, "big", name, STORE_CXI_DESTROYED, NULL, &e), 0);
    }
    assert_int_equal (store_commit (fx->st, &e), 0);
    assert_waiting (fx, "small", true, true);
    statement_steps (fx, SQL_NODE_WAITING);
    assert_waiting (fx, "small", true, true);
    int small = statement_steps (fx, SQL_NODE_WAITING);
    assert_waiting (fx, "big", true, true);
    int big = statement_steps (fx, SQL_NODE_WAITING);
    print_message ("# VM steps: 3 nodes %d, 3,000 nodes %d\n", small, big);
    if (big > small + 10)
        fail_msg ("3,000 nodes cost %d steps, 3 nodes %d", big, small);
    /* and naming the one left reads that one, not the 2,999 others */
    int left = 0;
    assert_int_equal (store_node_list_waiting (fx->st, "big", count_nodes, &left, &e),
                      0);
    assert_int_equal (left, 1);
    int steps = statement_steps (fx, SQL_NODE_LIST_WAITING);
    if (steps > 50)
        fail_msg ("naming 1 node left of 3,000 cost %d steps", steps);
    assert_int_equal (
        store_node_put (fx->st, "big", "n2999", STORE_CXI_DESTROYED, NULL, &e), 0);
    assert_waiting (fx, "big", true, false);
}

static void round_robin_resumes_after_reopen (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[1];
    unsigned cursor;
    put_job (fx, "a", 1, NULL, NULL);
    put_job (fx, "b", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "a", 1, 1024, 65535, v, &e), 0);
    assert_int_equal (v[0], 1024);
    assert_int_equal (store_vni_free_job (fx->st, "a", &e), 0);
    fx_reopen (fx);
    assert_int_equal (store_vni_cursor (fx->st, &cursor, &e), 0);
    assert_int_equal (cursor, 1024);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 1024, 65535, v, &e), 0);
    assert_int_equal (v[0], 1025);
}

static void quarantined_vni_is_never_handed_out (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[2];
    unsigned freed, held, quarantined;
    put_job (fx, "a", 1, NULL, NULL);
    put_job (fx, "b", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "a", 2, 10, 11, v, &e), 0);
    assert_int_equal (store_vni_quarantine (fx->st, "a", fx->clock.now_ms + 300000, &e),
                      0);
    assert_int_equal (store_vni_counts (fx->st, &held, &quarantined, &e), 0);
    assert_int_equal (held, 0);
    assert_int_equal (quarantined, 2);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 10, 11, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_string_equal (e.text, "no free VNI in 10-11");
    assert_int_equal (store_vni_expire (fx->st, fx->clock.now_ms + 299999, &freed, &e),
                      0);
    assert_int_equal (freed, 0);
    assert_int_equal (store_vni_expire (fx->st, fx->clock.now_ms + 300000, &freed, &e),
                      0);
    assert_int_equal (freed, 2);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 10, 11, v, &e), 0);
}

static void quarantine_until_nodes_report_does_not_expire (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[1];
    unsigned freed;
    put_job (fx, "a", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "a", 1, 10, 10, v, &e), 0);
    assert_int_equal (store_vni_quarantine (fx->st, "a", 0, &e), 0);
    assert_int_equal (store_vni_expire (fx->st, INT64_MAX, &freed, &e), 0);
    assert_int_equal (freed, 0);
    assert_int_equal (store_vni_free_job (fx->st, "a", &e), 0);
    put_job (fx, "b", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 10, 10, v, &e), 0);
}

static int count_vnis (const struct store_vni *v, void *arg)
{
    (void)v;
    (*(int *)arg)++;
    return 0;
}

static void vni_allocation_is_all_or_nothing (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[4];
    unsigned cursor;
    int n = 0;
    put_job (fx, "a", 1, NULL, NULL);
    put_job (fx, "b", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "a", 2, 1, 3, v, &e), 0);
    assert_int_equal (store_vni_alloc (fx->st, "b", 2, 1, 3, v, &e), -1);
    assert_int_equal (errno, ENOSPC);
    assert_int_equal (store_vni_list (fx->st, 0, 0, count_vnis, &n, &e), 0);
    assert_int_equal (n, 2);
    assert_int_equal (store_vni_cursor (fx->st, &cursor, &e), 0);
    assert_int_equal (cursor, 2);
    assert_int_equal (store_vni_alloc (fx->st, "nojob", 1, 1, 3, v, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (store_vni_alloc (fx->st, "a", 5, 1, 3, v, &e), -1);
    assert_int_equal (errno, EINVAL);
}

/* ---- outbox -------------------------------------------------------- */

struct seen {
    int64_t ids[8];
    unsigned attempts[8];
    int n;
};

static int collect_outbox (const struct store_outbox_entry *en, void *arg)
{
    struct seen *s = arg;
    s->attempts[s->n] = en->attempts;
    s->ids[s->n++] = en->id;
    return 0;
}

static void outbox_runs_in_due_order_and_retries (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    int64_t a, b, a2, next;
    unsigned depth;
    struct seen s = {0};
    assert_int_equal (store_outbox_next_ms (fx->st, &next, &e), 0);
    assert_true (next == INT64_MAX); /* empty: nothing is ever due */
    assert_int_equal (
        store_outbox_put (fx->st, "fm_delete_job", "c1-1", NULL, 500, &a, &e), 0);
    assert_int_equal (
        store_outbox_put (fx->st, "fm_delete_job", "c1-2", NULL, 100, &b, &e), 0);
    /* the same operation again is the same entry (RM retries, hook re-runs) */
    assert_int_equal (
        store_outbox_put (fx->st, "fm_delete_job", "c1-1", "", 900, &a2, &e), 0);
    assert_int_equal (a, a2);
    assert_int_equal (store_outbox_depth (fx->st, &depth, &e), 0);
    assert_int_equal (depth, 2);
    assert_int_equal (store_outbox_next_ms (fx->st, &next, &e), 0);
    assert_int_equal (next, 100);
    assert_int_equal (store_outbox_due (fx->st, 99, 0, collect_outbox, &s, &e), 0);
    assert_int_equal (s.n, 0);
    assert_int_equal (store_outbox_due (fx->st, 1000, 0, collect_outbox, &s, &e), 0);
    assert_int_equal (s.n, 2);
    assert_int_equal (s.ids[0], b);
    assert_int_equal (s.ids[1], a);
    assert_int_equal (store_outbox_retry (fx->st, b, 2000, "FM: 503", &e), 0);
    s.n = 0;
    assert_int_equal (store_outbox_due (fx->st, 1000, 0, collect_outbox, &s, &e), 0);
    assert_int_equal (s.n, 1);
    assert_int_equal (s.ids[0], a);
    s.n = 0;
    assert_int_equal (store_outbox_due (fx->st, 2000, 1, collect_outbox, &s, &e), 0);
    assert_int_equal (s.n, 1); /* limit */
    assert_int_equal (store_outbox_done (fx->st, a, &e), 0);
    assert_int_equal (store_outbox_done (fx->st, a, &e), -1);
    assert_int_equal (errno, ENOENT);
    s.n = 0;
    assert_int_equal (store_outbox_due (fx->st, 2000, 0, collect_outbox, &s, &e), 0);
    assert_int_equal (s.n, 1);
    assert_int_equal (s.attempts[0], 1);
    /* it survives a restart */
    fx_reopen (fx);
    assert_int_equal (store_outbox_depth (fx->st, &depth, &e), 0);
    assert_int_equal (depth, 1);
}

/* ---- events -------------------------------------------------------- */

struct evs {
    int64_t seq[8];
    char type[8][32];
    int n;
};

static int collect_event (const struct store_event *ev, void *arg)
{
    struct evs *s = arg;
    s->seq[s->n] = ev->seq;
    snprintf (s->type[s->n++], 32, "%s", ev->type);
    return 0;
}

static void events_are_ordered_and_sequence_survives_reopen (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    int64_t s1, s2, s3, last;
    struct evs got = {0};
    assert_int_equal (store_event_last (fx->st, &last, &e), 0);
    assert_int_equal (last, 0);
    assert_int_equal (
        store_event_append (fx->st, "fm_disconnected", NULL, NULL, &s1, &e), 0);
    assert_int_equal (
        store_event_append (
            fx->st, "reservation_lost", "42", "{\"fm_job_id\":\"c1-42\"}", &s2, &e),
        0);
    assert_true (s2 > s1);
    assert_int_equal (store_event_list (fx->st, s1, 0, collect_event, &got, &e), 0);
    assert_int_equal (got.n, 1);
    assert_string_equal (got.type[0], "reservation_lost");
    fx_reopen (fx);
    assert_int_equal (store_event_last (fx->st, &last, &e), 0);
    assert_int_equal (last, s2);
    assert_int_equal (
        store_event_append (fx->st, "fm_reconnected", NULL, "{}", &s3, &e), 0);
    assert_true (s3 > s2);
    got.n = 0;
    assert_int_equal (store_event_list (fx->st, 0, 2, collect_event, &got, &e), 0);
    assert_int_equal (got.n, 2);
    assert_int_equal (got.seq[0], s1);
    assert_int_equal (store_event_append (fx->st, "x", NULL, "[1]", NULL, &e), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (store_event_append (fx->st, "", NULL, NULL, NULL, &e), -1);
}

/* ---- retention ----------------------------------------------------- */

static void prune_takes_old_history_only (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_job *j;
    uint16_t v[1];
    unsigned nj, ne;
    int64_t seq, last;
    /* at t0: three jobs released, one still holding VNIs in quarantine,
     * one active; two events */
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf (id, sizeof (id), "old%d", i);
        put_job (fx, id, 1000, "[\"n1\"]", "t");
        assert_int_equal (
            store_step_put (fx->st, id, "0", STORE_STEP_CLEANED, NULL, &e), 0);
        assert_int_equal (store_job_set_state (fx->st, id, STORE_JOB_RELEASED, &e), 0);
    }
    put_job (fx, "quar", 1000, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "quar", 1, 10, 20, v, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "quar", STORE_JOB_RELEASED, &e), 0);
    put_job (fx, "live", 1000, NULL, NULL);
    assert_int_equal (store_event_append (fx->st, "a", NULL, NULL, NULL, &e), 0);
    assert_int_equal (store_event_append (fx->st, "b", NULL, NULL, NULL, &e), 0);
    /* an hour later: one more released job and one event, both young */
    fx->clock.now_ms += 3600 * 1000;
    put_job (fx, "young", 1000, NULL, NULL);
    assert_int_equal (store_job_set_state (fx->st, "young", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_event_append (fx->st, "c", NULL, NULL, &seq, &e), 0);

    int64_t cut = fx->clock.now_ms - 1800 * 1000;
    /* batches of two: the old released jobs go two, then one */
    assert_int_equal (store_prune (fx->st, cut, cut, 2, &nj, &ne, &e), 0);
    assert_int_equal (nj, 2);
    assert_int_equal (ne, 2);
    assert_int_equal (store_prune (fx->st, cut, cut, 2, &nj, &ne, &e), 0);
    assert_int_equal (nj, 1);
    assert_int_equal (ne, 0);
    assert_int_equal (store_prune (fx->st, cut, cut, 2, &nj, &ne, &e), 0);
    assert_int_equal (nj, 0);
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf (id, sizeof (id), "old%d", i);
        assert_int_equal (store_job_get (fx->st, id, &j, &e), -1);
        assert_int_equal (errno, ENOENT);
        enum store_step_state ss;
        assert_int_equal (store_step_get (fx->st, id, "0", &ss, &e), -1);
    }
    const char *kept[] = {"quar", "live", "young"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal (store_job_get (fx->st, kept[i], &j, &e), 0);
        store_job_free (j);
    }
    /* the young event stays, and the sequence goes on past it */
    struct evs got = {0};
    assert_int_equal (store_event_list (fx->st, 0, 0, collect_event, &got, &e), 0);
    assert_int_equal (got.n, 1);
    assert_int_equal (got.seq[0], seq);
    assert_int_equal (store_event_last (fx->st, &last, &e), 0);
    assert_int_equal (last, seq);
    /* once its VNIs are free, the quarantined job goes too */
    assert_int_equal (store_vni_free_job (fx->st, "quar", &e), 0);
    assert_int_equal (store_prune (fx->st, cut, cut, 2, &nj, &ne, &e), 0);
    assert_int_equal (nj, 1);
    assert_int_equal (store_job_get (fx->st, "quar", &j, &e), -1);
}

/* The prune and the recovery read through their indexes: a plan that
 * scans jobs or sorts them costs time with every job ever stored. */
static void expect_counts (struct fx *fx, unsigned active, unsigned released)
{
    struct fmb_error e;
    unsigned n;
    assert_int_equal (store_job_count (fx->st, STORE_JOB_ACTIVE, &n, &e), 0);
    assert_int_equal (n, active);
    assert_int_equal (store_job_count (fx->st, STORE_JOB_RELEASED, &n, &e), 0);
    assert_int_equal (n, released);
    assert_int_equal (store_job_count (fx->st, STORE_JOB_LOST, &n, &e), 0);
    assert_int_equal (n, 0);
}

/* The counts by state follow every way a job comes, moves and goes:
 * put, state changes, a rolled-back change, prune, reopen. */
static void job_counts_follow_every_change (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    unsigned nj, ne;
    expect_counts (fx, 0, 0);
    for (int i = 0; i < 5; i++) {
        char id[8];
        snprintf (id, sizeof (id), "c%d", i);
        put_job (fx, id, 1000, NULL, NULL);
    }
    expect_counts (fx, 5, 0);
    assert_int_equal (store_job_set_state (fx->st, "c0", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "c1", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "c1", STORE_JOB_RELEASED, &e), 0);
    expect_counts (fx, 3, 2);
    assert_int_equal (store_begin (fx->st, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "c2", STORE_JOB_RELEASED, &e), 0);
    store_rollback (fx->st);
    expect_counts (fx, 3, 2);
    fx->clock.now_ms += 1000;
    assert_int_equal (store_prune (fx->st, fx->clock.now_ms, 0, 100, &nj, &ne, &e), 0);
    assert_int_equal (nj, 2);
    expect_counts (fx, 3, 0);
    fx_reopen (fx);
    expect_counts (fx, 3, 0);
}

/* What metrics, status and health show besides the job counts: VNIs,
 * live multicast reservations, the outbox depth. */
struct tallies {
    unsigned held, quarantined, mcast_jobs, mcast_addrs, outbox;
};

static void expect_tallies (struct fx *fx, struct tallies want, int line)
{
    struct tallies got;
    struct fmb_error e;
    assert_int_equal (store_vni_counts (fx->st, &got.held, &got.quarantined, &e), 0);
    assert_int_equal (
        store_hwcoll_usage (fx->st, &got.mcast_jobs, &got.mcast_addrs, &e), 0);
    assert_int_equal (store_outbox_depth (fx->st, &got.outbox, &e), 0);
    if (memcmp (&got, &want, sizeof (got)) != 0)
        fail_msg (
            "line %d: held %u quarantined %u mcast %u/%u outbox %u, wanted "
            "%u %u %u/%u %u",
            line,
            got.held,
            got.quarantined,
            got.mcast_jobs,
            got.mcast_addrs,
            got.outbox,
            want.held,
            want.quarantined,
            want.mcast_jobs,
            want.mcast_addrs,
            want.outbox);
}
#define EXPECT_TALLIES(...) expect_tallies (fx, (struct tallies){__VA_ARGS__}, __LINE__)

/* The job's multicast state, as the broker sets it; must succeed. */
static void set_hwcoll (struct fx *fx,
                        const char *id,
                        enum store_hwcoll_state hwcoll,
                        const char *reason,
                        unsigned mcast_limit)
{
    struct fmb_error e;
    if (store_job_set_hwcoll (fx->st, id, hwcoll, reason, mcast_limit, NULL, &e) < 0)
        fail_msg ("set hwcoll of %s: %s", id, e.text);
}

/* Kept by triggers (schema 6), they follow every way a VNI, a
 * reservation or an outbox entry comes, changes and goes, a rolled-back
 * change, and a reopen. */
static void tallies_follow_every_change (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    uint16_t v[2];
    unsigned n;
    int64_t id1, id2, again;
    EXPECT_TALLIES (0, 0, 0, 0, 0);
    put_job (fx, "a", 1000, NULL, NULL); /* reserving: not counted yet */
    put_job (fx, "b", 1000, NULL, NULL);
    put_job (fx, "c", 1000, NULL, NULL);
    EXPECT_TALLIES (0, 0, 0, 0, 0);
    set_hwcoll (fx, "a", STORE_HWCOLL_RESERVED, NULL, 4);
    set_hwcoll (fx, "b", STORE_HWCOLL_RESERVED, NULL, 6);
    set_hwcoll (fx, "c", STORE_HWCOLL_UNAVAILABLE, "x", 0);
    EXPECT_TALLIES (.mcast_jobs = 2, .mcast_addrs = 10);
    /* a new size, the same size again, and a job that is put reserved */
    set_hwcoll (fx, "a", STORE_HWCOLL_RESERVED, NULL, 8);
    set_hwcoll (fx, "a", STORE_HWCOLL_RESERVED, NULL, 8);
    struct store_job d = {.request = "{}",
                          .state = STORE_JOB_ACTIVE,
                          .hwcoll = STORE_HWCOLL_RESERVED,
                          .mcast_limit = 5};
    snprintf (d.id, sizeof (d.id), "d");
    snprintf (d.fm_job_id, sizeof (d.fm_job_id), "c1-d");
    assert_int_equal (store_job_put (fx->st, &d, &e), 0);
    EXPECT_TALLIES (.mcast_jobs = 3, .mcast_addrs = 19);
    /* releasing still holds it; released and lost do not */
    assert_int_equal (store_job_set_state (fx->st, "a", STORE_JOB_RELEASING, &e), 0);
    EXPECT_TALLIES (.mcast_jobs = 3, .mcast_addrs = 19);
    assert_int_equal (store_job_set_state (fx->st, "a", STORE_JOB_RELEASED, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "b", STORE_JOB_LOST, &e), 0);
    EXPECT_TALLIES (.mcast_jobs = 1, .mcast_addrs = 5);
    assert_int_equal (store_job_set_state (fx->st, "b", STORE_JOB_ACTIVE, &e), 0);
    /* released at the FM as the broker does it: its size set to 0 */
    set_hwcoll (fx, "d", STORE_HWCOLL_RELEASED, NULL, 0);
    EXPECT_TALLIES (.mcast_jobs = 1, .mcast_addrs = 6);
    /* a live reserved job deleted */
    put_job (fx, "e", 1000, NULL, NULL);
    set_hwcoll (fx, "e", STORE_HWCOLL_RESERVED, NULL, 3);
    EXPECT_TALLIES (.mcast_jobs = 2, .mcast_addrs = 9);
    assert_int_equal (store_job_delete (fx->st, "e", &e), 0);
    EXPECT_TALLIES (.mcast_jobs = 1, .mcast_addrs = 6);

    /* VNIs: held, quarantined, expired, freed */
    assert_int_equal (store_vni_alloc (fx->st, "b", 2, 1024, 1100, v, &e), 0);
    assert_int_equal (store_vni_alloc (fx->st, "c", 1, 1024, 1100, v, &e), 0);
    EXPECT_TALLIES (3, 0, 1, 6, 0);
    assert_int_equal (store_vni_quarantine (fx->st, "b", 2000000, &e), 0);
    assert_int_equal (store_vni_quarantine (fx->st, "b", 2000000, &e), 0);
    EXPECT_TALLIES (1, 2, 1, 6, 0);
    assert_int_equal (store_vni_expire (fx->st, 3000000, &n, &e), 0);
    assert_int_equal (n, 2);
    EXPECT_TALLIES (1, 0, 1, 6, 0);
    assert_int_equal (store_vni_free_job (fx->st, "c", &e), 0);
    EXPECT_TALLIES (0, 0, 1, 6, 0);
    /* quarantined VNIs freed when the nodes report */
    assert_int_equal (store_vni_alloc (fx->st, "c", 2, 1024, 1100, v, &e), 0);
    assert_int_equal (store_vni_quarantine (fx->st, "c", 0, &e), 0);
    EXPECT_TALLIES (0, 2, 1, 6, 0);
    assert_int_equal (store_vni_free_job (fx->st, "c", &e), 0);
    EXPECT_TALLIES (0, 0, 1, 6, 0);

    /* the outbox: a repeated put is the same entry */
    assert_int_equal (store_outbox_put (fx->st, "delete", "c1-a", "", 0, &id1, &e), 0);
    assert_int_equal (store_outbox_put (fx->st, "delete", "c1-b", "", 0, &id2, &e), 0);
    assert_int_equal (store_outbox_put (fx->st, "delete", "c1-a", "", 0, &again, &e),
                      0);
    assert_int_equal (again, id1);
    EXPECT_TALLIES (0, 0, 1, 6, 2);
    assert_int_equal (store_outbox_retry (fx->st, id2, 5, "FM down", &e), 0);
    assert_int_equal (store_outbox_done (fx->st, id1, &e), 0);
    EXPECT_TALLIES (0, 0, 1, 6, 1);

    /* a rolled-back change leaves them as they were */
    assert_int_equal (store_begin (fx->st, &e), 0);
    assert_int_equal (store_outbox_done (fx->st, id2, &e), 0);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 1024, 1100, v, &e), 0);
    assert_int_equal (store_job_set_state (fx->st, "b", STORE_JOB_RELEASED, &e), 0);
    EXPECT_TALLIES (1, 0, 0, 0, 0);
    store_rollback (fx->st);
    EXPECT_TALLIES (0, 0, 1, 6, 1);

    /* a released job pruned: it held nothing any more */
    fx->clock.now_ms += 1000;
    unsigned nj, ne;
    assert_int_equal (store_prune (fx->st, fx->clock.now_ms, 0, 100, &nj, &ne, &e), 0);
    assert_int_equal (nj, 1); /* a */
    EXPECT_TALLIES (0, 0, 1, 6, 1);
    fx_reopen (fx);
    EXPECT_TALLIES (0, 0, 1, 6, 1);
    store_close (fx->st);
    fx->st = NULL;
    if (store_check_full (fx->db, NULL, NULL, &e) < 0)
        fail_msg ("the kept counts differ from the tables: %s", e.text);
    fx_open (fx);
}

static void queries_use_their_indexes (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    char plan[1024];
    static const struct {
        const char *query, *index;
    } want[] = {
        {"prune_jobs", "USING INDEX jobs_released (released_ms<?)"},
        {"recover", "USING INDEX jobs_by_state (state=?)"},
        /* reconciliation's scan: a page from where the last one ended */
        {"unreleased", "USING INDEX jobs_by_state (state=? AND id>?)"},
        /* a page of a listing starts at its 'after' in the index */
        {"list_state", "USING INDEX jobs_by_state (state=? AND id>?)"},
        {"list_state_uid", "USING INDEX jobs_by_state (state=? AND id>?)"},
        /* a user's history: the released state is nearly every job */
        {"list_released_uid", "USING INDEX jobs_by_uid (uid=? AND id>?)"},
        {"list_uid", "USING INDEX jobs_by_uid (uid=? AND id>?)"},
        {"list_all", "USING INDEX sqlite_autoindex_jobs_1 (id>?)"},
        /* a node's jobs: its own rows, each job by its key */
        {"list_node",
         "SEARCH job_nodes USING COVERING INDEX job_nodes_by_node (node=? AND "
         "job_id>?)"},
    };
    for (size_t i = 0; i < sizeof (want) / sizeof (want[0]); i++) {
        assert_int_equal (
            store_query_plan (fx->st, want[i].query, plan, sizeof (plan), &e), 0);
        if (!strstr (plan, want[i].index) || strstr (plan, "SCAN jobs") ||
            strstr (plan, "TEMP B-TREE"))
            fail_msg ("%s: plan '%s', wanted %s", want[i].query, plan, want[i].index);
    }
    /* the events prune reads the oldest events by their key, no sort */
    assert_int_equal (
        store_query_plan (fx->st, "prune_events", plan, sizeof (plan), &e), 0);
    if (strstr (plan, "TEMP B-TREE") || !strstr (plan, "INTEGER PRIMARY KEY"))
        fail_msg ("prune_events: plan '%s'", plan);
    /* counting a state reads one row, not the state's index entries */
    assert_int_equal (store_query_plan (fx->st, "count", plan, sizeof (plan), &e), 0);
    if (!strstr (plan, "SEARCH job_counts USING PRIMARY KEY") ||
        strstr (plan, "jobs_by_state"))
        fail_msg ("count: plan '%s'", plan);
    /* VNI expiry reads the quarantined ones that are due; finding a free
     * VNI walks the held ones in order, no sort */
    assert_int_equal (store_query_plan (fx->st, "vni_expire", plan, sizeof (plan), &e),
                      0);
    if (!strstr (plan, "USING INDEX vnis_expiring (until_ms>? AND until_ms<?)"))
        fail_msg ("vni_expire: plan '%s'", plan);
    assert_int_equal (
        store_query_plan (fx->st, "vni_first_free", plan, sizeof (plan), &e), 0);
    if (!strstr (plan, "SEARCH v USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") ||
        strstr (plan, "TEMP B-TREE"))
        fail_msg ("vni_first_free: plan '%s'", plan);
    /* the VNIs outside the pool: two range reads, no scan */
    assert_int_equal (store_query_plan (fx->st, "vni_outside", plan, sizeof (plan), &e),
                      0);
    if (!strstr (plan, "SEARCH vnis USING INTEGER PRIMARY KEY (rowid<?)") ||
        !strstr (plan, "SEARCH vnis USING INTEGER PRIMARY KEY (rowid>?)") ||
        strstr (plan, "SCAN vnis"))
        fail_msg ("vni_outside: plan '%s'", plan);
    /* the nodes still to report, in node order, without a sort */
    assert_int_equal (
        store_query_plan (fx->st, "node_list_waiting", plan, sizeof (plan), &e), 0);
    if (!strstr (plan, "SEARCH job_nodes USING INDEX job_nodes_waiting (job_id=?)") ||
        strstr (plan, "TEMP B-TREE"))
        fail_msg ("node_list_waiting: plan '%s'", plan);
    /* a node still to report: two key lookups */
    assert_int_equal (
        store_query_plan (fx->st, "node_waiting", plan, sizeof (plan), &e), 0);
    if (!strstr (plan, "SEARCH job_nodes USING INDEX job_nodes_waiting (job_id=?)") ||
        strstr (plan, "SCAN job_nodes"))
        fail_msg ("node_waiting: plan '%s'", plan);
    /* a node's live jobs: the node's own rows, each job by its key */
    assert_int_equal (
        store_query_plan (fx->st, "node_live_jobs", plan, sizeof (plan), &e), 0);
    if (!strstr (plan,
                 "SEARCH job_nodes USING COVERING INDEX job_nodes_by_node (node=?)") ||
        !strstr (plan, "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id=?)") ||
        strstr (plan, "SCAN job") || strstr (plan, "SCAN vnis"))
        fail_msg ("node_live_jobs: plan '%s'", plan);
    /* and a tally its row */
    assert_int_equal (store_query_plan (fx->st, "tally", plan, sizeof (plan), &e), 0);
    if (!strstr (plan, "SEARCH tallies USING PRIMARY KEY"))
        fail_msg ("tally: plan '%s'", plan);
    assert_int_equal (store_query_plan (fx->st, "nonsense", plan, sizeof (plan), &e),
                      -1);
}

/* A backlog goes in slices of at most 'max' rows each, oldest first. */
static void prune_of_a_backlog_goes_in_bounded_slices (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    unsigned nj, ne, slices = 0, total = 0;
    assert_int_equal (store_begin (fx->st, &e), 0);
    for (int i = 0; i < 1000; i++) {
        char id[16];
        snprintf (id, sizeof (id), "j%04d", i);
        put_job (fx, id, 1000, NULL, NULL);
        assert_int_equal (store_job_set_state (fx->st, id, STORE_JOB_RELEASED, &e), 0);
        fx->clock.now_ms++;
    }
    assert_int_equal (store_commit (fx->st, &e), 0);
    int64_t cut = fx->clock.now_ms - 100; /* the last 100 stay */
    do {
        assert_int_equal (store_prune (fx->st, cut, 0, 64, &nj, &ne, &e), 0);
        assert_true (nj <= 64);
        total += nj;
        slices++;
        /* oldest first: after each slice, the next job is the next oldest */
        char next[16];
        struct store_job *j;
        snprintf (next, sizeof (next), "j%04u", total);
        assert_int_equal (store_job_get (fx->st, next, &j, &e), 0);
        store_job_free (j);
    } while (nj == 64);
    assert_int_equal (total, 900);
    assert_int_equal (slices, (900 + 63) / 64);
}

/* ---- transactions -------------------------------------------------- */

static void rolled_back_work_is_gone_and_savepoints_nest (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_job *j;
    uint16_t v[1];
    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, "a", 1, NULL, NULL);
    store_rollback (fx->st);
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), -1);

    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, "a", 1, NULL, NULL);
    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, "b", 1, NULL, NULL);
    assert_int_equal (store_vni_alloc (fx->st, "b", 1, 5, 9, v, &e), 0);
    store_rollback (fx->st);
    assert_int_equal (store_commit (fx->st, &e), 0);
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), 0);
    store_job_free (j);
    assert_int_equal (store_job_get (fx->st, "b", &j, &e), -1);
    unsigned cursor;
    assert_int_equal (store_vni_cursor (fx->st, &cursor, &e), 0);
    assert_int_equal (cursor, 0); /* the inner allocation left no trace */
    assert_int_equal (store_commit (fx->st, &e), -1);
    assert_int_equal (errno, EINVAL);
}

/* store_job_put of a job with no reservation: its result, not asserted. */
static int try_put_job (struct fx *fx, const char *id, struct fmb_error *e)
{
    struct store_job j = {.uid = 1,
                          .request = "{}",
                          .state = STORE_JOB_ACTIVE,
                          .hwcoll = STORE_HWCOLL_NOT_ELIGIBLE};
    snprintf (j.id, sizeof (j.id), "%s", id);
    snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-%s", id);
    return store_job_put (fx->st, &j, e);
}

/* After SQLITE_FULL, SQLITE_IOERR or SQLITE_NOMEM, SQLite may roll the
 * whole transaction back by itself (simulated here by a ROLLBACK behind
 * the store's back).  What the caller then writes "inside" it must not
 * commit on its own: neither a plain write nor a savepoint's work. */
static void writes_after_sqlite_rolled_back_do_not_commit_alone (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_job *j;
    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, "a", 1, NULL, NULL);
    assert_int_equal (sqlite3_exec (fx->st->db, "ROLLBACK", NULL, NULL, NULL),
                      SQLITE_OK);
    assert_int_equal (store_begin (fx->st, &e), -1); /* a savepoint */
    assert_non_null (strstr (e.text, "rolled back"));
    assert_int_equal (try_put_job (fx, "b", &e), -1);
    assert_int_equal (store_commit (fx->st, &e), -1);
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (store_job_get (fx->st, "b", &j, &e), -1);
    assert_int_equal (errno, ENOENT);
    /* the store goes on: the next transaction commits */
    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, "c", 1, NULL, NULL);
    assert_int_equal (store_commit (fx->st, &e), 0);
    assert_int_equal (store_job_get (fx->st, "c", &j, &e), 0);
    store_job_free (j);
}

/* Another connection to the store's file that tries to begin writing:
 * SQLITE_BUSY at once while the store holds the write lock. */
static int other_begins_writing (struct fx *fx, sqlite3 **other)
{
    assert_int_equal (sqlite3_open (fx->db, other), SQLITE_OK);
    return sqlite3_exec (*other, "BEGIN IMMEDIATE", NULL, NULL, NULL);
}

/* The loop opens a transaction every pass and most passes use no
 * statement: such a transaction takes no lock and writes nothing; the
 * first statement in it begins it for real. */
static void transaction_begins_with_its_first_statement (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_job *j;
    sqlite3 *other;
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    assert_int_equal (store_begin_on_use (fx->st, &e), -1);
    assert_int_equal (errno, EBUSY);
    assert_int_equal (other_begins_writing (fx, &other), SQLITE_OK);
    assert_int_equal (store_commit (fx->st, &e), 0); /* beside the other's lock */
    assert_int_equal (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);

    /* used: locked from its first statement, committed whole */
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    put_job (fx, "a", 1, NULL, NULL);
    assert_int_equal (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                      SQLITE_BUSY);
    assert_int_equal (store_begin (fx->st, &e), 0); /* a savepoint in it */
    put_job (fx, "b", 1, NULL, NULL);
    store_rollback (fx->st);
    assert_int_equal (store_commit (fx->st, &e), 0);
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), 0);
    store_job_free (j);
    assert_int_equal (store_job_get (fx->st, "b", &j, &e), -1);

    /* unused and rolled back: nothing to undo, the next one works */
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    store_rollback (fx->st);
    assert_int_equal (store_commit (fx->st, &e), -1);
    assert_int_equal (errno, EINVAL);
    sqlite3_close (other);
}

/* When its BEGIN cannot take the lock (another writer holds it past the
 * busy timeout), what writes fails with why, so does the commit (what it
 * wrote could not commit with the rest), and nothing opens a transaction
 * of its own; what only reads still runs, each statement on its own, so
 * that the broker can answer what needs no write.  The next one begins
 * again. */
static void transaction_that_cannot_begin_fails_whole (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_job *j;
    sqlite3 *other;
    put_job (fx, "a", 1, NULL, NULL);
    sqlite3_busy_timeout (fx->st->db, 20);
    assert_int_equal (other_begins_writing (fx, &other), SQLITE_OK);

    /* a write first: it fails with the BEGIN's reason */
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    assert_null (store_tx_error (fx->st));
    assert_int_equal (try_put_job (fx, "b", &e), -1);
    assert_int_equal (errno, EAGAIN);
    assert_non_null (strstr (e.text, "begin transaction: database is locked"));
    assert_non_null (strstr (store_tx_error (fx->st), "database is locked"));
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), 0); /* reads go on */
    store_job_free (j);
    assert_int_equal (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    /* the lock is free now: still nothing is written in this one */
    assert_int_equal (try_put_job (fx, "c", &e), -1);
    assert_int_equal (errno, EIO);
    assert_non_null (strstr (e.text, "database is locked"));
    assert_int_equal (store_begin (fx->st, &e), -1); /* no savepoint either */
    assert_int_equal (store_commit (fx->st, &e), -1);
    assert_non_null (strstr (e.text, "begin transaction: database is locked"));
    assert_null (store_tx_error (fx->st));
    assert_int_equal (store_job_get (fx->st, "c", &j, &e), -1);
    assert_int_equal (errno, ENOENT);

    /* a read first: it runs, the write after it fails */
    assert_int_equal (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                      SQLITE_OK);
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    assert_int_equal (store_job_get (fx->st, "a", &j, &e), 0);
    store_job_free (j);
    assert_int_equal (try_put_job (fx, "d", &e), -1);
    assert_int_equal (store_commit (fx->st, &e), -1);
    assert_int_equal (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);

    /* the next one begins again, and store_close ends an open one */
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    put_job (fx, "e", 1, NULL, NULL);
    assert_int_equal (store_commit (fx->st, &e), 0);
    assert_int_equal (store_job_get (fx->st, "e", &j, &e), 0);
    store_job_free (j);
    assert_int_equal (store_begin_on_use (fx->st, &e), 0);
    put_job (fx, "f", 1, NULL, NULL);
    fx_reopen (fx);
    assert_int_equal (store_job_get (fx->st, "f", &j, &e), -1);
    assert_int_equal (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                      SQLITE_OK);
    assert_int_equal (sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (other);
}

/* ---- the WAL checkpointer ---------------------------------------------- */

static void commit_job (struct fx *fx, int i)
{
    struct fmb_error e;
    char id[16];
    snprintf (id, sizeof (id), "w%05d", i);
    assert_int_equal (store_begin (fx->st, &e), 0);
    put_job (fx, id, 1000, NULL, NULL);
    assert_int_equal (store_commit (fx->st, &e), 0);
}

static struct store_wal_stats wal_stats (struct fx *fx)
{
    struct store_wal_stats ws;
    assert_int_equal (store_wal_stats (fx->st, &ws), 0);
    return ws;
}

/* The store's thread checkpoints (the committing thread never does
 * below the cap), copies the whole WAL once commits pause, and the next
 * commit then starts the WAL over; nothing committed is lost. */
static void wal_is_checkpointed_by_the_store_thread (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_wal_stats ws;
    store_set_wal_limits (fx->st, 40, 1 << 30);
    for (int i = 0; i < 300; i++)
        commit_job (fx, i);
    /* bounded wait for a round of the thread after the last commit (the
     * idle one, within a second): 10 s at most, 10 ms at a time */
    unsigned long rounds = wal_stats (fx).checkpoints;
    for (int i = 0; i < 1000; i++) {
        ws = wal_stats (fx);
        if (ws.checkpoints > rounds && ws.backfilled >= ws.wal_pages)
            break;
        nanosleep (&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    assert_true (ws.checkpoints > 0);
    assert_int_equal (ws.backfilled, ws.wal_pages);
    assert_int_equal (ws.failures, 0);
    assert_int_equal (ws.writer_checkpoints, 0);
    commit_job (fx, 300);
    ws = wal_stats (fx);
    assert_true (ws.wal_pages < 40); /* started over */
    fx_reopen (fx);
    for (int i = 0; i <= 300; i++) {
        char id[16];
        struct store_job *j;
        snprintf (id, sizeof (id), "w%05d", i);
        assert_int_equal (store_job_get (fx->st, id, &j, &e), 0);
        store_job_free (j);
    }
}

/* A few commits, far below a round's worth, then quiet: the thread
 * copies them within its idle delay (a second), not never. */
static void quiet_wal_is_copied_within_a_second (void **state)
{
    struct fx *fx = *state;
    struct store_wal_stats ws;
    for (int i = 0; i < 3; i++)
        commit_job (fx, i);
    for (int i = 0; i < 500; i++) { /* 5 s at most, 10 ms at a time */
        ws = wal_stats (fx);
        if (ws.checkpoints > 0 && ws.backfilled >= ws.wal_pages)
            break;
        nanosleep (&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    assert_true (ws.wal_pages > 0 && ws.wal_pages < 100);
    assert_int_equal (ws.backfilled, ws.wal_pages);
}

/* However far behind the thread is, the WAL never grows past the cap
 * by more than one commit: the committing thread checkpoints then. */
static void wal_stays_bounded_when_the_checkpointer_lags (void **state)
{
    struct fx *fx = *state;
    struct store_wal_stats ws;
    int most = 0;
    store_set_wal_limits (fx->st, 1 << 30, 100);
    for (int i = 0; i < 300; i++) {
        commit_job (fx, i);
        ws = wal_stats (fx);
        if (ws.wal_pages > most)
            most = ws.wal_pages;
    }
    assert_true (most < 100 + 30);
    assert_true (ws.writer_checkpoints > 0);
}

/* Commits that never pause, with the broker's call after each (the
 * answers are out): the thread copies the WAL while it grows, the
 * committing thread copies the last few frames, and the WAL starts over
 * again and again instead of growing; what was committed stays. */
static void wal_starts_over_under_steady_commits (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    struct store_wal_stats ws;
    int most = 0, n = 1000;
    store_set_wal_limits (fx->st, 40, 1 << 30);
    for (int i = 0; i < n; i++) {
        commit_job (fx, i);
        (void)store_finish_checkpoint (fx->st);
        ws = wal_stats (fx);
        if (ws.wal_pages > most)
            most = ws.wal_pages;
    }
    fprintf (stderr,
             "# %d commits: %lu checkpoints, %lu finished here (at most %d "
             "frames), %lu restarts, WAL at most %d pages\n",
             n,
             ws.checkpoints,
             ws.writer_finishes,
             ws.writer_finish_pages_max,
             ws.restarts,
             most);
    /* restarts come every ~120 pages (3 rounds of 40): dozens here; the
     * thread's copies run beside the commits, hence the loose bounds.
     * Without the committing thread's part: no restart at all, and a WAL
     * of ~5,000 pages. */
    assert_true (ws.restarts >= 5);
    assert_true (ws.writer_finishes > 0);
    assert_true (ws.writer_finish_pages_max <= 64); /* the loop copies little */
    assert_true (most < 2000);
    assert_int_equal (ws.failures, 0);
    assert_int_equal (ws.writer_checkpoints, 0);
    fx_reopen (fx);
    for (int i = 0; i < n; i += 97) {
        char id[16];
        struct store_job *j;
        snprintf (id, sizeof (id), "w%05d", i);
        assert_int_equal (store_job_get (fx->st, id, &j, &e), 0);
        store_job_free (j);
    }
}

int main (void)
{
#define T(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T (job_round_trips_with_its_token),
        T (token_never_reaches_the_disk_in_clear),
        T (duplicate_and_missing_jobs_are_errors),
        T (bad_node_list_stores_nothing),
        T (state_changes_are_recorded),
        T (listing_filters_and_pages),
        T (listing_pages_read_a_bounded_number_of_jobs),
        T (unreleased_jobs_are_listed_in_brief),
        T (released_job_can_be_replaced_once_its_vnis_are_free),
        T (steps_are_upserted_per_job),
        T (node_reports_count_towards_release),
        T (vni_allocation_is_next_fit_round_robin),
        T (next_fit_finds_the_holes_in_order),
        T (finding_a_free_vni_reads_up_to_the_first_hole),
        T (an_exhausted_pool_is_refused_without_a_search),
        T (a_node_left_to_report_is_found_in_a_lookup),
        T (round_robin_resumes_after_reopen),
        T (quarantined_vni_is_never_handed_out),
        T (quarantine_until_nodes_report_does_not_expire),
        T (vni_allocation_is_all_or_nothing),
        T (outbox_runs_in_due_order_and_retries),
        T (events_are_ordered_and_sequence_survives_reopen),
        T (prune_takes_old_history_only),
        T (queries_use_their_indexes),
        T (prune_of_a_backlog_goes_in_bounded_slices),
        T (rolled_back_work_is_gone_and_savepoints_nest),
        T (writes_after_sqlite_rolled_back_do_not_commit_alone),
        T (transaction_begins_with_its_first_statement),
        T (transaction_that_cannot_begin_fails_whole),
        T (job_counts_follow_every_change),
        T (tallies_follow_every_change),
        T (wal_is_checkpointed_by_the_store_thread),
        T (wal_stays_bounded_when_the_checkpointer_lags),
        T (wal_starts_over_under_steady_commits),
        T (quiet_wal_is_copied_within_a_second),
    };
    return cmocka_run_group_tests_name ("store", tests, NULL, NULL);
}

/* test_store_crash.c: kill -9 at random moments never leaves the store
 * inconsistent.
 *
 * A child writes jobs in a loop; each job is one transaction holding the
 * job row, its node rows, two VNIs, an outbox entry and an event.  After
 * each commit it writes the job's number to a pipe.  The parent kills it
 * with SIGKILL at a random moment, reopens the store and checks that
 * every acknowledged job is present, that every job present is whole, and
 * that no VNI is held twice.  50 kills, then done.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "testutil.h"

#define KILLS 50

static char *dir, *db, *key;

static int writer (int fd, int first)
{
    struct store *st;
    struct fmb_error e;
    if (store_open (db, key, &st, &e) < 0) {
        fprintf (stderr, "writer: %s\n", e.text);
        return 1;
    }
    for (int n = first;; n++) {
        struct store_job j = {
            .nodes = "[\"n1\",\"n2\",\"n3\"]",
            .node_count = 3,
            .request = "{}",
            .token = "session-token",
        };
        char detail[64];
        uint16_t v[2];
        snprintf (j.id, sizeof (j.id), "%d", n);
        snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-%d", n);
        snprintf (detail, sizeof (detail), "{\"n\":%d}", n);
        if (store_begin (st, &e) < 0 || store_job_put (st, &j, &e) < 0 ||
            store_vni_alloc (st, j.id, 2, 1024, 65535, v, &e) < 0 ||
            store_outbox_put (st, "fm_delete_job", j.fm_job_id, NULL, n, NULL, &e) <
                0 ||
            store_event_append (st, "job_started", j.id, detail, NULL, &e) < 0 ||
            store_commit (st, &e) < 0) {
            fprintf (stderr, "writer: job %d: %s\n", n, e.text);
            return 1;
        }
        /* Released jobs give their VNIs back, so the pool never runs dry. */
        if (n % 3 == 0) {
            snprintf (j.id, sizeof (j.id), "%d", n - 2);
            if (n - 2 >= first && store_vni_free_job (st, j.id, &e) < 0)
                return 1;
        }
        if (write (fd, &n, sizeof (n)) != sizeof (n))
            return 1;
    }
}

struct check {
    int jobs;
    int max_id;
};

static int check_job (const struct store_job *j, void *arg)
{
    struct check *c = arg;
    c->jobs++;
    int id = atoi (j->id);
    if (id > c->max_id)
        c->max_id = id;
    /* A job present is whole: its token decrypts and its rows exist. */
    if (!j->token || strcmp (j->token, "session-token") != 0 || j->node_count != 3)
        fail_msg ("job %s is partial", j->id);
    return 0;
}

struct vnicheck {
    unsigned char seen[65536];
};

static int count_node (const struct store_node *n, void *arg)
{
    (void)n;
    (*(int *)arg)++;
    return 0;
}

static int check_vni (const struct store_vni *v, void *arg)
{
    struct vnicheck *c = arg;
    if (c->seen[v->vni]++)
        fail_msg ("VNI %u listed twice", v->vni);
    return 0;
}

static void verify (int acked, int *ret_max)
{
    struct store *st;
    struct fmb_error e;
    if (store_open (db, key, &st, &e) < 0)
        fail_msg ("reopen after kill: %s", e.text);
    struct check c = {0};
    struct store_job_filter f = {.state = -1, .uid = -1};
    assert_int_equal (store_job_list (st, &f, check_job, &c, &e), 0);
    /* Every acknowledged job is there; at most one more (committed, killed
     * before it could say so); ids are dense from 1. */
    if (c.max_id < acked || c.max_id > acked + 1 || c.jobs != c.max_id)
        fail_msg ("acked %d, found %d jobs up to %d", acked, c.jobs, c.max_id);
    unsigned depth;
    int64_t last;
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    assert_int_equal (store_event_last (st, &last, &e), 0);
    assert_int_equal (depth, (unsigned)c.jobs);
    assert_int_equal (last, c.jobs);
    for (int id = 1; id <= c.max_id; id++) {
        char s[16];
        struct store_job *j;
        snprintf (s, sizeof (s), "%d", id);
        assert_int_equal (store_job_get (st, s, &j, &e), 0);
        int nodes = 0;
        assert_int_equal (store_node_list (st, s, NULL, count_node, &nodes, &e), 0);
        assert_int_equal (nodes, 3);
        store_job_free (j);
    }
    struct vnicheck *vc = calloc (1, sizeof (*vc));
    assert_int_equal (store_vni_list (st, 0, 0, check_vni, vc, &e), 0);
    free (vc);
    store_close (st);
    *ret_max = c.max_id;
}

static void kill_minus_nine_never_loses_or_tears_a_transaction (void **state)
{
    (void)state;
    int next = 1;
    srand ((unsigned)time (NULL) ^ (unsigned)getpid ());
    for (int kill_no = 0; kill_no < KILLS; kill_no++) {
        int p[2];
        assert_int_equal (pipe (p), 0);
        pid_t pid = fork ();
        assert_true (pid >= 0);
        if (pid == 0) {
            close (p[0]);
            _exit (writer (p[1], next));
        }
        close (p[1]);
        /* Let it get going (at least one commit), then kill it a random
         * 0-20 ms later: early in a transaction, mid-commit or in between. */
        int acked = next - 1, n;
        if (read (p[0], &n, sizeof (n)) == sizeof (n))
            acked = n;
        struct timespec ts = {0, (rand () % 20000) * 1000L};
        nanosleep (&ts, NULL);
        kill (pid, SIGKILL);
        while (read (p[0], &n, sizeof (n)) == sizeof (n))
            acked = n;
        close (p[0]);
        int status;
        assert_int_equal (waitpid (pid, &status, 0), pid);
        if (!WIFSIGNALED (status))
            fail_msg (
                "writer exited by itself (status %d) after job %d", status, acked);
        int max;
        verify (acked, &max);
        next = max + 1;
    }
    print_message ("%d kills, %d jobs committed\n", KILLS, next - 1);
}

static int setup (void **state)
{
    (void)state;
    dir = tu_mkdtemp ();
    db = tu_path (dir, "fmbroker.db");
    key = tu_path (dir, "token.key");
    return 0;
}

static int teardown (void **state)
{
    (void)state;
    free (db);
    free (key);
    tu_rmtree (dir);
    return 0;
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (
            kill_minus_nine_never_loses_or_tears_a_transaction, setup, teardown),
    };
    return cmocka_run_group_tests_name ("store_crash", tests, NULL, NULL);
}

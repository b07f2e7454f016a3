/* test_store_open.c: creating and migrating the database, and refusing,
 * without changing a byte, files that are not ours to touch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"
#include "testutil.h"

struct fx {
    char *dir;
    char *db;
    char *key;
};

static int setup (void **state)
{
    struct fx *fx = calloc (1, sizeof (*fx));
    fx->dir = tu_mkdtemp ();
    fx->db = tu_path (fx->dir, "fmbroker.db");
    fx->key = tu_path (fx->dir, "token.key");
    *state = fx;
    return 0;
}

static int teardown (void **state)
{
    struct fx *fx = *state;
    free (fx->db);
    free (fx->key);
    tu_rmtree (fx->dir);
    free (fx);
    return 0;
}

static void count_problem (const char *problem, void *arg)
{
    (void)problem;
    (*(int *)arg)++;
}

/* Append each problem to the 1 KiB buffer 'arg', one per line. */
static void collect_problem (const char *problem, void *arg)
{
    char *buf = arg;
    size_t used = strlen (buf);
    snprintf (buf + used, 1024 - used, "%s\n", problem);
}

static void raw_exec (const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal (sqlite3_open (path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec (db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg ("%s: %s", sql, msg);
    sqlite3_close (db);
}

/* Try to open a file we expect refused; check errno, message, and that
 * the file is byte for byte what it was. */
static void expect_refused (struct fx *fx, int err, const char *fragment)
{
    size_t len1, len2;
    char *before = tu_slurp (fx->db, &len1);
    struct store *st = NULL;
    struct fmb_error e = {""};
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), -1);
    assert_null (st);
    assert_int_equal (errno, err);
    if (!strstr (e.text, fragment))
        fail_msg ("message '%s' lacks '%s'", e.text, fragment);
    char *after = tu_slurp (fx->db, &len2);
    assert_int_equal (len1, len2);
    assert_memory_equal (before, after, len1);
    free (before);
    free (after);
}

static void new_database_gets_the_current_schema_privately (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    struct stat sb;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_file_version (st), store_schema_version ());
    assert_true (store_schema_version () >= 2);
    store_close (st);
    assert_int_equal (stat (fx->db, &sb), 0);
    assert_int_equal (sb.st_mode & 0777, 0600);
    assert_int_equal (stat (fx->key, &sb), 0);
    assert_int_equal (sb.st_mode & 0777, 0600);
}

static void empty_file_is_migrated_from_nothing (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    tu_write (fx->db, "", 0600);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_file_version (st), store_schema_version ());
    unsigned depth;
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    store_close (st);
}

static int count_one (const struct store_node *n, void *arg)
{
    (void)n;
    (*(int *)arg)++;
    return 0;
}

static void each_migration_keeps_existing_data (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    struct store_job *j;
    for (int v = 1; v < store_schema_version (); v++) {
        unlink (fx->db);
        assert_int_equal (store_create_at_version (fx->db, v, &e), 0);
        /* a job and a VNI as an older fmbroker would have left them */
        raw_exec (fx->db,
                  "INSERT INTO jobs (id, fm_job_id, uid, node_count, request, state,"
                  " hwcoll, created_ms, updated_ms) VALUES ('old', 'c1-old', 1000, 4,"
                  " '{}', 'active', 'not_eligible', 1, 1);"
                  "INSERT INTO vnis (vni, job_id, pos, state, since_ms)"
                  " VALUES (1500, 'old', 0, 'held', 1);"
                  "UPDATE meta SET value = 1500 WHERE key = 'vni_cursor';"
                  /* one holding a multicast reservation, one whose VNI
                   * is in quarantine */
                  "INSERT INTO jobs (id, fm_job_id, uid, node_count, request, state,"
                  " hwcoll, mcast_limit, created_ms, updated_ms) VALUES ('mc', 'c1-mc',"
                  " 1000, 8, '{}', 'releasing', 'reserved', 6, 1, 1),"
                  " ('q', 'c1-q', 1000, 1, '{}', 'released', 'not_eligible', 0, 1, 1);"
                  "INSERT INTO vnis (vni, job_id, pos, state, since_ms)"
                  " VALUES (1501, 'q', 0, 'quarantined', 1);"
                  /* q waits for n2's report; every node of 'old' reported */
                  "INSERT INTO job_nodes (job_id, node, cxi, updated_ms) VALUES"
                  " ('q', 'n1', 'destroyed', 1), ('q', 'n2', 'failed', 1),"
                  " ('old', 'n1', 'destroyed', 1);");
        if (v >= 2) /* and an FM operation waiting */
            raw_exec (fx->db,
                      "INSERT INTO outbox (kind, target, next_ms, created_ms)"
                      " VALUES ('delete', 'c1-mc', 1, 1);");
        assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
        assert_int_equal (store_file_version (st), store_schema_version ());
        assert_int_equal (store_job_get (st, "old", &j, &e), 0);
        assert_int_equal (j->nvnis, 1);
        assert_int_equal (j->vnis[0], 1500);
        assert_int_equal (j->tcs, 0); /* no choice of its own: [cxi] tcs */
        store_job_free (j);
        unsigned cursor;
        assert_int_equal (store_vni_cursor (st, &cursor, &e), 0);
        assert_int_equal (cursor, 1500);
        /* what metrics and status count, counted once by the migration */
        unsigned held, quarantined, mcast_jobs, mcast_addrs, depth, active;
        assert_int_equal (store_vni_counts (st, &held, &quarantined, &e), 0);
        assert_int_equal (store_hwcoll_usage (st, &mcast_jobs, &mcast_addrs, &e), 0);
        assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
        assert_int_equal (store_job_count (st, STORE_JOB_ACTIVE, &active, &e), 0);
        if (held != 1 || quarantined != 1 || mcast_jobs != 1 || mcast_addrs != 6 ||
            depth != (v >= 2) || active != 1)
            fail_msg (
                "from version %d: VNIs %u held %u quarantined, mcast %u/%u, "
                "outbox %u, active %u",
                v,
                held,
                quarantined,
                mcast_jobs,
                mcast_addrs,
                depth,
                active);
        /* and the nodes still to report, indexed by the step to 7 */
        bool nodes, waiting;
        int left = 0;
        assert_int_equal (store_node_waiting (st, "q", &nodes, &waiting, &e), 0);
        assert_true (nodes && waiting);
        assert_int_equal (store_node_list_waiting (st, "q", count_one, &left, &e), 0);
        assert_int_equal (left, 1);
        assert_int_equal (store_node_waiting (st, "old", &nodes, &waiting, &e), 0);
        assert_true (nodes && !waiting);
        assert_int_equal (store_event_append (st, "migrated", NULL, NULL, NULL, &e), 0);
        store_close (st);
    }
}

static void foreign_sqlite_database_is_refused_untouched (void **state)
{
    struct fx *fx = *state;
    raw_exec (fx->db,
              "CREATE TABLE accounts (id INTEGER); INSERT INTO accounts VALUES (1);");
    expect_refused (fx, EPROTO, "not an fmbroker database");
    /* another application that also uses user_version */
    unlink (fx->db);
    raw_exec (fx->db, "PRAGMA user_version = 1;");
    expect_refused (fx, EPROTO, "not an fmbroker database");
}

static void newer_schema_is_refused_untouched (void **state)
{
    struct fx *fx = *state;
    struct fmb_error e;
    assert_int_equal (store_create_at_version (fx->db, store_schema_version (), &e), 0);
    raw_exec (fx->db, "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99;");
    char want[128];
    snprintf (want,
              sizeof (want),
              "schema version 99 is newer than this fmbroker knows (%d)",
              store_schema_version ());
    expect_refused (fx, EPROTO, want);
}

static void non_sqlite_file_is_refused_untouched (void **state)
{
    struct fx *fx = *state;
    tu_write (fx->db, "[broker]\nthis is a config file, not a database\n", 0600);
    expect_refused (fx, EPROTO, "not an SQLite database");
    tu_write (fx->db, "SQLite format 3", 0600); /* the magic, then nothing */
    expect_refused (fx, EPROTO, "not an SQLite database");
}

static void truncated_database_is_refused_untouched (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    for (int i = 0; i < 300; i++) {
        struct store_job j = {.request =
                                  "{\"padding\":\"................................\"}"};
        snprintf (j.id, sizeof (j.id), "job-%04d", i);
        snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-job-%04d", i);
        assert_int_equal (store_job_put (st, &j, &e), 0);
    }
    store_close (st); /* checkpoints the WAL into the file */
    struct stat sb;
    assert_int_equal (stat (fx->db, &sb), 0);
    assert_true (sb.st_size > 8 * 4096);
    assert_int_equal (truncate (fx->db, sb.st_size / 2), 0);
    expect_refused (fx, EPROTO, "damaged database");
    assert_int_equal (truncate (fx->db, 60), 0);
    expect_refused (fx, EPROTO, "truncated SQLite header");
}

/* The page number of the rightmost leaf of table 'name': follow each
 * interior page's right-most pointer down from the root. */
/* The root page of table or index 'name'. */
static uint32_t root_page (const char *db, const char *name)
{
    sqlite3 *h;
    sqlite3_stmt *s;
    assert_int_equal (sqlite3_open (db, &h), SQLITE_OK);
    assert_int_equal (
        sqlite3_prepare_v2 (
            h, "SELECT rootpage FROM sqlite_schema WHERE name = ?1", -1, &s, NULL),
        SQLITE_OK);
    sqlite3_bind_text (s, 1, name, -1, SQLITE_STATIC);
    assert_int_equal (sqlite3_step (s), SQLITE_ROW);
    uint32_t page = (uint32_t)sqlite3_column_int (s, 0);
    sqlite3_finalize (s);
    sqlite3_close (h);
    return page;
}

/* Overwrite the header of page 'page' of the file 'db' with garbage. */
static void break_page (const char *db, uint32_t page)
{
    size_t len;
    char *f = tu_slurp (db, &len);
    uint32_t page_size = (uint32_t)(unsigned char)f[16] << 8 | (unsigned char)f[17];
    memset (f + (size_t)(page - 1) * page_size, 0x5a, 8);
    FILE *out = fopen (db, "r+b");
    assert_non_null (out);
    assert_int_equal (fwrite (f, 1, len, out), len);
    fclose (out);
    free (f);
}

static uint32_t rightmost_leaf (const char *db, const char *name)
{
    uint32_t page = root_page (db, name), page_size = 0;
    size_t len;
    unsigned char *f = (unsigned char *)tu_slurp (db, &len);
    page_size = (uint32_t)f[16] << 8 | f[17];
    for (;;) {
        const unsigned char *p = f + (size_t)(page - 1) * page_size;
        assert_true ((size_t)page * page_size <= len);
        if (p[0] == 0x0d) /* table leaf */
            break;
        assert_int_equal (p[0], 0x05); /* table interior */
        page =
            (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 | (uint32_t)p[10] << 8 | p[11];
    }
    free (f);
    return page;
}

/* Start-up reads a bounded part of the file (not the jobs), so damage in
 * a page of the jobs table opens; but the job on that page is never
 * served: SQLite checks every page it reads and the read fails as
 * damage.  The full check finds it without starting anything. */
static void damage_start_up_does_not_read_is_never_served (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct store_job *j = NULL;
    struct fmb_error e;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_begin (st, &e), 0);
    for (int i = 0; i < 2000; i++) {
        struct store_job job = {
            .request = "{\"padding\":\"..........................\"}",
            .state = STORE_JOB_RELEASED,
            .hwcoll = STORE_HWCOLL_RELEASED};
        snprintf (job.id, sizeof (job.id), "job-%04d", i);
        snprintf (job.fm_job_id, sizeof (job.fm_job_id), "c1-job-%04d", i);
        assert_int_equal (store_job_put (st, &job, &e), 0);
    }
    assert_int_equal (store_commit (st, &e), 0);
    store_close (st); /* checkpoints the WAL into the file */
    if (store_check_full (fx->db, NULL, NULL, &e) < 0)
        fail_msg ("full check of a sound file: %s", e.text);

    /* the last job inserted lives in the rightmost leaf: break its header */
    break_page (fx->db, rightmost_leaf (fx->db, "jobs"));

    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);  /* bounded */
    assert_int_equal (store_job_get (st, "job-0000", &j, &e), 0); /* a sound page */
    store_job_free (j);
    j = NULL;
    assert_int_equal (store_job_get (st, "job-1999", &j, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_null (j);
    if (!strstr (e.text, "malformed"))
        fail_msg ("message '%s' does not say the database is damaged", e.text);
    store_close (st);

    struct problems {
        int n;
    } seen = {0};
    assert_int_equal (store_check_full (fx->db, count_problem, &seen, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_true (seen.n > 0);
    if (!strstr (e.text, "damaged database"))
        fail_msg ("check message '%s'", e.text);
}

/* The counts kept by triggers for metrics and status are compared with
 * their tables by the full check: one that differs, or is missing, is
 * reported by name with both figures, as a count to put right (EUCLEAN),
 * not as damage; store_recount() puts them right and says how many. */
static void full_check_finds_kept_counts_that_differ (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    int64_t id;
    unsigned depth;
    struct store_repair fixed;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_outbox_put (st, "delete", "c1-x", "", 0, &id, &e), 0);
    store_close (st);
    assert_int_equal (store_check_full (fx->db, NULL, NULL, &e), 0);
    assert_int_equal (store_recount (fx->db, &fixed, &e), 0);
    assert_int_equal (fixed.counts, 0); /* nothing to put right */
    assert_int_equal (fixed.objects, 0);
    raw_exec (fx->db,
              "UPDATE tallies SET n = n + 4 WHERE name = 'outbox';"
              "UPDATE job_counts SET n = 7 WHERE state = 'lost';"
              "DELETE FROM tallies WHERE name = 'vnis_held';");
    struct problems {
        int n;
    } seen = {0};
    assert_int_equal (store_check_full (fx->db, count_problem, &seen, &e), -1);
    assert_int_equal (errno, EUCLEAN);
    assert_int_equal (seen.n, 3);
    if (!strstr (e.text,
                 "counts differ from the tables: job_counts lost: kept count 7 (what "
                 "metrics, status and health show), counted 0"))
        fail_msg ("check message '%s'", e.text);
    /* the store still opens and serves; the outbox shows the wrong depth,
     * and the missing count fails what reads it */
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    assert_int_equal (depth, 5);
    unsigned held, quarantined;
    assert_int_equal (store_vni_counts (st, &held, &quarantined, &e), -1);
    if (!strstr (e.text, "no tally 'vnis_held'"))
        fail_msg ("message '%s'", e.text);
    store_close (st);
    raw_exec (fx->db, "DELETE FROM job_counts WHERE state = 'released';");
    char lines[1024] = "";
    assert_int_equal (store_check_full (fx->db, collect_problem, lines, &e), -1);
    if (!strstr (lines, "job_counts released: kept count missing (") ||
        !strstr (lines, "tallies vnis_held: kept count missing ("))
        fail_msg ("problems '%s'", lines);
    assert_int_equal (store_recount (fx->db, &fixed, &e), 0);
    assert_int_equal (fixed.counts, 4); /* lost, released, outbox, vnis_held */
    assert_int_equal (store_check_full (fx->db, NULL, NULL, &e), 0);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    assert_int_equal (depth, 1);
    assert_int_equal (store_vni_counts (st, &held, &quarantined, &e), 0);
    store_close (st);
    /* never on a file of another schema version, nor one that is not there */
    unlink (fx->db);
    assert_int_equal (store_recount (fx->db, &fixed, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (access (fx->db, F_OK), -1);
    assert_int_equal (store_create_at_version (fx->db, 5, &e), 0);
    assert_int_equal (store_recount (fx->db, &fixed, &e), -1);
    assert_int_equal (errno, EPROTO);
    if (!strstr (e.text, "schema version 5"))
        fail_msg ("message '%s'", e.text);
}

/* A file changed outside fmbroker (here by hand) without an index, with
 * another definition of a trigger, and without a trigger whose count
 * then drifted: --check-db names each, as derived (EUCLEAN), not damage;
 * start-up makes them again as the migrations made them, recounts, and
 * says so; the queries that name the index work again.  --recount does
 * the same beside a running broker.  A missing table is damage: its rows
 * are gone, and start-up refuses, naming it. */
static void missing_or_changed_indexes_and_triggers_are_made_again (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    int64_t id;
    unsigned depth;
    char lines[1024] = "";
    bool nodes, waiting;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_open_repair (st)->objects, 0);
    store_close (st);
    raw_exec (fx->db,
              "INSERT INTO jobs (id, fm_job_id, uid, node_count, request, state,"
              " hwcoll, created_ms, updated_ms) VALUES ('q', 'c1-q', 1000, 2,"
              " '{}', 'released', 'not_eligible', 1, 1);"
              "INSERT INTO job_nodes (job_id, node, cxi, updated_ms) VALUES"
              " ('q', 'n1', 'destroyed', 1), ('q', 'n2', 'failed', 1);"
              "DROP INDEX job_nodes_waiting;"
              "DROP TRIGGER outbox_tallied_in;"
              "DROP TRIGGER jobs_counted_in;"
              "CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs BEGIN SELECT 1; END;"
              "INSERT INTO outbox (kind, target, next_ms, created_ms)"
              " VALUES ('delete', 'c1-q', 1, 1);");
    assert_int_equal (store_check_full (fx->db, collect_problem, lines, &e), -1);
    assert_int_equal (errno, EUCLEAN);
    if (!strstr (lines,
                 "index job_nodes_waiting: missing (fmbrokerd --recount, or the "
                 "next start, makes it again)\n") ||
        !strstr (lines, "trigger jobs_counted_in: differs from fmbroker's (") ||
        !strstr (lines, "trigger outbox_tallied_in: missing (") ||
        !strstr (lines,
                 "tallies outbox: kept count 0 (what metrics, status and "
                 "health show), counted 1"))
        fail_msg ("problems '%s'", lines);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    const struct store_repair *fixed = store_open_repair (st);
    assert_int_equal (fixed->objects, 3);
    assert_string_equal (fixed->made,
                         "index job_nodes_waiting (missing), trigger jobs_counted_in "
                         "(different), trigger outbox_tallied_in (missing)");
    assert_int_equal (fixed->counts, 1); /* the outbox's depth had drifted */
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    assert_int_equal (depth, 1);
    assert_int_equal (store_node_waiting (st, "q", &nodes, &waiting, &e), 0);
    assert_true (nodes && waiting);
    assert_int_equal (store_outbox_put (st, "delete", "c1-y", "", 0, &id, &e), 0);
    assert_int_equal (store_outbox_depth (st, &depth, &e), 0);
    assert_int_equal (depth, 2); /* the trigger counts again */
    store_close (st);
    assert_int_equal (store_check_full (fx->db, NULL, NULL, &e), 0);
    /* --recount, as beside a broker: the index only, no count wrong */
    struct store_repair again;
    raw_exec (fx->db, "DROP INDEX jobs_released;");
    assert_int_equal (store_recount (fx->db, &again, &e), 0);
    assert_int_equal (again.objects, 1);
    assert_string_equal (again.made, "index jobs_released (missing)");
    assert_int_equal (again.counts, 0);
    assert_int_equal (store_check_full (fx->db, NULL, NULL, &e), 0);
    /* something else under an index's name: the index cannot be made
     * again; start-up refuses, naming it, and changes nothing */
    raw_exec (fx->db,
              "DROP INDEX vnis_expiring; CREATE TABLE vnis_expiring (x INTEGER);");
    expect_refused (fx, EIO, "index vnis_expiring: make it again: ");
    raw_exec (fx->db, "DROP TABLE vnis_expiring;");
    assert_int_equal (store_recount (fx->db, &again, &e), 0);
    assert_string_equal (again.made, "index vnis_expiring (missing)");
    /* a table gone: damage, named, and never made again empty */
    raw_exec (fx->db, "DROP TABLE job_steps;");
    assert_int_equal (store_check_full (fx->db, NULL, NULL, &e), -1);
    assert_int_equal (errno, EPROTO);
    if (!strstr (e.text,
                 "table job_steps: missing (its rows are lost: restore a backup)"))
        fail_msg ("check message '%s'", e.text);
    expect_refused (fx, EPROTO, "table job_steps: missing");
    assert_int_equal (store_recount (fx->db, &again, &e), -1);
    assert_int_equal (errno, EPROTO);
}

/* The counts every scrape reads are within the bounded check: a damaged
 * page of them is refused at start, untouched. */
static void damaged_kept_counts_are_refused_at_start (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    store_close (st);
    break_page (fx->db, root_page (fx->db, "tallies"));
    expect_refused (fx, EPROTO, "damaged database");
}

static void directory_in_place_of_the_file_is_refused (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    assert_int_equal (mkdir (fx->db, 0700), 0);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), -1);
    assert_non_null (strstr (e.text, "not a regular file"));
}

static void unreadable_file_is_refused (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    if (geteuid () == 0)
        skip (); /* root reads a mode-000 file anyway */
    tu_write (fx->db, "", 0000);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), -1);
    assert_int_equal (errno, EACCES);
    assert_non_null (strstr (e.text, "Permission denied"));
}

static void note_damage (void *arg, const char *job, const char *why)
{
    (void)why;
    snprintf (arg, 64, "%s", job);
}

static void lost_key_with_stored_tokens_is_refused (void **state)
{
    struct fx *fx = *state;
    struct store *st;
    struct fmb_error e;
    struct store_job j = {
        .id = "1", .fm_job_id = "c1-1", .request = "{}", .token = "tok"};
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    assert_int_equal (store_job_put (st, &j, &e), 0);
    store_close (st);
    assert_int_equal (unlink (fx->key), 0);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), -1);
    assert_int_equal (errno, ENOENT);
    assert_non_null (
        strstr (e.text, "holds 1 encrypted session tokens; restore the key file"));
    assert_int_equal (access (fx->key, F_OK), -1); /* no new key was made */
    /* a key from elsewhere opens, but the token fails loudly (the damage
     * hook hears of it), never silently; the job itself stays readable so
     * that it can still be listed and released */
    tu_write (fx->key, "0123456789abcdef0123456789abcdef", 0600);
    assert_int_equal (store_open (fx->db, fx->key, &st, &e), 0);
    char damaged[64] = "";
    store_set_damage_hook (st, note_damage, damaged);
    struct store_job *got = NULL;
    assert_int_equal (store_job_get (st, "1", &got, &e), 0);
    assert_null (got->token);
    assert_true (got->token_damaged);
    assert_string_equal (damaged, "1");
    store_job_free (got);
    store_close (st);
}

int main (void)
{
#define T(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T (new_database_gets_the_current_schema_privately),
        T (empty_file_is_migrated_from_nothing),
        T (each_migration_keeps_existing_data),
        T (foreign_sqlite_database_is_refused_untouched),
        T (newer_schema_is_refused_untouched),
        T (non_sqlite_file_is_refused_untouched),
        T (truncated_database_is_refused_untouched),
        T (damage_start_up_does_not_read_is_never_served),
        T (full_check_finds_kept_counts_that_differ),
        T (missing_or_changed_indexes_and_triggers_are_made_again),
        T (damaged_kept_counts_are_refused_at_start),
        T (directory_in_place_of_the_file_is_refused),
        T (unreadable_file_is_refused),
        T (lost_key_with_stored_tokens_is_refused),
    };
    return cmocka_run_group_tests_name ("store_open", tests, NULL, NULL);
}

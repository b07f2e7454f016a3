/* store.c: opening, checking and migrating the database; transactions.
 *
 * The file is checked before anything writes to it: it must be empty or
 * an SQLite file, carry our application_id (or be a brand-new database),
 * have a schema version this code knows, and pass the bounded check
 * below.  Only then is WAL switched on and the schema migrated, one
 * version per transaction.
 *
 * The bounded check reads a fixed amount whatever the number of jobs
 * stored (a full quick_check read every page: 8 s at a million jobs).  It
 * guarantees: the file is as long as its header says (no truncation); the
 * schema parses; and the small tables whose damage would do harm nobody
 * would see at once -- meta (the VNI cursor) and vnis (who holds which
 * VNI), with its indexes, and the counts kept for metrics (job_counts,
 * tallies) -- pass quick_check.  The large tables (jobs,
 * steps, nodes, outbox, events) are not read at open: SQLite checks the
 * structure of every page it reads, so a damaged page makes the request
 * that reaches it fail with "damaged database" (EPROTO) instead of being
 * served, and store_check_full() (fmbrokerd --check-db) reads them all.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "monotime.h"
#include "store_private.h"

#define STORE_APPLICATION_ID  0x464d4252 /* "FMBR" */
#define STORE_BUSY_TIMEOUT_MS 5000

/* Does row 'r' (jobs, NEW or OLD) hold a multicast reservation for a live
 * job?  1 or 0 (both columns are NOT NULL).  With the counts below, part
 * of migration 6: never edit them, add a migration. */
#define LIVE_MCAST(r) \
    "(" r ".hwcoll = 'reserved' AND " r ".state IN ('active', 'releasing'))"
/* What each tally counts, counted: migration 6 starts from these, and
 * store_check_full compares the tallies with them. */
#define COUNT_VNIS_HELD        "(SELECT count(*) FROM vnis WHERE state = 'held')"
#define COUNT_VNIS_QUARANTINED "(SELECT count(*) FROM vnis WHERE state = 'quarantined')"
#define COUNT_OUTBOX           "(SELECT count(*) FROM outbox)"
#define COUNT_MCAST_JOBS       "(SELECT count(*) FROM jobs WHERE " LIVE_MCAST ("jobs") ")"
#define COUNT_MCAST_ADDRESSES \
    "(SELECT coalesce(sum(mcast_limit), 0) FROM jobs WHERE " LIVE_MCAST ("jobs") ")"
/* Every tally, counted: (name, count) rows for a VALUES list. */
#define TALLY_ROWS                                  \
    "('vnis_held', " COUNT_VNIS_HELD                \
    "),"                                            \
    " ('vnis_quarantined', " COUNT_VNIS_QUARANTINED \
    "),"                                            \
    " ('outbox', " COUNT_OUTBOX                     \
    "),"                                            \
    " ('mcast_jobs', " COUNT_MCAST_JOBS             \
    "),"                                            \
    " ('mcast_addresses', " COUNT_MCAST_ADDRESSES ")"
/* job_counts' rows, counted (schema 5) */
#define JOB_COUNT_ROWS                                                             \
    "SELECT column1, (SELECT count(*) FROM jobs WHERE state = column1) AS column2" \
    " FROM (VALUES ('active'), ('releasing'), ('released'), ('lost'))"

/* Schema migrations: migrations[i] takes the file from version i to i+1.
 * Never edit a released entry; add a new one. */
static const char *const migrations[] = {
    /* 0 -> 1: jobs, their steps and nodes, the VNI pool */
    "PRAGMA application_id = 1179468370;" /* STORE_APPLICATION_ID */
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY,"
    "  value INTEGER NOT NULL) STRICT;"
    "INSERT INTO meta (key, value) VALUES ('vni_cursor', 0);"
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY,"
    "  fm_job_id TEXT NOT NULL,"
    "  uid INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967294),"
    "  user TEXT,"
    "  nodes TEXT,"
    "  node_count INTEGER NOT NULL CHECK (node_count >= 0),"
    "  ncores INTEGER NOT NULL DEFAULT 0,"
    "  request TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('active', 'releasing', 'released', 'lost')),"
    "  hwcoll TEXT NOT NULL CHECK (hwcoll IN ('reserving', 'reserved',"
    "    'not_eligible', 'unavailable', 'lost', 'released')),"
    "  hwcoll_reason TEXT,"
    "  mcast_limit INTEGER NOT NULL DEFAULT 0,"
    "  token BLOB,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  released_ms INTEGER NOT NULL DEFAULT 0) STRICT;"
    "CREATE INDEX jobs_by_state ON jobs (state, id);"
    "CREATE INDEX jobs_by_uid ON jobs (uid, id);"
    "CREATE TABLE job_steps ("
    "  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  step_id TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('cleaning', 'cleaned', 'failed')),"
    "  detail TEXT,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (job_id, step_id)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE job_nodes ("
    "  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  node TEXT NOT NULL,"
    "  cxi TEXT NOT NULL CHECK (cxi IN"
    "    ('pending', 'created', 'destroyed', 'failed')),"
    "  detail TEXT,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (job_id, node)) STRICT, WITHOUT ROWID;"
    /* A VNI has a row while a job holds it or it sits in quarantine; the
     * primary key is what makes sharing a VNI impossible. */
    "CREATE TABLE vnis ("
    "  vni INTEGER PRIMARY KEY CHECK (vni BETWEEN 1 AND 65535),"
    "  job_id TEXT NOT NULL REFERENCES jobs (id),"
    "  pos INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('held', 'quarantined')),"
    "  until_ms INTEGER NOT NULL DEFAULT 0,"
    "  since_ms INTEGER NOT NULL) STRICT;"
    "CREATE INDEX vnis_by_job ON vnis (job_id, pos);",

    /* 1 -> 2: the durable outbox and the event log */
    "CREATE TABLE outbox ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  kind TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  arg TEXT NOT NULL DEFAULT '',"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_ms INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  last_error TEXT,"
    "  UNIQUE (kind, target, arg)) STRICT;"
    "CREATE INDEX outbox_by_due ON outbox (next_ms, id);"
    /* AUTOINCREMENT: a sequence number is never reused, even after the
     * newest events are pruned, so a reader's cursor stays valid. */
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  at_ms INTEGER NOT NULL,"
    "  type TEXT NOT NULL,"
    "  job_id TEXT,"
    "  detail TEXT NOT NULL) STRICT;",

    /* 2 -> 3: finding released jobs by age, for retention, without
     * indexing the active ones */
    "CREATE INDEX jobs_released ON jobs (released_ms) WHERE state = 'released';",

    /* 3 -> 4: the job's own traffic classes (RUN's tcs), a mask of
     * FMB_TC_* bits; 0 = none chosen, [cxi] tcs applies */
    "ALTER TABLE jobs ADD COLUMN tcs INTEGER NOT NULL DEFAULT 0"
    "  CHECK (tcs BETWEEN 0 AND 15);",

    /* 4 -> 5: jobs counted by state, kept by triggers: counting them
     * (metrics, status) read every entry of jobs_by_state for the state,
     * ~0.2 s on the loop at 1,000,000 released jobs.  Counting them here
     * is the one full read, once. */
    "CREATE TABLE job_counts ("
    "  state TEXT PRIMARY KEY,"
    "  n INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
    "INSERT INTO job_counts (state, n)"
    "  SELECT column1, (SELECT count(*) FROM jobs WHERE state = column1)"
    "  FROM (VALUES ('active'), ('releasing'), ('released'), ('lost'));"
    "CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs BEGIN"
    "  UPDATE job_counts SET n = n + 1 WHERE state = NEW.state; END;"
    "CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs BEGIN"
    "  UPDATE job_counts SET n = n - 1 WHERE state = OLD.state; END;"
    "CREATE TRIGGER jobs_counted_moved AFTER UPDATE OF state ON jobs"
    "  WHEN OLD.state IS NOT NEW.state BEGIN"
    "  UPDATE job_counts SET n = n - 1 WHERE state = OLD.state;"
    "  UPDATE job_counts SET n = n + 1 WHERE state = NEW.state; END;",

    /* 5 -> 6: the other counts metrics, status and health show, kept by
     * triggers as job_counts is: VNIs held and quarantined (each scrape
     * read every row of vnis), live jobs' multicast reservations and
     * addresses (every active job's row), and the outbox's depth (every
     * entry: 99,000 while a reconciliation's releases wait).  /metrics
     * took 8-11 ms per scrape at 13,000 active jobs, 1 ms with these.  A job
     * holds its reservation while active or releasing; the trigger on
     * jobs only does arithmetic when that, or its size, changes. */
    "CREATE TABLE tallies ("
    "  name TEXT PRIMARY KEY,"
    "  n INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
    "INSERT INTO tallies (name, n) VALUES " TALLY_ROWS ";"
    "CREATE TRIGGER vnis_tallied_in AFTER INSERT ON vnis BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'vnis_' || NEW.state; END;"
    "CREATE TRIGGER vnis_tallied_out AFTER DELETE ON vnis BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'vnis_' || OLD.state; END;"
    "CREATE TRIGGER vnis_tallied_moved AFTER UPDATE OF state ON vnis"
    "  WHEN OLD.state IS NOT NEW.state BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'vnis_' || OLD.state;"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'vnis_' || NEW.state; END;"
    "CREATE TRIGGER outbox_tallied_in AFTER INSERT ON outbox BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'outbox'; END;"
    "CREATE TRIGGER outbox_tallied_out AFTER DELETE ON outbox BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'outbox'; END;"
    "CREATE TRIGGER jobs_mcast_in AFTER INSERT ON jobs"
    "  WHEN " LIVE_MCAST ("NEW") " BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n + NEW.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    "CREATE TRIGGER jobs_mcast_out AFTER DELETE ON jobs"
    "  WHEN " LIVE_MCAST ("OLD") " BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n - OLD.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    "CREATE TRIGGER jobs_mcast_moved AFTER UPDATE OF state, hwcoll, mcast_limit"
    "  ON jobs WHEN " LIVE_MCAST ("OLD") " IS NOT " LIVE_MCAST ("NEW")
    "  OR (" LIVE_MCAST ("NEW") " AND OLD.mcast_limit IS NOT NEW.mcast_limit)"
    "  BEGIN"
    "  UPDATE tallies SET n = n + " LIVE_MCAST ("NEW") " - " LIVE_MCAST ("OLD")
    "    WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n + " LIVE_MCAST ("NEW") " * NEW.mcast_limit"
    "    - " LIVE_MCAST ("OLD") " * OLD.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    /* and the quarantined VNIs by the time they leave it: expiry runs
     * every second and read every VNI held (1.5 ms at 24,000) */
    "CREATE INDEX vnis_expiring ON vnis (until_ms)"
    "  WHERE state = 'quarantined' AND until_ms > 0;",

    /* 6 -> 7: the nodes of a job still to report its CXI services
     * destroyed.  Each report after CLEANUP asks whether any is left: it
     * counted every node of the job (O(nodes) a report, O(nodes^2) an
     * epilog wave), and this finds the first one in a key lookup. */
    "CREATE INDEX job_nodes_waiting ON job_nodes (job_id) WHERE cxi != 'destroyed';",
};

#define SCHEMA_VERSION ((int)(sizeof (migrations) / sizeof (migrations[0])))

const char *store_migration (int from)
{
    return from >= 0 && from < SCHEMA_VERSION ? migrations[from] : NULL;
}

int store_schema_version (void)
{
    return SCHEMA_VERSION;
}

int store_file_version (struct store *st)
{
    return st->file_version;
}

int store_errno (int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return EAGAIN;
    case SQLITE_NOMEM:
        return ENOMEM;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return EPERM;
    case SQLITE_FULL:
        return ENOSPC;
    case SQLITE_CANTOPEN:
        return ENOENT;
    case SQLITE_CONSTRAINT:
        return rc == SQLITE_CONSTRAINT_FOREIGNKEY ? ENOENT : EEXIST;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_SCHEMA:
        return EPROTO;
    case SQLITE_TOOBIG:
        return EMSGSIZE;
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
        return EINVAL;
    default:
        return EIO;
    }
}

int store_fail (struct store *st, int rc, struct fmb_error *error, const char *what)
{
    int e = store_errno (rc);
    fmb_errorf (error,
                "%s: %s",
                what,
                st && st->db ? sqlite3_errmsg (st->db) : sqlite3_errstr (rc));
    errno = e ? e : EIO;
    return -1;
}

/* SQLite rolls a transaction back by itself after some errors
 * (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM): anything run after that
 * would commit on its own -- a savepoint would even start a new
 * transaction that its RELEASE commits -- while the caller believes it
 * part of the transaction, to be committed or rolled back whole.  Such a
 * statement is refused; the caller's commit fails as well. */
static int check_tx_alive (struct store *st, struct fmb_error *error)
{
    if (st->begin_failed) {
        errno = EIO;
        return fmb_errorf (error, "%s", st->begin_error);
    }
    if (st->tx_depth == 0 || st->begin_pending || !sqlite3_get_autocommit (st->db))
        return 0;
    errno = EIO;
    return fmb_errorf (error,
                       "the transaction was rolled back after an earlier error; "
                       "nothing more is written in it");
}

static int begin_now (struct store *st, struct fmb_error *error);
static bool tx_control (const char *sql);

/* The statement for 'sql', prepared once and cached, reset. */
static sqlite3_stmt *cached_stmt (struct store *st,
                                  const char *sql,
                                  struct fmb_error *error)
{
    int i;
    for (i = 0; i < STORE_STMT_CACHE && st->cache[i].sql; i++)
        if (st->cache[i].sql == sql) {
            sqlite3_reset (st->cache[i].stmt);
            sqlite3_clear_bindings (st->cache[i].stmt);
            return st->cache[i].stmt;
        }
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v3 (st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
    if (rc != SQLITE_OK) {
        store_fail (st, rc, error, "prepare");
        return NULL;
    }
    if (i < STORE_STMT_CACHE) {
        st->cache[i].sql = sql;
        st->cache[i].stmt = s;
    } else {
        /* The cache is sized for every statement we have; outgrowing it
         * is a bug, and leaking here would hide it. */
        sqlite3_finalize (s);
        errno = ENOSPC;
        fmb_errorf (error, "statement cache full");
        return NULL;
    }
    return s;
}

sqlite3_stmt *store_stmt (struct store *st, const char *sql, struct fmb_error *error)
{
    sqlite3_stmt *s = cached_stmt (st, sql, error);
    if (!s)
        return NULL;
    if (check_tx_alive (st, error) == 0 && begin_now (st, error) == 0)
        return s;
    /* The transaction could not begin (another writer held the lock past
     * the busy timeout): what only reads runs on its own, so that what
     * needs no write still answers; what writes fails, and so does the
     * commit. */
    if (st->begin_failed && sqlite3_stmt_readonly (s) && !tx_control (sql))
        return s;
    return NULL;
}

int store_step_done (struct store *st,
                     sqlite3_stmt *s,
                     struct fmb_error *error,
                     const char *what)
{
    int rc = sqlite3_step (s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode (st->db);
        sqlite3_reset (s);
        return store_fail (st, ext, error, what);
    }
    sqlite3_reset (s);
    return 0;
}

int store_bind_text (sqlite3_stmt *s, int idx, const char *text)
{
    if (!text)
        return sqlite3_bind_null (s, idx);
    return sqlite3_bind_text (s, idx, text, -1, SQLITE_STATIC);
}

int store_column_strdup (sqlite3_stmt *s, int col, char **ret)
{
    if (sqlite3_column_type (s, col) == SQLITE_NULL) {
        *ret = NULL;
        return 0;
    }
    const char *t = (const char *)sqlite3_column_text (s, col);
    if (!t || !(*ret = strdup (t))) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

static int64_t default_clock (void *arg)
{
    (void)arg;
    return fmb_realtime_ms ();
}

int64_t store_now (struct store *st)
{
    return st->now (st->now_arg);
}

int64_t store_changes (struct store *st)
{
    return sqlite3_total_changes64 (st->db);
}

void store_set_damage_hook (struct store *st, store_damage_f fn, void *arg)
{
    st->damage = fn;
    st->damage_arg = arg;
}

void store_set_clock (struct store *st, store_clock_f now, void *arg)
{
    st->now = now ? now : default_clock;
    st->now_arg = arg;
}

static int exec (struct store *st,
                 const char *sql,
                 struct fmb_error *error,
                 const char *what)
{
    int rc = sqlite3_exec (st->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_fail (st, sqlite3_extended_errcode (st->db), error, what);
    return 0;
}

static int query_int (struct store *st,
                      const char *sql,
                      int64_t *ret,
                      struct fmb_error *error)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2 (st->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK)
        return store_fail (st, rc, error, sql);
    rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode (st->db);
        sqlite3_finalize (s);
        return store_fail (st, ext, error, sql);
    }
    *ret = sqlite3_column_int64 (s, 0);
    sqlite3_finalize (s);
    return 0;
}

/* Counts kept by triggers (schema 6): what store_tally reads. */
static const char SQL_TALLY[] = "SELECT n FROM tallies WHERE name = ?1";

int store_tally (struct store *st,
                 const char *name,
                 unsigned *ret,
                 struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_TALLY, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode (st->db);
        sqlite3_reset (s);
        if (rc == SQLITE_DONE) {
            errno = EPROTO;
            return fmb_errorf (error,
                               "no tally '%s' in the store (fmbrokerd --check-db "
                               "names what is missing, --recount makes it again)",
                               name);
        }
        return store_fail (st, ext, error, name);
    }
    int64_t n = sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    *ret = n < 0 ? 0 : n > UINT_MAX ? UINT_MAX : (unsigned)n;
    return 0;
}

int store_query_plan (
    struct store *st, const char *query, char *out, size_t len, struct fmb_error *error)
{
    static const struct {
        const char *name;
        const char *sql;
    } queries[] = {
        {"prune_jobs", SQL_PRUNE_JOBS},
        {"prune_events", SQL_PRUNE_EVENTS},
        {"recover", SQL_JOB_RESERVING},
        {"unreleased", SQL_JOB_UNRELEASED},
        {"count", SQL_JOB_COUNT},
        {"tally", SQL_TALLY},
        {"vni_first_free", SQL_VNI_FIRST_FREE},
        {"vni_expire", SQL_VNI_EXPIRE},
        {"vni_outside", SQL_VNI_OUTSIDE},
        {"node_waiting", SQL_NODE_WAITING},
        {"node_list_waiting", SQL_NODE_LIST_WAITING},
    };
    /* listings: the statement store_job_list picks for such a filter */
    static const struct {
        const char *name;
        struct store_job_filter filter;
    } listings[] = {
        {"list_state", {.state = STORE_JOB_ACTIVE, .uid = -1}},
        {"list_state_uid", {.state = STORE_JOB_LOST, .uid = 1000}},
        {"list_released_uid", {.state = STORE_JOB_RELEASED, .uid = 1000}},
        {"list_uid", {.state = -1, .uid = 1000}},
        {"list_all", {.state = -1, .uid = -1}},
    };
    const char *sql = NULL;
    for (size_t i = 0; i < sizeof (queries) / sizeof (queries[0]); i++)
        if (strcmp (queries[i].name, query) == 0)
            sql = queries[i].sql;
    for (size_t i = 0; i < sizeof (listings) / sizeof (listings[0]); i++)
        if (strcmp (listings[i].name, query) == 0)
            sql = store_job_list_sql (&listings[i].filter);
    if (!sql) {
        errno = EINVAL;
        return fmb_errorf (error, "no query named '%s'", query);
    }
    char *explain = NULL;
    if (asprintf (&explain, "EXPLAIN QUERY PLAN %s", sql) < 0) {
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2 (st->db, explain, -1, &s, NULL);
    free (explain);
    if (rc != SQLITE_OK)
        return store_fail (st, rc, error, query);
    size_t used = 0;
    out[0] = '\0';
    while (sqlite3_step (s) == SQLITE_ROW && used < len) {
        int n = snprintf (out + used,
                          len - used,
                          "%s%s",
                          used ? "; " : "",
                          (const char *)sqlite3_column_text (s, 3));
        used += n > 0 ? (size_t)n : 0;
    }
    sqlite3_finalize (s);
    return 0;
}

/* ---- transactions -------------------------------------------------- */

/* Transaction statements by depth, prepared once: a RUN opens and closes
 * several savepoints, and compiling "SAVEPOINT spN" each time cost more
 * than the statements inside. */
static const char *const sql_begin[] = {"BEGIN IMMEDIATE",
                                        "SAVEPOINT sp1",
                                        "SAVEPOINT sp2",
                                        "SAVEPOINT sp3",
                                        "SAVEPOINT sp4",
                                        "SAVEPOINT sp5",
                                        "SAVEPOINT sp6",
                                        "SAVEPOINT sp7"};
static const char *const sql_end[] = {"COMMIT",
                                      "RELEASE sp1",
                                      "RELEASE sp2",
                                      "RELEASE sp3",
                                      "RELEASE sp4",
                                      "RELEASE sp5",
                                      "RELEASE sp6",
                                      "RELEASE sp7"};
#define TX_CACHED_DEPTH ((int)(sizeof (sql_begin) / sizeof (sql_begin[0])))

/* Is 'sql' one of the cached transaction statements?  (SQLite calls them
 * read-only.) */
static bool tx_control (const char *sql)
{
    for (int i = 0; i < TX_CACHED_DEPTH; i++)
        if (sql == sql_begin[i] || sql == sql_end[i])
            return true;
    return false;
}

/* Run the transaction statement 'cached[depth]', or 'prefix' followed by
 * the depth when nesting goes deeper than the table. */
static int tx_statement (struct store *st,
                         const char *const *cached,
                         const char *prefix,
                         int depth,
                         struct fmb_error *error,
                         const char *what)
{
    if (depth < TX_CACHED_DEPTH) {
        sqlite3_stmt *s = store_stmt (st, cached[depth], error);
        return s ? store_step_done (st, s, error, what) : -1;
    }
    char sql[32];
    if (check_tx_alive (st, error) < 0)
        return -1;
    snprintf (sql, sizeof (sql), "%s%d", prefix, depth);
    return exec (st, sql, error, what);
}

int store_begin (struct store *st, struct fmb_error *error)
{
    if (tx_statement (
            st, sql_begin, "SAVEPOINT sp", st->tx_depth, error, "begin transaction") <
        0)
        return -1;
    st->tx_depth++;
    return 0;
}

int store_begin_on_use (struct store *st, struct fmb_error *error)
{
    if (st->tx_depth != 0) {
        errno = EBUSY;
        return fmb_errorf (error, "a transaction is already open");
    }
    st->begin_pending = true;
    st->tx_depth = 1;
    return 0;
}

/* The BEGIN that store_begin_on_use put off, before the first statement
 * in its transaction.  A failure is kept: what the transaction's other
 * statements would write could not commit with the first one's. */
static int begin_now (struct store *st, struct fmb_error *error)
{
    if (!st->begin_pending)
        return 0;
    struct fmb_error why;
    st->begin_pending = false;
    st->tx_depth = 0; /* the BEGIN runs outside any transaction */
    int rc = tx_statement (st, sql_begin, "SAVEPOINT sp", 0, &why, "begin transaction");
    st->tx_depth = 1;
    if (rc == 0)
        return 0;
    int saved = errno;
    st->begin_failed = true;
    snprintf (st->begin_error, sizeof (st->begin_error), "%s", why.text);
    fmb_errorf (error, "%s", why.text);
    errno = saved;
    return -1;
}

const char *store_tx_error (const struct store *st)
{
    return st->begin_failed ? st->begin_error : NULL;
}

/* Is the open transaction one that never began (store_begin_on_use, and
 * no statement ran, or its BEGIN failed)? */
static bool unbegun (const struct store *st)
{
    return st->tx_depth == 1 && (st->begin_pending || st->begin_failed);
}

/* A transaction that never began ends without a statement; one whose
 * BEGIN failed ends with its error. */
static int end_unbegun (struct store *st, struct fmb_error *error)
{
    bool failed = st->begin_failed;
    st->begin_pending = st->begin_failed = false;
    st->tx_depth--;
    if (!failed)
        return 0;
    errno = EIO;
    return fmb_errorf (error, "%s", st->begin_error);
}

int store_commit (struct store *st, struct fmb_error *error)
{
    if (st->tx_depth <= 0) {
        errno = EINVAL;
        return fmb_errorf (error, "commit without a transaction");
    }
    if (unbegun (st))
        return end_unbegun (st, error);
    if (tx_statement (st, sql_end, "RELEASE sp", st->tx_depth - 1, error, "commit") <
        0) {
        store_rollback (st);
        return -1;
    }
    st->tx_depth--;
    return 0;
}

void store_rollback (struct store *st)
{
    int saved = errno;
    char sql[64];
    if (st->tx_depth <= 0)
        return;
    if (unbegun (st)) {
        struct fmb_error ignored;
        (void)end_unbegun (st, &ignored);
        errno = saved;
        return;
    }
    if (st->tx_depth == 1)
        snprintf (sql, sizeof (sql), "ROLLBACK");
    else
        snprintf (sql,
                  sizeof (sql),
                  "ROLLBACK TO sp%d; RELEASE sp%d",
                  st->tx_depth - 1,
                  st->tx_depth - 1);
    /* ROLLBACK fails only when SQLite already rolled back by itself
     * (e.g. after SQLITE_FULL); either way the transaction is gone. */
    (void)sqlite3_exec (st->db, sql, NULL, NULL, NULL);
    st->tx_depth--;
    errno = saved;
}

/* ---- opening ------------------------------------------------------- */

static uint32_t be32 (const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A file shorter than the page count in its header lost its tail: every
 * page there would read as damage later, so refuse it now.  The count is
 * valid only when the header's "version-valid-for" matches its change
 * counter (SQLite's own rule).  With a WAL left by a crash the check
 * is skipped: a checkpoint writes page 1 first, so a crash in the middle
 * leaves a short file that replaying the WAL completes. */
static int check_size (const char *path,
                       const unsigned char *head,
                       off_t size,
                       struct fmb_error *error)
{
    uint32_t page_size = (uint32_t)head[16] << 8 | head[17];
    if (page_size == 1)
        page_size = 65536;
    uint32_t pages = be32 (head + 28);
    if (pages == 0 || be32 (head + 24) != be32 (head + 92))
        return 0;
    char wal[4096];
    struct stat wsb;
    if (snprintf (wal, sizeof (wal), "%s-wal", path) >= (int)sizeof (wal) ||
        (stat (wal, &wsb) == 0 && wsb.st_size > 0))
        return 0;
    if ((uint64_t)pages * page_size > (uint64_t)size) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: damaged database: truncated (its header says %u "
                           "pages of %u bytes, the file holds %lld bytes)",
                           path,
                           pages,
                           page_size,
                           (long long)size);
    }
    return 0;
}

/* Refuse anything that is not an empty file or an SQLite file, before
 * SQLite gets to touch it. */
static int check_file (const char *path, bool *ret_exists, struct fmb_error *error)
{
    static const char magic[16] = "SQLite format 3";
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *ret_exists = false;
            return 0;
        }
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    }
    struct stat sb;
    char head[100];
    ssize_t n = 0;
    if (fstat (fd, &sb) < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    }
    if (!S_ISREG (sb.st_mode)) {
        close (fd);
        errno = EINVAL;
        return fmb_errorf (error, "%s: not a regular file", path);
    }
    if (sb.st_size > 0)
        n = read (fd, head, sizeof (head));
    int saved = errno;
    close (fd);
    *ret_exists = true;
    if (n < 0) {
        errno = saved;
        return fmb_errorf (error, "%s: %s", path, strerror (errno));
    }
    if (sb.st_size == 0)
        return 0; /* SQLite treats an empty file as an empty database */
    if (n < (ssize_t)sizeof (magic) || memcmp (head, magic, sizeof (magic)) != 0) {
        errno = EPROTO;
        return fmb_errorf (error, "%s: not an SQLite database", path);
    }
    if (n < (ssize_t)sizeof (head)) {
        errno = EPROTO;
        return fmb_errorf (error, "%s: truncated SQLite header", path);
    }
    return check_size (path, (const unsigned char *)head, sb.st_size, error);
}

/* Run an integrity pragma; anything but a single "ok" is damage, named
 * by SQLite's first complaint. */
static int integrity (struct store *st,
                      const char *path,
                      const char *sql,
                      struct fmb_error *error)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2 (st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step (s);
    if (rc != SQLITE_ROW ||
        strcmp ((const char *)sqlite3_column_text (s, 0), "ok") != 0) {
        char what[160];
        snprintf (what,
                  sizeof (what),
                  "%s",
                  rc == SQLITE_ROW ? (const char *)sqlite3_column_text (s, 0)
                                   : sqlite3_errmsg (st->db));
        sqlite3_finalize (s);
        errno = EPROTO;
        return fmb_errorf (error, "%s: damaged database: %s", path, what);
    }
    sqlite3_finalize (s);
    return 0;
}

/* Is the open file ours, at a version we know, and undamaged as far as
 * the bounded check sees? */
static int check_schema (struct store *st, const char *path, struct fmb_error *error)
{
    int64_t appid, version, ntables;
    struct fmb_error inner;
    if (query_int (st, "PRAGMA application_id", &appid, &inner) < 0 ||
        query_int (st, "PRAGMA user_version", &version, &inner) < 0 ||
        query_int (st, "SELECT count(*) FROM sqlite_schema", &ntables, &inner) < 0) {
        errno = EPROTO;
        return fmb_errorf (error, "%s: damaged database: %s", path, inner.text);
    }
    if (appid != STORE_APPLICATION_ID && (version != 0 || ntables != 0 || appid != 0)) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: not an fmbroker database (application_id %#llx); "
                           "refusing to touch it",
                           path,
                           (unsigned long long)appid);
    }
    if (version > SCHEMA_VERSION) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: schema version %lld is newer than this fmbroker "
                           "knows (%d); run the newer fmbrokerd or restore a backup",
                           path,
                           (long long)version,
                           SCHEMA_VERSION);
    }
    /* Bounded: these tables are small whatever the history (at most one
     * row per VNI of the pool, a few counts); see the comment at the top. */
    static const struct {
        const char *table;
        int since_version;
    } bounded[] = {{"meta", 1}, {"vnis", 1}, {"job_counts", 5}, {"tallies", 6}};
    for (size_t i = 0; i < sizeof (bounded) / sizeof (bounded[0]); i++) {
        char sql[64];
        snprintf (sql, sizeof (sql), "PRAGMA quick_check(%s)", bounded[i].table);
        if (version >= bounded[i].since_version && integrity (st, path, sql, error) < 0)
            return -1;
    }
    st->file_version = (int)version;
    return 0;
}

static int migrate (struct store *st, int target, struct fmb_error *error)
{
    for (int v = st->file_version; v < target; v++) {
        char sql[64];
        if (store_begin (st, error) < 0)
            return -1;
        snprintf (sql, sizeof (sql), "PRAGMA user_version = %d", v + 1);
        if (exec (st, migrations[v], error, "migrate") < 0 ||
            exec (st, sql, error, "migrate") < 0) {
            store_rollback (st);
            return fmb_error_prefix (error, "schema version %d to %d", v, v + 1);
        }
        if (store_commit (st, error) < 0)
            return -1;
        st->file_version = v + 1;
    }
    return 0;
}

/* No bulk allocation when a page cache is created: SQLite's default
 * (20 pages, ~86 KiB) is made by every temporary b-tree too, and the
 * jobs table's CHECKs (state IN (...), hwcoll IN (...)) open two of them
 * in each statement that writes a job.  Those ~170 KiB, malloc'ed and
 * freed at every RUN and CLEANUP, made glibc grow and trim the heap (brk)
 * and fault the pages in again: ~20% of the broker's CPU with 64 clients.
 * Pages are then allocated one at a time, as they are used.  Process-
 * wide, so set once, before SQLite initializes (it refuses later, which
 * only leaves the defaults). */
static void configure_sqlite (void)
{
    (void)sqlite3_config (SQLITE_CONFIG_PAGECACHE, NULL, 0, 0);
    /* No memory statistics (nothing reads them): with them on, every
     * sqlite3_malloc and sqlite3_free takes a process-wide mutex. */
    (void)sqlite3_config (SQLITE_CONFIG_MEMSTATUS, 0);
}

static int open_db (const char *db_path,
                    int target_version,
                    struct store **ret,
                    struct fmb_error *error)
{
    static pthread_once_t configured = PTHREAD_ONCE_INIT;
    (void)pthread_once (&configured, configure_sqlite);
    struct store *st = calloc (1, sizeof (*st));
    bool exists;
    if (!st)
        return fmb_errorf (error, "out of memory");
    st->now = default_clock;
    if (check_file (db_path, &exists, error) < 0)
        goto error;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
    if (!exists) {
        /* Create it private first: SQLite gives the -wal and -shm files
         * the database file's mode, and the database holds job owners and
         * (encrypted) tokens that are the service user's business only. */
        int fd = open (db_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            fmb_errorf (error, "%s: %s", db_path, strerror (errno));
            goto error;
        }
        if (fd >= 0)
            close (fd);
    }
    int rc = sqlite3_open_v2 (db_path, &st->db, flags, NULL);
    if (rc != SQLITE_OK) {
        store_fail (st, rc, error, db_path);
        goto error;
    }
    sqlite3_busy_timeout (st->db, STORE_BUSY_TIMEOUT_MS);
    if (check_schema (st, db_path, error) < 0)
        goto error;
    int64_t one;
    char mode[16] = "";
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2 (st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) ==
        SQLITE_OK) {
        if (sqlite3_step (s) == SQLITE_ROW)
            snprintf (
                mode, sizeof (mode), "%s", (const char *)sqlite3_column_text (s, 0));
        sqlite3_finalize (s);
    }
    if (strcmp (mode, "wal") != 0) {
        errno = EIO;
        fmb_errorf (error, "%s: cannot use WAL journal mode", db_path);
        goto error;
    }
    /* temp_store: a statement journal (a retention batch inside a pass's
     * savepoint, some hundred KiB) stays in memory, not in a file under
     * /var/tmp written on the loop. */
    if (exec (st, "PRAGMA synchronous = FULL", error, "synchronous") < 0 ||
        exec (st, "PRAGMA temp_store = MEMORY", error, "temp_store") < 0 ||
        exec (st, "PRAGMA foreign_keys = ON", error, "foreign_keys") < 0 ||
        query_int (st, "PRAGMA foreign_keys", &one, error) < 0)
        goto error;
    if (migrate (st, target_version, error) < 0) {
        fmb_error_prefix (error, "%s", db_path);
        goto error;
    }
    *ret = st;
    return 0;
error:
    store_close (st);
    return -1;
}

/* The counts triggers keep, against what they count (schema 5: jobs by
 * state; 6: the tallies): a row for each that differs or is missing.
 * Only a file changed behind SQLite's back (damage the page checks do
 * not see, a hand edit with the triggers dropped) can make them differ;
 * metrics, status and health would then show wrong figures (or, with a
 * row missing, fail), and store_recount() puts them right. */
static const char SQL_CHECK_JOB_COUNTS[] =
    "SELECT 'job_counts ' || e.column1, c.n, e.column2"
    " FROM (" JOB_COUNT_ROWS
    ") AS e LEFT JOIN job_counts AS c ON c.state = e.column1"
    " WHERE c.n IS NOT e.column2";
static const char SQL_CHECK_TALLIES[] =
    "SELECT 'tallies ' || e.column1, t.n, e.column2"
    " FROM (VALUES " TALLY_ROWS
    ") AS e LEFT JOIN tallies AS t ON t.name = e.column1"
    " WHERE t.n IS NOT e.column2";

/* Report each kept count that differs from a count of its table through
 * 'cb'; the number of them, or -1 when they cannot be read. */
static int check_counts (struct store *st,
                         store_problem_f cb,
                         void *arg,
                         struct fmb_error *error)
{
    const char *const checks[] = {SQL_CHECK_JOB_COUNTS, SQL_CHECK_TALLIES};
    const int since_version[] = {5, 6};
    int nproblems = 0;
    for (size_t i = 0; i < sizeof (checks) / sizeof (checks[0]); i++) {
        if (st->file_version < since_version[i])
            continue;
        sqlite3_stmt *s;
        int rc = sqlite3_prepare_v2 (st->db, checks[i], -1, &s, NULL);
        if (rc != SQLITE_OK)
            return store_fail (st, rc, error, "check the kept counts");
        while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
            char line[160], kept[32] = "missing";
            if (sqlite3_column_type (s, 1) != SQLITE_NULL)
                snprintf (kept,
                          sizeof (kept),
                          "%lld",
                          (long long)sqlite3_column_int64 (s, 1));
            snprintf (line,
                      sizeof (line),
                      "%s: kept count %s (what metrics, status and health "
                      "show), counted %lld",
                      (const char *)sqlite3_column_text (s, 0),
                      kept,
                      (long long)sqlite3_column_int64 (s, 2));
            if (nproblems++ == 0)
                fmb_errorf (error, "%s", line);
            if (cb)
                cb (line, arg);
        }
        int ext = sqlite3_extended_errcode (st->db);
        sqlite3_finalize (s);
        if (rc != SQLITE_DONE)
            return store_fail (st, ext, error, "check the kept counts");
    }
    return nproblems;
}

/* The existing file at 'db_path', opened read-only (nothing created or
 * written, whoever else has it open) and checked as start-up checks it. */
static int open_readonly (const char *db_path,
                          struct store **ret,
                          struct fmb_error *error)
{
    struct store *st = calloc (1, sizeof (*st));
    bool exists;
    if (!st)
        return fmb_errorf (error, "out of memory");
    if (check_file (db_path, &exists, error) < 0)
        goto error;
    if (!exists) {
        errno = ENOENT;
        fmb_errorf (error, "%s: %s", db_path, strerror (errno));
        goto error;
    }
    int rc = sqlite3_open_v2 (
        db_path, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_EXRESCODE, NULL);
    if (rc != SQLITE_OK) {
        store_fail (st, rc, error, db_path);
        goto error;
    }
    sqlite3_busy_timeout (st->db, STORE_BUSY_TIMEOUT_MS);
    if (check_schema (st, db_path, error) < 0)
        goto error;
    *ret = st;
    return 0;
error:
    store_close (st);
    return -1;
}

int store_check_full (const char *db_path,
                      store_problem_f cb,
                      void *arg,
                      struct fmb_error *error)
{
    struct store *st;
    int nproblems = 0, rc;
    if (open_readonly (db_path, &st, error) < 0)
        return -1;
    /* integrity_check, not quick_check: it also compares every index
     * with its table.  At most 100 problems: enough to judge the file. */
    sqlite3_stmt *s;
    rc = sqlite3_prepare_v2 (st->db, "PRAGMA integrity_check(100)", -1, &s, NULL);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        if ((rc = sqlite3_step (s)) != SQLITE_ROW)
            break;
        const char *line = (const char *)sqlite3_column_text (s, 0);
        if (line && strcmp (line, "ok") != 0) {
            if (nproblems++ == 0)
                fmb_errorf (error, "%s: damaged database: %s", db_path, line);
            if (cb)
                cb (line, arg);
        }
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    else if (nproblems == 0) {
        fmb_errorf (
            error, "%s: damaged database: %s", db_path, sqlite3_errmsg (st->db));
        nproblems++;
    }
    sqlite3_finalize (s);
    int err = nproblems ? EPROTO : 0;
    if (nproblems == 0) {
        /* every page read sound: do the kept counts match, is every
         * object of the schema there as fmbroker made it? */
        struct fmb_error objects;
        int tables = 0, n = check_counts (st, cb, arg, error);
        if (n < 0)
            goto error; /* not read: that is not damage */
        if (n > 0)
            fmb_error_prefix (error, "%s: counts differ from the tables", db_path);
        int m = store_derived_check (st, cb, arg, &tables, &objects);
        if (m < 0) {
            fmb_errorf (error, "%s", objects.text);
            goto error;
        }
        if (m > 0 && n == 0)
            fmb_errorf (error,
                        "%s: the schema differs from fmbroker's: %s",
                        db_path,
                        objects.text);
        nproblems = n + m;
        err = tables ? EPROTO : nproblems ? EUCLEAN : 0;
    }
    store_close (st);
    errno = err;
    return nproblems ? -1 : 0;
error:
    store_close (st);
    return -1;
}

/* Every kept count set to what it counts, missing rows made again; rows
 * already right are left alone, so that the changes are the fixes. */
static const char SQL_RECOUNT[] =
    "INSERT INTO job_counts (state, n) " JOB_COUNT_ROWS
    " WHERE true ON CONFLICT (state) DO UPDATE SET n = excluded.n"
    " WHERE n IS NOT excluded.n;"
    "INSERT INTO tallies (name, n) VALUES " TALLY_ROWS
    " ON CONFLICT (name) DO UPDATE SET n = excluded.n WHERE n IS NOT excluded.n;";

/* Make again what store_derived_check finds missing or different and,
 * when 'recount' or a trigger was made again (its count may have drifted
 * meanwhile), set the kept counts from their tables; one transaction. */
static int repair (struct store *st,
                   bool recount,
                   struct store_repair *r,
                   struct fmb_error *error)
{
    unsigned triggers;
    memset (r, 0, sizeof (*r));
    if (store_begin (st, error) < 0)
        return -1;
    int n = store_derived_rebuild (st, r->made, sizeof (r->made), &triggers, error);
    if (n < 0)
        goto error;
    r->objects = (unsigned)n;
    if (recount || triggers) {
        int64_t before = store_changes (st);
        if (exec (st, SQL_RECOUNT, error, "recount") < 0)
            goto error;
        r->counts = (unsigned)(store_changes (st) - before);
    }
    return store_commit (st, error);
error:
    store_rollback (st);
    return -1;
}

const struct store_repair *store_open_repair (const struct store *st)
{
    return &st->repaired;
}

int store_recount (const char *db_path,
                   struct store_repair *ret,
                   struct fmb_error *error)
{
    struct store *st;
    /* The version first, read-only: no migration here (a broker of the
     * file's version may be serving on it), and nothing written to a file
     * that is not at this version (an empty one would get a header). */
    if (open_readonly (db_path, &st, error) < 0)
        return -1;
    int version = st->file_version;
    store_close (st);
    if (version != SCHEMA_VERSION) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: schema version %d, not %d: start this fmbrokerd "
                           "once to bring it up to date, then recount",
                           db_path,
                           version,
                           SCHEMA_VERSION);
    }
    if (open_db (db_path, SCHEMA_VERSION, &st, error) < 0)
        return -1;
    if (repair (st, true, ret, error) < 0)
        goto error;
    store_close (st);
    return 0;
error:
    fmb_error_prefix (error, "%s", db_path);
    store_close (st);
    return -1;
}

int store_create_at_version (const char *db_path, int version, struct fmb_error *error)
{
    struct store *st;
    if (version < 0 || version > SCHEMA_VERSION) {
        errno = EINVAL;
        return fmb_errorf (error, "no schema version %d", version);
    }
    if (open_db (db_path, version, &st, error) < 0)
        return -1;
    store_close (st);
    return 0;
}

int store_open (const char *db_path,
                const char *key_path,
                struct store **ret,
                struct fmb_error *error)
{
    struct store *st;
    struct fmb_error why;
    int tables = 0; /* (left alone when the check fails) */
    if (open_db (db_path, SCHEMA_VERSION, &st, error) < 0)
        return -1;
    int wrong = store_derived_check (st, NULL, NULL, &tables, &why);
    if (wrong < 0 || tables > 0) {
        if (tables > 0)
            errno = EPROTO;
        fmb_errorf (error, "%s: %s", db_path, why.text);
        goto error;
    }
    if (wrong > 0 && repair (st, false, &st->repaired, error) < 0) {
        fmb_error_prefix (error, "%s", db_path);
        goto error;
    }
    /* A missing key with tokens in the database means the key was lost:
     * making a new one would quietly turn every stored token into garbage. */
    int64_t ntokens = 0;
    if (access (key_path, F_OK) < 0 && errno == ENOENT) {
        if (query_int (st,
                       "SELECT count(*) FROM jobs WHERE token IS NOT NULL",
                       &ntokens,
                       error) < 0)
            goto error;
        if (ntokens > 0) {
            errno = ENOENT;
            fmb_errorf (error,
                        "%s: token key missing while %s holds %lld encrypted "
                        "session tokens; restore the key file",
                        key_path,
                        db_path,
                        (long long)ntokens);
            goto error;
        }
    }
    if (tokencrypt_open (key_path, true, &st->tc, NULL, error) < 0)
        goto error;
    (void)store_checkpointer_start (st, db_path); /* else auto-checkpoint */
    *ret = st;
    return 0;
error:
    store_close (st);
    return -1;
}

void store_close (struct store *st)
{
    if (st) {
        int saved = errno;
        while (st->tx_depth > 0)
            store_rollback (st);
        store_checkpointer_stop (st);
        for (int i = 0; i < STORE_STMT_CACHE && st->cache[i].sql; i++)
            sqlite3_finalize (st->cache[i].stmt);
        sqlite3_close (st->db);
        tokencrypt_destroy (st->tc);
        free (st);
        errno = saved;
    }
}

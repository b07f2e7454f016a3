/* open.c: opening, checking and migrating the database; store_open and
 * store_close, the repair at open and store_recount.
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
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_private.h"

#define STORE_APPLICATION_ID  0x464d4252 /* "FMBR" */
#define STORE_BUSY_TIMEOUT_MS 5000

int store_file_version (struct store *st)
{
    return st->file_version;
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
    if (store_query_int (st, "PRAGMA application_id", &appid, &inner) < 0 ||
        store_query_int (st, "PRAGMA user_version", &version, &inner) < 0 ||
        store_query_int (st, "SELECT count(*) FROM sqlite_schema", &ntables, &inner) <
            0) {
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
    if (version > store_schema_version ()) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: schema version %lld is newer than this fmbroker "
                           "knows (%d); run the newer fmbrokerd or restore a backup",
                           path,
                           (long long)version,
                           store_schema_version ());
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
        if (store_exec (st, store_migration (v), error, "migrate") < 0 ||
            store_exec (st, sql, error, "migrate") < 0) {
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

/* Open the SQLite connection to the file check_file passed, and check
 * what it holds (check_schema). */
static int connect_checked (struct store *st,
                            const char *db_path,
                            int flags,
                            struct fmb_error *error)
{
    int rc = sqlite3_open_v2 (db_path, &st->db, flags, NULL);
    if (rc != SQLITE_OK)
        return store_fail (st, rc, error, db_path);
    sqlite3_busy_timeout (st->db, STORE_BUSY_TIMEOUT_MS);
    return check_schema (st, db_path, error);
}

/* WAL, and the pragmas every connection that writes runs with. */
static int set_pragmas (struct store *st, const char *db_path, struct fmb_error *error)
{
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
        return -1;
    }
    /* temp_store: a statement journal (a retention batch inside a pass's
     * savepoint, some hundred KiB) stays in memory, not in a file under
     * /var/tmp written on the loop. */
    if (store_exec (st, "PRAGMA synchronous = FULL", error, "synchronous") < 0 ||
        store_exec (st, "PRAGMA temp_store = MEMORY", error, "temp_store") < 0 ||
        store_exec (st, "PRAGMA foreign_keys = ON", error, "foreign_keys") < 0 ||
        store_query_int (st, "PRAGMA foreign_keys", &one, error) < 0)
        return -1;
    return 0;
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
    store_set_clock (st, NULL, NULL);
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
    if (connect_checked (st, db_path, flags, error) < 0 ||
        set_pragmas (st, db_path, error) < 0)
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

/* The existing file at 'db_path', opened read-only (nothing created or
 * written, whoever else has it open) and checked as start-up checks it. */
int store_open_readonly (const char *db_path,
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
    if (connect_checked (
            st, db_path, SQLITE_OPEN_READONLY | SQLITE_OPEN_EXRESCODE, error) < 0)
        goto error;
    *ret = st;
    return 0;
error:
    store_close (st);
    return -1;
}

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
        if (store_exec (st, SQL_RECOUNT, error, "recount") < 0)
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
    if (store_open_readonly (db_path, &st, error) < 0)
        return -1;
    int version = st->file_version;
    store_close (st);
    if (version != store_schema_version ()) {
        errno = EPROTO;
        return fmb_errorf (error,
                           "%s: schema version %d, not %d: start this fmbrokerd "
                           "once to bring it up to date, then recount",
                           db_path,
                           version,
                           store_schema_version ());
    }
    if (open_db (db_path, store_schema_version (), &st, error) < 0)
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
    if (version < 0 || version > store_schema_version ()) {
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
    if (open_db (db_path, store_schema_version (), &st, error) < 0)
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
        if (store_query_int (st,
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

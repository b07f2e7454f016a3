/* db.c: the statement and transaction helpers the table files call:
 * SQLite codes to errno (store_errno, store_fail), the statement cache
 * (store_stmt), binding and columns, the clock, the kept tallies, and
 * nested transactions (store_begin, store_begin_on_use, store_commit,
 * store_rollback).  It calls nothing else of the store: every other file
 * sits above it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monotime.h"
#include "store_private.h"

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

int store_exec (struct store *st,
                const char *sql,
                struct fmb_error *error,
                const char *what)
{
    int rc = sqlite3_exec (st->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_fail (st, sqlite3_extended_errcode (st->db), error, what);
    return 0;
}

int store_query_int (struct store *st,
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
const char SQL_TALLY[] = "SELECT n FROM tallies WHERE name = ?1";

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
    return store_exec (st, sql, error, what);
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

/* outbox.c: the durable queue of FM operations still to be done.
 *
 * An entry is written in the same transaction as the state change that
 * needs it (e.g. CLEANUP writes "delete the FM job"), so a crash can lose
 * neither.  The broker runs due entries, and either removes them (done)
 * or pushes next_ms out with its own back-off (retry).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_private.h"

static const char SQL_OUTBOX_INSERT[] =
    "INSERT INTO outbox (kind, target, arg, next_ms, created_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, target, arg) DO NOTHING";
static const char SQL_OUTBOX_FIND[] =
    "SELECT id FROM outbox WHERE kind = ?1 AND target = ?2 AND arg = ?3";
static const char SQL_OUTBOX_DUE[] =
    "SELECT id, kind, target, arg, attempts, next_ms, created_ms, last_error"
    " FROM outbox WHERE next_ms <= ?1 ORDER BY next_ms, id LIMIT ?2";
static const char SQL_OUTBOX_HAS[] =
    "SELECT 1 FROM outbox WHERE kind = ?1 AND target = ?2 LIMIT 1";
static const char SQL_OUTBOX_NEXT[] = "SELECT min(next_ms) FROM outbox";
static const char SQL_OUTBOX_DONE[] = "DELETE FROM outbox WHERE id = ?1";
static const char SQL_OUTBOX_RETRY[] =
    "UPDATE outbox SET attempts = attempts + 1, next_ms = ?2, last_error = ?3"
    " WHERE id = ?1";

int store_outbox_put (struct store *st,
                      const char *kind,
                      const char *target,
                      const char *arg,
                      int64_t due_ms,
                      int64_t *ret_id,
                      struct fmb_error *error)
{
    if (strlen (kind) > STORE_KIND_MAX || strlen (target) > STORE_TARGET_MAX) {
        errno = EINVAL;
        return fmb_errorf (error, "outbox: kind or target too long");
    }
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_INSERT, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, target, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 3, arg ? arg : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 4, due_ms);
    sqlite3_bind_int64 (s, 5, store_now (st));
    if (store_step_done (st, s, error, "outbox put") < 0)
        return -1;
    if (!ret_id)
        return 0;
    if (!(s = store_stmt (st, SQL_OUTBOX_FIND, error)))
        return -1;
    sqlite3_bind_text (s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, target, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 3, arg ? arg : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *ret_id = sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    if (rc != SQLITE_ROW)
        return store_fail (st, rc, error, "outbox find");
    return 0;
}

int store_outbox_due (struct store *st,
                      int64_t now_ms,
                      unsigned limit,
                      store_outbox_f cb,
                      void *arg,
                      struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_DUE, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, now_ms);
    sqlite3_bind_int64 (s, 2, limit ? (int64_t)limit : -1);
    int rc;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        struct store_outbox_entry e = {
            .id = sqlite3_column_int64 (s, 0),
            .kind = (const char *)sqlite3_column_text (s, 1),
            .target = (const char *)sqlite3_column_text (s, 2),
            .arg = (const char *)sqlite3_column_text (s, 3),
            .attempts = (unsigned)sqlite3_column_int64 (s, 4),
            .next_ms = sqlite3_column_int64 (s, 5),
            .created_ms = sqlite3_column_int64 (s, 6),
            .last_error = (const char *)sqlite3_column_text (s, 7),
        };
        if (cb (&e, arg) < 0) {
            sqlite3_reset (s);
            return fmb_errorf (error, "listing stopped: %s", strerror (errno));
        }
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return store_fail (st, rc, error, "outbox due");
    return 0;
}

int store_outbox_next_ms (struct store *st, int64_t *ret, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_NEXT, error);
    if (!s)
        return -1;
    int rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_type (s, 0) == SQLITE_NULL ? INT64_MAX
                                                         : sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    return rc == SQLITE_ROW ? 0 : store_fail (st, rc, error, "outbox next");
}

static int change_one (struct store *st,
                       sqlite3_stmt *s,
                       int64_t id,
                       struct fmb_error *error)
{
    if (store_step_done (st, s, error, "outbox update") < 0)
        return -1;
    if (sqlite3_changes (st->db) == 0) {
        errno = ENOENT;
        return fmb_errorf (error, "outbox entry %lld not found", (long long)id);
    }
    return 0;
}

int store_outbox_done (struct store *st, int64_t id, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_DONE, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, id);
    return change_one (st, s, id, error);
}

int store_outbox_retry (struct store *st,
                        int64_t id,
                        int64_t next_ms,
                        const char *last_error,
                        struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_RETRY, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, id);
    sqlite3_bind_int64 (s, 2, next_ms);
    store_bind_text (s, 3, last_error);
    return change_one (st, s, id, error);
}

int store_outbox_depth (struct store *st, unsigned *ret, struct fmb_error *error)
{
    if (store_tally (st, "outbox", ret, error) < 0)
        return fmb_error_prefix (error, "outbox depth");
    return 0;
}

int store_outbox_has (struct store *st,
                      const char *kind,
                      const char *target,
                      bool *ret,
                      struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_OUTBOX_HAS, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, target, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail (st, rc, error, "outbox lookup");
    *ret = rc == SQLITE_ROW;
    return 0;
}

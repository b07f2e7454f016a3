/* events.c: the append-only event log read by GET /v1/events. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "store_private.h"

static const char SQL_EVENT_INSERT[] =
    "INSERT INTO events (at_ms, type, job_id, detail) VALUES (?1, ?2, ?3, ?4)";
static const char SQL_EVENT_LIST[] =
    "SELECT seq, at_ms, type, job_id, detail FROM events WHERE seq > ?1"
    " ORDER BY seq LIMIT ?2";
/* The last sequence handed out, even if that event was pruned since. */
static const char SQL_EVENT_FIRST[] = "SELECT coalesce(min(seq), 0) FROM events";
static const char SQL_EVENT_LAST[] =
    "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)";

int store_event_append (struct store *st,
                        const char *type,
                        const char *job_id,
                        const char *detail,
                        int64_t *ret_seq,
                        struct fmb_error *error)
{
    if (!type || !type[0] || strlen (type) > STORE_EVENT_TYPE_MAX) {
        errno = EINVAL;
        return fmb_errorf (
            error, "event type must be 1..%d bytes", STORE_EVENT_TYPE_MAX);
    }
    if (detail) {
        /* Readers parse this back: refuse anything but a JSON object now. */
        json_t *o = json_loads (detail, 0, NULL);
        bool ok = json_is_object (o);
        json_decref (o);
        if (!ok) {
            errno = EINVAL;
            return fmb_errorf (error, "event detail must be a JSON object");
        }
    }
    sqlite3_stmt *s = store_stmt (st, SQL_EVENT_INSERT, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, store_now (st));
    sqlite3_bind_text (s, 2, type, -1, SQLITE_STATIC);
    store_bind_text (s, 3, job_id);
    sqlite3_bind_text (s, 4, detail ? detail : "{}", -1, SQLITE_STATIC);
    if (store_step_done (st, s, error, "append event") < 0)
        return -1;
    if (ret_seq)
        *ret_seq = sqlite3_last_insert_rowid (st->db);
    return 0;
}

int store_event_list (struct store *st,
                      int64_t after,
                      unsigned limit,
                      store_event_f cb,
                      void *arg,
                      struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_EVENT_LIST, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, after);
    sqlite3_bind_int64 (s, 2, limit ? (int64_t)limit : -1);
    int rc;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        struct store_event ev = {
            .seq = sqlite3_column_int64 (s, 0),
            .at_ms = sqlite3_column_int64 (s, 1),
            .type = (const char *)sqlite3_column_text (s, 2),
            .job_id = (const char *)sqlite3_column_text (s, 3),
            .detail = (const char *)sqlite3_column_text (s, 4),
        };
        if (cb (&ev, arg) < 0) {
            sqlite3_reset (s);
            return fmb_errorf (error, "listing stopped: %s", strerror (errno));
        }
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return store_fail (st, rc, error, "list events");
    return 0;
}

static int query_seq (struct store *st,
                      const char *sql,
                      int64_t *ret,
                      struct fmb_error *error,
                      const char *what)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    int rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    if (rc != SQLITE_ROW)
        return store_fail (st, rc, error, what);
    return 0;
}

int store_event_last (struct store *st, int64_t *ret, struct fmb_error *error)
{
    return query_seq (st, SQL_EVENT_LAST, ret, error, "last event");
}

int store_event_first (struct store *st, int64_t *ret, struct fmb_error *error)
{
    return query_seq (st, SQL_EVENT_FIRST, ret, error, "first event");
}

/* vnipool.c: VNI allocation, next-fit round-robin from a persisted cursor.
 *
 * Next-fit (start after the VNI handed out last, wrap at the top) delays
 * reuse of a recently freed VNI for as long as the pool allows: a late
 * packet from an old job is then very unlikely to meet a new job on the
 * same VNI.  The cursor lives in the meta table so it survives restarts.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store_private.h"

/* The lowest free VNI in [?1, ?2] (?1 <= ?2): ?1 itself, or else the
 * value just above the first VNI from ?1 on whose successor is free.  It
 * reads the VNIs from ?1 up to the first gap and stops there: taking the
 * least of every candidate in the range (as it did) read every VNI held
 * above the cursor at each allocation, all of them once the cursor had
 * wrapped (12,000 held above it: RUN median 2.0-2.3 ms, against 1.0-1.5
 * with this). */
const char SQL_VNI_FIRST_FREE[] =
    "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM vnis WHERE vni = ?1) THEN ?1"
    " ELSE (SELECT v.vni + 1 FROM vnis AS v WHERE v.vni >= ?1 AND v.vni < ?2"
    " AND NOT EXISTS (SELECT 1 FROM vnis AS w WHERE w.vni = v.vni + 1)"
    " ORDER BY v.vni LIMIT 1) END";
static const char SQL_CURSOR_GET[] = "SELECT value FROM meta WHERE key = 'vni_cursor'";
static const char SQL_CURSOR_SET[] =
    "UPDATE meta SET value = ?1 WHERE key = 'vni_cursor'";
static const char SQL_VNI_INSERT[] =
    "INSERT INTO vnis (vni, job_id, pos, state, since_ms)"
    " VALUES (?1, ?2, ?3, 'held', ?4)";
static const char SQL_VNI_QUARANTINE[] =
    "UPDATE vnis SET state = 'quarantined', until_ms = ?2, since_ms = ?3"
    " WHERE job_id = ?1";
static const char SQL_VNI_FREE_JOB[] = "DELETE FROM vnis WHERE job_id = ?1";
/* through vnis_expiring (schema 6): it runs every second, and read every
 * VNI held before */
const char SQL_VNI_EXPIRE[] =
    "DELETE FROM vnis WHERE state = 'quarantined' AND until_ms > 0"
    " AND until_ms <= ?1";
static const char SQL_VNI_LIST[] =
    "SELECT vni, job_id, state, until_ms, since_ms FROM vnis WHERE vni > ?1"
    " ORDER BY vni LIMIT ?2";
/* The VNIs taken outside [?1, ?2]: none unless the pool was changed.
 * Two range counts, each reading only the VNIs it counts. */
const char SQL_VNI_OUTSIDE[] =
    "SELECT (SELECT count(*) FROM vnis WHERE vni < ?1)"
    " + (SELECT count(*) FROM vnis WHERE vni > ?2)";

static int first_free (
    struct store *st, unsigned lo, unsigned hi, unsigned *ret, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_FIRST_FREE, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, lo);
    sqlite3_bind_int64 (s, 2, hi);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "find free VNI");
    }
    bool found = sqlite3_column_type (s, 0) != SQLITE_NULL;
    *ret = (unsigned)sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    if (!found) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}

int store_vni_cursor (struct store *st, unsigned *ret, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_CURSOR_GET, error);
    if (!s)
        return -1;
    if (sqlite3_step (s) != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, sqlite3_errcode (st->db), error, "VNI cursor");
    }
    *ret = (unsigned)sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    return 0;
}

static int alloc_one (struct store *st,
                      const char *job_id,
                      unsigned pos,
                      unsigned min,
                      unsigned max,
                      uint16_t *out,
                      struct fmb_error *error)
{
    unsigned cursor, vni;
    if (store_vni_cursor (st, &cursor, error) < 0)
        return -1;
    unsigned start = cursor >= min && cursor < max ? cursor + 1 : min;
    if (first_free (st, start, max, &vni, error) < 0) {
        if (errno != ENOSPC)
            return -1;
        if (start == min || first_free (st, min, start - 1, &vni, error) < 0) {
            if (errno == ENOSPC)
                fmb_errorf (error, "no free VNI in %u-%u", min, max);
            return -1;
        }
    }
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_INSERT, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, vni);
    sqlite3_bind_text (s, 2, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 3, pos);
    sqlite3_bind_int64 (s, 4, store_now (st));
    if (store_step_done (st, s, error, "take VNI") < 0) {
        if (errno == ENOENT)
            fmb_errorf (error, "job '%s' not found", job_id);
        return -1;
    }
    if (!(s = store_stmt (st, SQL_CURSOR_SET, error)))
        return -1;
    sqlite3_bind_int64 (s, 1, vni);
    if (store_step_done (st, s, error, "move VNI cursor") < 0)
        return -1;
    *out = (uint16_t)vni;
    return 0;
}

/* From the kept counts of the VNIs held and in quarantine (as
 * store_vni_counts read them), less those outside the pool.  When none
 * is free, a search for a hole reads every
 * VNI of the pool twice before it says so (20.6 ms a RUN at the default
 * pool's 64,512), and would at every RUN for as long as the pool stays
 * exhausted.  (Counts can be wrong only if the store was edited;
 * --check-db finds that.  One short of the truth leaves the search to
 * find out.) */
int store_vni_left (struct store *st,
                    unsigned min,
                    unsigned max,
                    unsigned held,
                    unsigned quarantined,
                    int64_t *ret,
                    struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_OUTSIDE, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, min);
    sqlite3_bind_int64 (s, 2, max);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "count VNIs outside the pool");
    }
    int64_t outside = sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    *ret = (int64_t)(max - min + 1) - ((int64_t)held + quarantined - outside);
    return 0;
}

int store_vni_alloc (struct store *st,
                     const char *job_id,
                     unsigned count,
                     unsigned min,
                     unsigned max,
                     uint16_t out[],
                     struct fmb_error *error)
{
    if (count > STORE_VNIS_MAX || min < 1 || max > 65535 || min > max) {
        errno = EINVAL;
        return fmb_errorf (error, "bad VNI request (%u from %u-%u)", count, min, max);
    }
    uint16_t got[STORE_VNIS_MAX];
    int64_t left = 0;
    struct fmb_error unread;
    if (store_begin (st, error) < 0)
        return -1;
    /* Counts that cannot be read (a tally row gone) leave it to the
     * search; a job that takes no VNI does not ask. */
    unsigned held, quarantined;
    if (count > 0 && store_vni_counts (st, &held, &quarantined, &unread) == 0 &&
        store_vni_left (st, min, max, held, quarantined, &left, &unread) == 0 &&
        left < count) {
        store_rollback (st);
        errno = ENOSPC;
        return fmb_errorf (error, "no free VNI in %u-%u", min, max);
    }
    for (unsigned i = 0; i < count; i++)
        if (alloc_one (st, job_id, i, min, max, &got[i], error) < 0) {
            store_rollback (st);
            return -1;
        }
    if (store_commit (st, error) < 0)
        return -1;
    for (unsigned i = 0; i < count; i++)
        out[i] = got[i];
    return 0;
}

int store_vni_quarantine (struct store *st,
                          const char *job_id,
                          int64_t until_ms,
                          struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_QUARANTINE, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 2, until_ms);
    sqlite3_bind_int64 (s, 3, store_now (st));
    return store_step_done (st, s, error, "quarantine VNIs");
}

int store_vni_free_job (struct store *st, const char *job_id, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_FREE_JOB, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    return store_step_done (st, s, error, "free VNIs");
}

int store_vni_expire (struct store *st,
                      int64_t now_ms,
                      unsigned *ret_freed,
                      struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_EXPIRE, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, now_ms);
    if (store_step_done (st, s, error, "expire VNI quarantine") < 0)
        return -1;
    if (ret_freed)
        *ret_freed = (unsigned)sqlite3_changes (st->db);
    return 0;
}

int store_vni_list (struct store *st,
                    unsigned after,
                    unsigned limit,
                    store_vni_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_VNI_LIST, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, after);
    sqlite3_bind_int64 (s, 2, limit ? (int64_t)limit : -1);
    int rc;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        struct store_vni v = {
            .vni = (uint16_t)sqlite3_column_int (s, 0),
            .job_id = (const char *)sqlite3_column_text (s, 1),
            .quarantined = sqlite3_column_text (s, 2)[0] == 'q',
            .until_ms = sqlite3_column_int64 (s, 3),
            .since_ms = sqlite3_column_int64 (s, 4),
        };
        if (cb (&v, arg) < 0) {
            sqlite3_reset (s);
            return fmb_errorf (error, "listing stopped: %s", strerror (errno));
        }
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return store_fail (st, rc, error, "list VNIs");
    return 0;
}

int store_vni_counts (struct store *st,
                      unsigned *ret_held,
                      unsigned *ret_quarantined,
                      struct fmb_error *error)
{
    unsigned held, quarantined;
    if (store_tally (st, "vnis_held", &held, error) < 0 ||
        store_tally (st, "vnis_quarantined", &quarantined, error) < 0)
        return fmb_error_prefix (error, "count VNIs");
    *ret_held = held;
    *ret_quarantined = quarantined;
    return 0;
}

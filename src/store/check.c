/* check.c: what fmbrokerd --check-db reads (store_check_full: every
 * page, the kept counts, the schema's objects) and the query plans
 * (store_query_plan).  Read-only; above open.c, which opens the file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_private.h"

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

int store_check_full (const char *db_path,
                      store_problem_f cb,
                      void *arg,
                      struct fmb_error *error)
{
    struct store *st;
    int nproblems = 0, rc;
    if (store_open_readonly (db_path, &st, error) < 0)
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
        {"node_live_jobs", SQL_NODE_LIVE_JOBS},
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
        {"list_node", {.state = STORE_JOB_ACTIVE, .uid = -1, .node = "n1"}},
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

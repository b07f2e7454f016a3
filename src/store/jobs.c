/* jobs.c: the jobs table: a job's row, its state and hwcoll, listings,
 * counts; its nodes are inserted with it (steps and nodes: nodes.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store_private.h"

static const char SQL_JOB_INSERT[] =
    "INSERT INTO jobs (id, fm_job_id, uid, user, nodes, node_count, ncores,"
    " request, state, hwcoll, hwcoll_reason, mcast_limit, token, created_ms,"
    " updated_ms, tcs) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
    " ?13, ?14, ?14, ?15)";
static const char SQL_NODE_INSERT[] =
    "INSERT INTO job_nodes (job_id, node, cxi, updated_ms)"
    " VALUES (?1, ?2, 'pending', ?3)";
/* A job's columns in job_from_row's order, with what stands for its
 * node list and its request. */
#define SQL_JOB_COLUMNS(nodes, request)                                        \
    "SELECT id, fm_job_id, uid, user, " nodes ", node_count, ncores, " request \
    ", state, hwcoll, hwcoll_reason, mcast_limit, token, created_ms,"          \
    " updated_ms, released_ms, tcs, nodes IS NOT NULL"
static const char SQL_JOB_GET[] =
    SQL_JOB_COLUMNS ("nodes", "request") " FROM jobs WHERE id = ?1";
/* Brief: NULL for the node list and the request.  Both grow with the
 * job's nodes, and what asks once per node or per step of a job (node
 * reports, the node view, step cleanups, job-token checks) needs
 * neither.  At 65,536 nodes a whole read was 1.8 ms. */
#define SQL_JOB_BRIEF_SELECT SQL_JOB_COLUMNS ("NULL", "NULL")
static const char SQL_JOB_GET_BRIEF[] = SQL_JOB_BRIEF_SELECT " FROM jobs WHERE id = ?1";
/* Listings, each on the index of what it filters by, in id order from
 * ?4 ('' for the first page): one by state or by user reads that state's
 * or that user's jobs only.  One query for every filter (each an "?N IS
 * NULL OR ..." term) used no index but the ids': listing a state with no
 * job read every job stored, 0.33 s on the loop at 1,000,000 (what every
 * node's `fmbroker-cxi clean` asks, for lost and releasing jobs).  What
 * the index cannot filter (a user within a state, a state within a user,
 * 'since') is the last column, "matches", tested as the rows come, so
 * that the listing can stop after ?5 jobs read however few of them match
 * (store_job_filter's scan_max). */
/* A listing is brief too: a page of 1,000 jobs of 1,000 nodes each read
 * and built 12 MB with them, holding the loop 0.4-1.2 s. */
#define SQL_JOB_LIST_COLUMNS SQL_JOB_BRIEF_SELECT ", "
#define LIST_MATCHES_COLUMN  18
static const char SQL_JOB_LIST_BY_STATE[] = SQL_JOB_LIST_COLUMNS
    "(?2 < 0 OR uid = ?2) AND updated_ms >= ?3"
    " FROM jobs INDEXED BY jobs_by_state WHERE state = ?1 AND id > ?4"
    " ORDER BY id LIMIT ?5";
static const char SQL_JOB_LIST_BY_UID[] = SQL_JOB_LIST_COLUMNS
    "(?1 IS NULL OR state = ?1) AND updated_ms >= ?3"
    " FROM jobs INDEXED BY jobs_by_uid WHERE uid = ?2 AND id > ?4"
    " ORDER BY id LIMIT ?5";
/* A node's jobs (what a node's credential may list), through
 * job_nodes_by_node (schema 8): the node's own rows in job id order, each
 * job by its key, however many jobs other nodes have. */
static const char SQL_JOB_LIST_BY_NODE[] = SQL_JOB_LIST_COLUMNS
    "(?1 IS NULL OR state = ?1) AND (?2 < 0 OR uid = ?2) AND updated_ms >= ?3"
    " FROM (SELECT jobs.* FROM job_nodes INDEXED BY job_nodes_by_node"
    " JOIN jobs ON jobs.id = job_nodes.job_id WHERE job_nodes.node = ?6"
    " AND job_nodes.job_id > ?4 ORDER BY job_nodes.job_id LIMIT ?5) AS jobs";
static const char SQL_JOB_LIST_ALL[] = SQL_JOB_LIST_COLUMNS
    "updated_ms >= ?3 FROM jobs WHERE id > ?4 ORDER BY id LIMIT ?5";

/* A user's released jobs (what a user who is not rm or admin lists with
 * state=released) go by the user's index: the released state holds
 * nearly every job stored. */
const char *store_job_list_sql (const struct store_job_filter *f)
{
    bool by_state = f && f->state >= 0, by_uid = f && f->uid >= 0;
    if (f && f->node)
        return SQL_JOB_LIST_BY_NODE;
    if (by_state && !(by_uid && f->state == STORE_JOB_RELEASED))
        return SQL_JOB_LIST_BY_STATE;
    return by_uid ? SQL_JOB_LIST_BY_UID : SQL_JOB_LIST_ALL;
}

/* Both on jobs_by_state: they read the unreleased jobs only, however
 * many released ones the store keeps (test_store checks the plans).  The
 * first is a page of one state's jobs from where the last one ended: the
 * index on (state, id) gives them in order, so a page reads what it
 * returns. */
const char SQL_JOB_UNRELEASED[] =
    "SELECT id, fm_job_id, state, hwcoll, updated_ms FROM jobs"
    " WHERE state = ?1 AND id > ?2 ORDER BY id LIMIT ?3";
const char SQL_JOB_RESERVING[] =
    "SELECT id FROM jobs WHERE state IN ('active', 'releasing', 'lost')"
    " AND hwcoll = 'reserving'";
static const char SQL_JOB_VNIS[] =
    "SELECT vni FROM vnis WHERE job_id = ?1 ORDER BY pos";
static const char SQL_JOB_SET_STATE[] =
    "UPDATE jobs SET state = ?2, updated_ms = ?3,"
    " released_ms = CASE WHEN ?2 = 'released' THEN ?3 ELSE released_ms END"
    " WHERE id = ?1";
static const char SQL_JOB_SET_HWCOLL[] =
    "UPDATE jobs SET hwcoll = ?2, hwcoll_reason = ?3, mcast_limit = ?4,"
    " token = CASE WHEN ?5 IS NULL THEN token ELSE ?5 END, updated_ms = ?6"
    " WHERE id = ?1";
static const char SQL_JOB_DELETE[] = "DELETE FROM jobs WHERE id = ?1";
/* kept by triggers (schema 5): not a count over jobs_by_state */
const char SQL_JOB_COUNT[] = "SELECT n FROM job_counts WHERE state = ?1";

/* ---- jobs ---------------------------------------------------------- */

static int seal_token (struct store *st,
                       const char *id,
                       const char *token,
                       unsigned char **blob,
                       size_t *len,
                       struct fmb_error *error)
{
    *blob = NULL;
    *len = 0;
    if (!token)
        return 0;
    return tokencrypt_seal (st->tc, token, id, blob, len, error);
}

static int insert_nodes (struct store *st,
                         const struct store_job *job,
                         struct fmb_error *error)
{
    json_error_t jerr;
    json_t *nodes = json_loads (job->nodes, 0, &jerr);
    size_t i;
    json_t *v;
    if (!nodes || !json_is_array (nodes)) {
        json_decref (nodes);
        errno = EINVAL;
        return fmb_errorf (error, "nodes: not a JSON array");
    }
    json_array_foreach (nodes, i, v)
    {
        sqlite3_stmt *s = store_stmt (st, SQL_NODE_INSERT, error);
        if (!s || !json_is_string (v)) {
            if (s)
                fmb_errorf (error, "nodes: entries must be strings");
            json_decref (nodes);
            errno = EINVAL;
            return -1;
        }
        sqlite3_bind_text (s, 1, job->id, -1, SQLITE_STATIC);
        sqlite3_bind_text (s, 2, json_string_value (v), -1, SQLITE_STATIC);
        sqlite3_bind_int64 (s, 3, store_now (st));
        if (store_step_done (st, s, error, "insert node") < 0) {
            json_decref (nodes);
            return fmb_error_prefix (error, "node '%s'", json_string_value (v));
        }
    }
    json_decref (nodes);
    return 0;
}

int store_job_put (struct store *st, struct store_job *job, struct fmb_error *error)
{
    unsigned char *blob = NULL;
    size_t blob_len = 0;
    if (seal_token (st, job->id, job->token, &blob, &blob_len, error) < 0)
        return -1;
    if (store_begin (st, error) < 0)
        goto error;
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_INSERT, error);
    if (!s)
        goto rollback;
    sqlite3_bind_text (s, 1, job->id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, job->fm_job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 3, job->uid);
    store_bind_text (s, 4, job->user);
    store_bind_text (s, 5, job->nodes);
    sqlite3_bind_int64 (s, 6, job->node_count);
    sqlite3_bind_int64 (s, 7, job->ncores);
    sqlite3_bind_text (s, 8, job->request ? job->request : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 9, store_job_state_name (job->state), -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 10, store_hwcoll_state_name (job->hwcoll), -1, SQLITE_STATIC);
    store_bind_text (s, 11, job->hwcoll_reason);
    sqlite3_bind_int64 (s, 12, job->mcast_limit);
    if (blob)
        sqlite3_bind_blob (s, 13, blob, (int)blob_len, SQLITE_STATIC);
    int64_t now = store_now (st);
    sqlite3_bind_int64 (s, 14, now);
    sqlite3_bind_int64 (s, 15, job->tcs);
    if (store_step_done (st, s, error, "insert job") < 0) {
        if (errno == EEXIST)
            fmb_errorf (error, "job '%s' exists", job->id);
        goto rollback;
    }
    if (job->nodes && insert_nodes (st, job, error) < 0)
        goto rollback;
    if (store_commit (st, error) < 0)
        goto error;
    free (blob);
    job->created_ms = job->updated_ms = now;
    return 0;
rollback:
    store_rollback (st);
error : {
    int saved = errno;
    free (blob);
    errno = saved;
    return -1;
}
}

void store_job_free (struct store_job *job)
{
    if (job) {
        int saved = errno;
        free (job->user);
        free (job->nodes);
        free (job->request);
        free (job->hwcoll_reason);
        tokencrypt_free_plain (job->token);
        free (job);
        errno = saved;
    }
}

/* Fill 'job' from a row of SQL_JOB_COLUMNS (a job, whole or brief; the listings). */
static int job_from_row (struct store *st,
                         sqlite3_stmt *s,
                         struct store_job *job,
                         struct fmb_error *error)
{
    const char *id = (const char *)sqlite3_column_text (s, 0);
    snprintf (job->id, sizeof (job->id), "%s", id);
    snprintf (
        job->fm_job_id, sizeof (job->fm_job_id), "%s", sqlite3_column_text (s, 1));
    job->uid = (uint32_t)sqlite3_column_int64 (s, 2);
    if (store_column_strdup (s, 3, &job->user) < 0 ||
        store_column_strdup (s, 4, &job->nodes) < 0 ||
        store_column_strdup (s, 7, &job->request) < 0 ||
        store_column_strdup (s, 10, &job->hwcoll_reason) < 0)
        return fmb_errorf (error, "out of memory");
    job->node_count = (unsigned)sqlite3_column_int64 (s, 5);
    job->ncores = (unsigned)sqlite3_column_int64 (s, 6);
    job->state = store_job_state_parse ((const char *)sqlite3_column_text (s, 8));
    job->hwcoll = store_hwcoll_state_parse ((const char *)sqlite3_column_text (s, 9));
    job->mcast_limit = (unsigned)sqlite3_column_int64 (s, 11);
    if (sqlite3_column_type (s, 12) == SQLITE_BLOB) {
        const unsigned char *blob = sqlite3_column_blob (s, 12);
        size_t len = (size_t)sqlite3_column_bytes (s, 12);
        struct fmb_error e;
        /* A damaged token must not make the whole job unreadable: the job
         * could then be neither listed nor released (nor recovered). */
        if (tokencrypt_unseal (st->tc, blob, len, job->id, &job->token, &e) < 0) {
            job->token = NULL;
            job->token_damaged = true;
            if (st->damage)
                st->damage (st->damage_arg, job->id, e.text);
        }
    }
    job->created_ms = sqlite3_column_int64 (s, 13);
    job->updated_ms = sqlite3_column_int64 (s, 14);
    job->released_ms = sqlite3_column_int64 (s, 15);
    job->tcs = (unsigned)sqlite3_column_int64 (s, 16);
    job->node_list = sqlite3_column_int (s, 17) != 0;

    sqlite3_stmt *v = store_stmt (st, SQL_JOB_VNIS, error);
    if (!v)
        return -1;
    sqlite3_bind_text (v, 1, job->id, -1, SQLITE_STATIC);
    int rc;
    job->nvnis = 0;
    while ((rc = sqlite3_step (v)) == SQLITE_ROW && job->nvnis < STORE_VNIS_MAX)
        job->vnis[job->nvnis++] = (uint16_t)sqlite3_column_int (v, 0);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sqlite3_reset (v);
        return store_fail (st, rc, error, "job vnis");
    }
    sqlite3_reset (v);
    return 0;
}

static int get_job (struct store *st,
                    const char *sql,
                    const char *id,
                    struct store_job **ret,
                    struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset (s);
        errno = ENOENT;
        return fmb_errorf (error, "job '%s' not found", id);
    }
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "get job");
    }
    struct store_job *job = calloc (1, sizeof (*job));
    if (!job) {
        sqlite3_reset (s);
        errno = ENOMEM;
        return fmb_errorf (error, "out of memory");
    }
    if (job_from_row (st, s, job, error) < 0) {
        sqlite3_reset (s);
        store_job_free (job);
        return -1;
    }
    sqlite3_reset (s);
    *ret = job;
    return 0;
}

int store_job_get (struct store *st,
                   const char *id,
                   struct store_job **ret,
                   struct fmb_error *error)
{
    return get_job (st, SQL_JOB_GET, id, ret, error);
}

int store_job_get_brief (struct store *st,
                         const char *id,
                         struct store_job **ret,
                         struct fmb_error *error)
{
    return get_job (st, SQL_JOB_GET_BRIEF, id, ret, error);
}

int store_job_known (struct store *st,
                     const char *id,
                     const char *fm_job_id,
                     bool *known,
                     struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st,
                                  "SELECT 1 FROM jobs WHERE id = ? AND fm_job_id = ?"
                                  " AND hwcoll != 'not_eligible'",
                                  error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, fm_job_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    sqlite3_reset (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_fail (st, rc, error, "look up job");
    *known = rc == SQLITE_ROW;
    return 0;
}

static int update_one (struct store *st,
                       sqlite3_stmt *s,
                       const char *id,
                       struct fmb_error *error,
                       const char *what)
{
    if (store_step_done (st, s, error, what) < 0)
        return -1;
    if (sqlite3_changes (st->db) == 0) {
        errno = ENOENT;
        return fmb_errorf (error, "job '%s' not found", id);
    }
    return 0;
}

int store_job_set_state (struct store *st,
                         const char *id,
                         enum store_job_state state,
                         struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_SET_STATE, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, store_job_state_name (state), -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 3, store_now (st));
    return update_one (st, s, id, error, "set job state");
}

int store_job_set_hwcoll (struct store *st,
                          const char *id,
                          enum store_hwcoll_state hwcoll,
                          const char *reason,
                          unsigned mcast_limit,
                          const char *token,
                          struct fmb_error *error)
{
    unsigned char *blob;
    size_t len;
    if (seal_token (st, id, token, &blob, &len, error) < 0)
        return -1;
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_SET_HWCOLL, error);
    if (!s) {
        free (blob);
        return -1;
    }
    sqlite3_bind_text (s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, store_hwcoll_state_name (hwcoll), -1, SQLITE_STATIC);
    store_bind_text (s, 3, reason);
    sqlite3_bind_int64 (s, 4, mcast_limit);
    if (blob)
        sqlite3_bind_blob (s, 5, blob, (int)len, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 6, store_now (st));
    int rc = update_one (st, s, id, error, "set job hwcoll");
    int saved = errno;
    free (blob);
    errno = saved;
    return rc;
}

int store_job_delete (struct store *st, const char *id, struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_DELETE, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, id, -1, SQLITE_STATIC);
    if (store_step_done (st, s, error, "delete job") < 0) {
        if (errno == ENOENT) { /* the VNIs' foreign key */
            errno = EBUSY;
            fmb_errorf (error, "job '%s' still holds VNIs", id);
        }
        return -1;
    }
    if (sqlite3_changes (st->db) == 0) {
        errno = ENOENT;
        return fmb_errorf (error, "job '%s' not found", id);
    }
    return 0;
}

/* One listed job to 'cb'; -1 with 'error' filled when it stops the listing. */
static int list_one (struct store *st,
                     sqlite3_stmt *s,
                     store_job_f cb,
                     void *arg,
                     struct fmb_error *error)
{
    struct store_job job = {0};
    int r = job_from_row (st, s, &job, error);
    if (r == 0 && cb (&job, arg) < 0) {
        r = -1;
        fmb_errorf (error, "listing stopped: %s", strerror (errno));
    }
    int saved = errno;
    free (job.user);
    free (job.nodes);
    free (job.request);
    free (job.hwcoll_reason);
    tokencrypt_free_plain (job.token);
    errno = saved;
    return r;
}

int store_job_list (struct store *st,
                    const struct store_job_filter *f,
                    store_job_f cb,
                    void *arg,
                    struct fmb_error *error)
{
    static const struct store_job_filter none = {.state = -1, .uid = -1};
    if (!f)
        f = &none;
    sqlite3_stmt *s = store_stmt (st, store_job_list_sql (f), error);
    if (!s)
        return -1;
    if (f->state >= 0)
        sqlite3_bind_text (s, 1, store_job_state_name (f->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 2, f->uid);
    sqlite3_bind_int64 (s, 3, f->since_ms);
    store_bind_text (s, 4, f->after ? f->after : "");
    sqlite3_bind_int64 (s, 5, f->scan_max ? (int64_t)f->scan_max : -1);
    if (f->node)
        store_bind_text (s, 6, f->node);
    char last[STORE_JOB_ID_MAX + 1] = "";
    unsigned listed = 0, scanned = 0;
    bool stopped = false;
    int rc;
    while (!stopped && (rc = sqlite3_step (s)) == SQLITE_ROW) {
        scanned++;
        snprintf (last, sizeof (last), "%s", (const char *)sqlite3_column_text (s, 0));
        if (sqlite3_column_int (s, LIST_MATCHES_COLUMN)) {
            if (list_one (st, s, cb, arg, error) < 0) {
                sqlite3_reset (s);
                return -1;
            }
            listed++;
        }
        /* a full page, or as many jobs read as the caller allows */
        stopped = (f->limit && listed == f->limit) || scanned == f->scan_max;
    }
    if (!stopped && rc != SQLITE_DONE) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "list jobs");
    }
    sqlite3_reset (s);
    if (f->next_after)
        snprintf (f->next_after, STORE_JOB_ID_MAX + 1, "%s", stopped ? last : "");
    return 0;
}

/* Step 's' to its end, handing each row to 'row'; a row that returns -1
 * stops the listing with its errno. */
typedef int (*row_f) (sqlite3_stmt *s, void *arg);
static int each_row (struct store *st,
                     sqlite3_stmt *s,
                     row_f row,
                     void *arg,
                     struct fmb_error *error,
                     const char *what)
{
    int rc;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        if (row (s, arg) < 0) {
            int saved = errno;
            sqlite3_reset (s);
            errno = saved;
            return fmb_errorf (error, "listing stopped: %s", strerror (errno));
        }
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return store_fail (st, rc, error, what);
    return 0;
}

struct brief_cb {
    store_job_brief_f cb;
    void *arg;
    int n; /* rows given to cb */
};

static int brief_row (sqlite3_stmt *s, void *arg)
{
    struct brief_cb *c = arg;
    struct store_job_brief j = {
        .id = (const char *)sqlite3_column_text (s, 0),
        .fm_job_id = (const char *)sqlite3_column_text (s, 1),
        .state = store_job_state_parse ((const char *)sqlite3_column_text (s, 2)),
        .hwcoll = store_hwcoll_state_parse ((const char *)sqlite3_column_text (s, 3)),
        .updated_ms = sqlite3_column_int64 (s, 4),
    };
    c->n++;
    return c->cb (&j, c->arg);
}

int store_job_list_unreleased (struct store *st,
                               enum store_job_state state,
                               const char *after,
                               unsigned max,
                               store_job_brief_f cb,
                               void *arg,
                               struct fmb_error *error)
{
    if (!store_job_state_unreleased (state)) {
        errno = EINVAL;
        return fmb_errorf (error, "unreleased jobs are active or lost");
    }
    struct brief_cb c = {cb, arg, 0};
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_UNRELEASED, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, store_job_state_name (state), -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, after, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64 (s, 3, max);
    if (each_row (st, s, brief_row, &c, error, "list unreleased jobs") < 0)
        return -1;
    return c.n;
}

struct id_cb {
    store_id_f cb;
    void *arg;
};

static int id_row (sqlite3_stmt *s, void *arg)
{
    struct id_cb *c = arg;
    return c->cb ((const char *)sqlite3_column_text (s, 0), c->arg);
}

int store_job_list_reserving (struct store *st,
                              store_id_f cb,
                              void *arg,
                              struct fmb_error *error)
{
    struct id_cb c = {cb, arg};
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_RESERVING, error);
    if (!s)
        return -1;
    return each_row (st, s, id_row, &c, error, "list reserving jobs");
}

/* What a released job leaves in the store, as the broker writes it: the
 * job's row (its nodes twice: the list and the request; the list's names
 * repeat, only its length matters here), a row per node (its last
 * report), two step cleanups on jobs of 4 nodes or more, and its VNI's
 * release in the event log.  Sizes as on a busy system: 60% of jobs on 1
 * node, 25% on 4, 12% on 16, 2% on 64, 1% on 256 (7.4 nodes on average);
 * 500 users, interleaved, so that a batch of old jobs touches as many
 * pages of jobs_by_uid as it would.  Hardware collectives as with
 * [hwcoll] min_nodes = 2: every job of 2 nodes or more had a reservation
 * (released), the rest are not_eligible. */
static const char SQL_FILL_JOBS[] =
    "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1),"
    " j AS (SELECT i, ?2 + (?3 - ?2) * i / max(?1, 1) AS t,"
    "  1000 + (i * 7919) % 500 AS uid,"
    "  CASE WHEN i % 100 < 60 THEN 1 WHEN i % 100 < 85 THEN 4 WHEN i % 100 < 97 THEN 16"
    "  WHEN i % 100 < 99 THEN 64 ELSE 256 END AS nn FROM n),"
    " l AS (SELECT i, t, uid, nn, '[' || rtrim(replace(printf('%.*c', nn, 'x'), 'x',"
    "  printf('\"nid%06d\",', i % 9000)), ',') || ']' AS nodes FROM j)"
    " INSERT INTO jobs (id, fm_job_id, uid, user, nodes, node_count, ncores, request,"
    " state, hwcoll, hwcoll_reason, mcast_limit, created_ms, updated_ms, released_ms)"
    " SELECT printf('r%09d', i), printf('c1-r%09d', i), uid, 'user' || uid, nodes, nn,"
    " nn * 128, printf('{\"hwcoll\":\"auto\",\"ncores\":%d,\"node_count\":%d,"
    "\"nodes\":%s,\"uid\":%d,\"user\":\"user%d\",\"vni_count\":1}',"
    " nn * 128, nn, nodes, uid, uid),"
    " 'released', CASE WHEN nn > 1 THEN 'released' ELSE 'not_eligible' END,"
    " CASE WHEN nn > 1 THEN NULL ELSE 'job has 1 node, [hwcoll] min_nodes is 2' END,"
    " CASE WHEN nn > 1 THEN 4 ELSE 0 END, t - 3600000, t, t FROM l";
static const char SQL_FILL_NODES[] =
    "WITH RECURSIVE k(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM k WHERE k + 1 < ?1)"
    " INSERT INTO job_nodes (job_id, node, cxi, updated_ms)"
    " SELECT id, printf('nid%06d', (CAST(substr(id, 2) AS INTEGER) + k) % 9000),"
    " 'destroyed', released_ms FROM jobs, k"
    " WHERE jobs.node_count = ?1 AND jobs.state = 'released' AND jobs.id >= 'r'"
    " AND jobs.id < 's'";
static const char SQL_FILL_STEPS[] =
    "INSERT INTO job_steps (job_id, step_id, state, updated_ms)"
    " SELECT id, s.column1, 'cleaned', released_ms FROM jobs,"
    " (VALUES ('0'), ('1')) AS s"
    " WHERE node_count >= 4 AND state = 'released' AND id >= 'r' AND id < 's'";
static const char SQL_FILL_EVENTS[] =
    "INSERT INTO events (at_ms, type, job_id, detail)"
    " SELECT released_ms, 'vni_released', id,"
    " printf('{\"vnis\":[%d],\"why\":\"all nodes reported\"}', 1024 + rowid % 60000)"
    " FROM jobs WHERE state = 'released' AND id >= 'r' AND id < 's'"
    " ORDER BY released_ms";

static int fill_step (struct store *st,
                      const char *sql,
                      int64_t a,
                      int64_t b,
                      int64_t c,
                      struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    if (sqlite3_bind_parameter_count (s) >= 1)
        sqlite3_bind_int64 (s, 1, a);
    if (sqlite3_bind_parameter_count (s) >= 3) {
        sqlite3_bind_int64 (s, 2, b);
        sqlite3_bind_int64 (s, 3, c);
    }
    return store_step_done (st, s, error, "fill");
}

int store_fill_released (struct store *st,
                         int64_t count,
                         int64_t from_ms,
                         int64_t to_ms,
                         struct fmb_error *error)
{
    static const int64_t sizes[] = {1, 4, 16, 64, 256};
    if (count <= 0)
        return 0;
    if (fill_step (st, SQL_FILL_JOBS, count, from_ms, to_ms, error) < 0)
        return -1;
    for (size_t i = 0; i < sizeof (sizes) / sizeof (sizes[0]); i++)
        if (fill_step (st, SQL_FILL_NODES, sizes[i], 0, 0, error) < 0)
            return -1;
    return fill_step (st, SQL_FILL_STEPS, 0, 0, 0, error) < 0 ||
                   fill_step (st, SQL_FILL_EVENTS, 0, 0, 0, error) < 0
               ? -1
               : 0;
}

int store_job_count (struct store *st,
                     enum store_job_state state,
                     unsigned *ret,
                     struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_JOB_COUNT, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, store_job_state_name (state), -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "count jobs");
    }
    *ret = rc == SQLITE_ROW ? (unsigned)sqlite3_column_int64 (s, 0) : 0;
    sqlite3_reset (s);
    return 0;
}

int store_hwcoll_usage (struct store *st,
                        unsigned *ret_jobs,
                        unsigned *ret_addrs,
                        struct fmb_error *error)
{
    unsigned jobs, addrs;
    if (store_tally (st, "mcast_jobs", &jobs, error) < 0 ||
        store_tally (st, "mcast_addresses", &addrs, error) < 0)
        return fmb_error_prefix (error, "hwcoll usage");
    *ret_jobs = jobs;
    *ret_addrs = addrs;
    return 0;
}

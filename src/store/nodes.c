/* nodes.c: each job's steps and nodes (job_steps, job_nodes): a step's
 * cleanup state, a node's CXI services, the nodes still to report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_private.h"

static const char SQL_STEP_PUT[] =
    "INSERT INTO job_steps (job_id, step_id, state, detail, updated_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (job_id, step_id) DO UPDATE SET"
    " state = excluded.state, detail = excluded.detail,"
    " updated_ms = excluded.updated_ms";
static const char SQL_STEP_GET[] =
    "SELECT state FROM job_steps WHERE job_id = ?1 AND step_id = ?2";
static const char SQL_NODE_PUT[] =
    "INSERT INTO job_nodes (job_id, node, cxi, detail, updated_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (job_id, node) DO UPDATE SET"
    " cxi = excluded.cxi, detail = excluded.detail,"
    " updated_ms = excluded.updated_ms";
static const char SQL_NODE_LIST[] =
    "SELECT node, cxi, detail, updated_ms FROM job_nodes WHERE job_id = ?1"
    " ORDER BY node";
/* the nodes still to report destroyed, through job_nodes_waiting: as many
 * rows read as it returns (a dead node among 10,000), not every node */
const char SQL_NODE_LIST_WAITING[] =
    "SELECT node, cxi, detail, updated_ms FROM job_nodes INDEXED BY job_nodes_waiting"
    " WHERE job_id = ?1 AND cxi != 'destroyed' ORDER BY node";
/* one node's: a key lookup, however many nodes the job has */
static const char SQL_NODE_ONE[] =
    "SELECT node, cxi, detail, updated_ms FROM job_nodes"
    " WHERE job_id = ?1 AND node = ?2";
/* Has the job nodes, and is one of them still to report destroyed?  Two
 * key lookups (the second through job_nodes_waiting, schema 7), however
 * many nodes the job has.  Both queries name the index: left to itself
 * the planner takes the primary key's (job_id) and reads every node of
 * the job (test_store checks the plans). */
const char SQL_NODE_WAITING[] =
    "SELECT EXISTS (SELECT 1 FROM job_nodes WHERE job_id = ?1),"
    " EXISTS (SELECT 1 FROM job_nodes INDEXED BY job_nodes_waiting"
    " WHERE job_id = ?1 AND cxi != 'destroyed')";

/* The jobs 'node' is in that still hold something: not released, or
 * whose VNIs are still held or quarantined (a job a node made and
 * nobody ends keeps its VNIs out of the pool until quarantine_s after
 * its end).  Through job_nodes_by_node (schema 8): it reads the node's
 * own rows, the live ones and those retention keeps, never the other
 * nodes'; at most ?2 are counted. */
const char SQL_NODE_LIVE_JOBS[] =
    "SELECT count(*) FROM (SELECT 1 FROM job_nodes INDEXED BY job_nodes_by_node"
    " JOIN jobs ON jobs.id = job_nodes.job_id WHERE job_nodes.node = ?1"
    " AND (jobs.state != 'released'"
    "  OR EXISTS (SELECT 1 FROM vnis INDEXED BY vnis_by_job WHERE vnis.job_id = "
    "jobs.id))"
    " LIMIT ?2)";

/* ---- steps and nodes ----------------------------------------------- */

/* Shared by the step and node upserts: same shape, other table. */
static int put_child (struct store *st,
                      const char *sql,
                      const char *job_id,
                      const char *key,
                      const char *state,
                      const char *detail,
                      struct fmb_error *error,
                      const char *what)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 3, state, -1, SQLITE_STATIC);
    store_bind_text (s, 4, detail);
    sqlite3_bind_int64 (s, 5, store_now (st));
    if (store_step_done (st, s, error, what) < 0) {
        if (errno == ENOENT)
            fmb_errorf (error, "job '%s' not found", job_id);
        return -1;
    }
    return 0;
}

int store_step_put (struct store *st,
                    const char *job_id,
                    const char *step_id,
                    enum store_step_state state,
                    const char *detail,
                    struct fmb_error *error)
{
    return put_child (st,
                      SQL_STEP_PUT,
                      job_id,
                      step_id,
                      store_step_state_name (state),
                      detail,
                      error,
                      "put step");
}

int store_step_get (struct store *st,
                    const char *job_id,
                    const char *step_id,
                    enum store_step_state *ret,
                    struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_STEP_GET, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text (s, 2, step_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc == SQLITE_ROW)
        *ret = store_step_state_parse ((const char *)sqlite3_column_text (s, 0));
    sqlite3_reset (s);
    if (rc == SQLITE_DONE) {
        errno = ENOENT;
        return fmb_errorf (error, "job '%s' has no step record", job_id);
    }
    if (rc != SQLITE_ROW)
        return store_fail (st, rc, error, "get step");
    return 0;
}

int store_node_put (struct store *st,
                    const char *job_id,
                    const char *node,
                    enum store_cxi_state cxi,
                    const char *detail,
                    struct fmb_error *error)
{
    return put_child (st,
                      SQL_NODE_PUT,
                      job_id,
                      node,
                      store_cxi_state_name (cxi),
                      detail,
                      error,
                      "put node");
}

static int list_nodes (struct store *st,
                       const char *sql,
                       const char *job_id,
                       const char *node,
                       store_node_f cb,
                       void *arg,
                       struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    if (node)
        sqlite3_bind_text (s, 2, node, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step (s)) == SQLITE_ROW) {
        struct store_node n = {
            .job_id = job_id,
            .node = (const char *)sqlite3_column_text (s, 0),
            .cxi = store_cxi_state_parse ((const char *)sqlite3_column_text (s, 1)),
            .detail = (const char *)sqlite3_column_text (s, 2),
            .updated_ms = sqlite3_column_int64 (s, 3),
        };
        if (cb (&n, arg) < 0) {
            sqlite3_reset (s);
            return fmb_errorf (error, "listing stopped: %s", strerror (errno));
        }
    }
    sqlite3_reset (s);
    if (rc != SQLITE_DONE)
        return store_fail (st, rc, error, "list nodes");
    return 0;
}

int store_node_list (struct store *st,
                     const char *job_id,
                     const char *node,
                     store_node_f cb,
                     void *arg,
                     struct fmb_error *error)
{
    return list_nodes (
        st, node ? SQL_NODE_ONE : SQL_NODE_LIST, job_id, node, cb, arg, error);
}

int store_node_list_waiting (struct store *st,
                             const char *job_id,
                             store_node_f cb,
                             void *arg,
                             struct fmb_error *error)
{
    return list_nodes (st, SQL_NODE_LIST_WAITING, job_id, NULL, cb, arg, error);
}

int store_node_waiting (struct store *st,
                        const char *job_id,
                        bool *ret_nodes,
                        bool *ret_waiting,
                        struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_NODE_WAITING, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, job_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "nodes still to report");
    }
    *ret_nodes = sqlite3_column_int (s, 0) != 0;
    *ret_waiting = sqlite3_column_int (s, 1) != 0;
    sqlite3_reset (s);
    return 0;
}

int store_node_live_jobs (struct store *st,
                          const char *node,
                          unsigned max,
                          unsigned *ret,
                          struct fmb_error *error)
{
    sqlite3_stmt *s = store_stmt (st, SQL_NODE_LIVE_JOBS, error);
    if (!s)
        return -1;
    sqlite3_bind_text (s, 1, node, -1, SQLITE_STATIC);
    sqlite3_bind_int64 (s, 2, max);
    int rc = sqlite3_step (s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset (s);
        return store_fail (st, rc, error, "count the node's jobs");
    }
    *ret = (unsigned)sqlite3_column_int64 (s, 0);
    sqlite3_reset (s);
    return 0;
}

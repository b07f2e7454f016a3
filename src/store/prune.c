/* prune.c: retention.  Released jobs and old events are history: the
 * broker deletes them in small batches so that a store running for
 * months stays small and a batch never holds the loop for long. */
#include <errno.h>

#include "store_private.h"

/* The partial index jobs_released finds them, oldest first, reading
 * only the rows it deletes.  Left to itself the planner took jobs_by_state
 * and sorted every released job for each batch (0.7 s at a million), so
 * the index is named.  A job still holding quarantined VNIs waits (the
 * vnis foreign key would refuse it anyway). */
const char SQL_PRUNE_JOBS[] =
    "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_released"
    " WHERE state = 'released' AND released_ms < ?1"
    " AND NOT EXISTS (SELECT 1 FROM vnis WHERE vnis.job_id = jobs.id)"
    " ORDER BY released_ms LIMIT ?2)";
/* Sequence numbers grow with time, so the old events are the first ones:
 * of the first ?2 events, those that are old.  It reads at most ?2 rows
 * (looking for the first young event read every old one). */
const char SQL_PRUNE_EVENTS[] =
    "DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT ?2)"
    " AND at_ms < ?1";

static int prune_one (struct store *st,
                      const char *sql,
                      int64_t before_ms,
                      unsigned max,
                      unsigned *ret,
                      struct fmb_error *error,
                      const char *what)
{
    sqlite3_stmt *s = store_stmt (st, sql, error);
    if (!s)
        return -1;
    sqlite3_bind_int64 (s, 1, before_ms);
    sqlite3_bind_int64 (s, 2, max);
    if (store_step_done (st, s, error, what) < 0)
        return -1;
    *ret = (unsigned)sqlite3_changes (st->db);
    return 0;
}

int store_prune (struct store *st,
                 int64_t jobs_before_ms,
                 int64_t events_before_ms,
                 unsigned max,
                 unsigned *ret_jobs,
                 unsigned *ret_events,
                 struct fmb_error *error)
{
    *ret_jobs = *ret_events = 0;
    if (store_begin (st, error) < 0)
        return -1;
    if (prune_one (
            st, SQL_PRUNE_JOBS, jobs_before_ms, max, ret_jobs, error, "prune jobs") <
            0 ||
        prune_one (st,
                   SQL_PRUNE_EVENTS,
                   events_before_ms,
                   max,
                   ret_events,
                   error,
                   "prune events") < 0) {
        store_rollback (st);
        return -1;
    }
    return store_commit (st, error);
}

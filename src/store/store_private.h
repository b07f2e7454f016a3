/* store_private.h: what the store's own files share; not for callers. */
#ifndef FMB_STORE_PRIVATE_H
#define FMB_STORE_PRIVATE_H

#include <stdbool.h>
#include <sqlite3.h>

#include "store.h"
#include "tokencrypt.h"

#define STORE_STMT_CACHE 96

struct store {
    sqlite3 *db;
    struct tokencrypt *tc;
    store_clock_f now;
    store_damage_f damage;
    void *damage_arg;
    void *now_arg;
    int tx_depth;
    /* store_begin_on_use: the outermost transaction is open but BEGIN has
     * not run yet (it runs before the first statement in it) */
    bool begin_pending;
    /* that BEGIN failed: nothing runs in the transaction, and its commit
     * fails with 'begin_error' */
    bool begin_failed;
    char begin_error[FMB_ERROR_TEXT_MAX];
    int file_version;
    struct store_repair repaired;    /* what store_open put right */
    struct store_checkpointer *ckpt; /* NULL: SQLite's auto-checkpoint */
    struct {
        const char *sql; /* identity: the static string's address */
        sqlite3_stmt *stmt;
    } cache[STORE_STMT_CACHE];
};

/* ---- db.c: the helpers every other file calls (it calls none) ------- */

/* SQLite result code -> errno, in one place. */
int store_errno (int sqlite_rc);

/* Set errno from 'rc' and fill 'error' with "what: sqlite's message". */
int store_fail (struct store *st, int rc, struct fmb_error *error, const char *what);

/* A prepared, reset statement for 'sql' (a static string), prepared once. */
sqlite3_stmt *store_stmt (struct store *st, const char *sql, struct fmb_error *error);

/* Run a statement that returns no rows; resets it. */
int store_step_done (struct store *st,
                     sqlite3_stmt *s,
                     struct fmb_error *error,
                     const char *what);

int64_t store_now (struct store *st);

/* Run 'sql' (no rows, not cached: schema changes, pragmas). */
int store_exec (struct store *st,
                const char *sql,
                struct fmb_error *error,
                const char *what);
/* The first column of the one row 'sql' returns (not cached). */
int store_query_int (struct store *st,
                     const char *sql,
                     int64_t *ret,
                     struct fmb_error *error);

/* The count a trigger keeps under 'name' in the tallies table (schema 6),
 * read in one row whatever the size of what it counts. */
int store_tally (struct store *st,
                 const char *name,
                 unsigned *ret,
                 struct fmb_error *error);

/* Bind text, or NULL when 'text' is NULL. */
int store_bind_text (sqlite3_stmt *s, int idx, const char *text);

/* Copy of a column as a malloc'd string, or NULL for SQL NULL. */
int store_column_strdup (sqlite3_stmt *s, int col, char **ret);

/* ---- names.c --------------------------------------------------------- */

/* A state's name -> value; -1 if unknown (store_job_state_parse's
 * twins, for the rows the store reads). */
int store_hwcoll_state_parse (const char *name);
int store_cxi_state_parse (const char *name);
int store_step_state_parse (const char *name);

/* ---- open.c: above the tables, migrate, derived and checkpoint ------ */

/* The existing file at 'db_path', opened read-only (nothing created or
 * written, whoever else has it open) and checked as start-up checks it;
 * store_close() it. */
int store_open_readonly (const char *db_path,
                         struct store **ret,
                         struct fmb_error *error);

/* ---- checkpoint.c ---------------------------------------------------- */

/* The WAL checkpointer (checkpoint.c): a thread with its own connection
 * to 'db_path'.  -1 (errno) if it cannot start: SQLite's auto-checkpoint
 * stays on then. */
int store_checkpointer_start (struct store *st, const char *db_path);
void store_checkpointer_stop (struct store *st);

/* ---- schema.c: the migrations, and the counts of what they keep ----- */

/* The SQL of the migration from schema version 'from' to from + 1. */
const char *store_migration (int from);
/* The kept counts against a count of their tables: a row for each that
 * differs (store_check_full); and setting them from their tables
 * (store_recount, the repair at open). */
extern const char SQL_CHECK_JOB_COUNTS[];
extern const char SQL_CHECK_TALLIES[];
extern const char SQL_RECOUNT[];

/* ---- derived.c ------------------------------------------------------- */

/* The schema's tables, indexes and triggers against what the migrations
 * make at the file's version (derived.c).  store_derived_check: each one
 * missing or different through 'cb' (a table only when missing); how
 * many, *ret_tables how many of them tables, -1 if it cannot tell, the
 * first in 'error' either way.  store_derived_rebuild, inside the
 * caller's transaction: make each missing or different index and
 * trigger again; how many, naming them in 'made', *ret_triggers how many
 * triggers; -1 (EPROTO) if a table is missing. */
int store_derived_check (struct store *st,
                         store_problem_f cb,
                         void *arg,
                         int *ret_tables,
                         struct fmb_error *error);
int store_derived_rebuild (struct store *st,
                           char *made,
                           size_t size,
                           unsigned *ret_triggers,
                           struct fmb_error *error);

/* ---- the tables' statements whose plans store_query_plan shows ------ */

/* The statements whose plans store_query_plan() shows. */
extern const char SQL_TALLY[]; /* db.c */
extern const char SQL_JOB_UNRELEASED[];
/* The statement store_job_list runs for filter 'f' (NULL: none). */
const char *store_job_list_sql (const struct store_job_filter *f);
extern const char SQL_JOB_RESERVING[];
extern const char SQL_PRUNE_JOBS[];
extern const char SQL_PRUNE_EVENTS[];
extern const char SQL_JOB_COUNT[];
extern const char SQL_VNI_FIRST_FREE[];
extern const char SQL_VNI_EXPIRE[];
extern const char SQL_VNI_OUTSIDE[];
extern const char SQL_NODE_WAITING[];
extern const char SQL_NODE_LIST_WAITING[];
extern const char SQL_NODE_LIVE_JOBS[];

#endif

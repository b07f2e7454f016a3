/* store.h: the broker's durable state in SQLite.
 *
 * One struct store owns one connection (WAL, synchronous=FULL, foreign
 * keys on, busy timeout).  All SQL of fmbroker lives in this directory.
 * Callers group writes with store_begin()/store_commit() so that an
 * "intent" and what goes with it (VNIs, outbox entry, event) are committed
 * together or not at all; transactions nest (inner ones are savepoints).
 *
 * Errors: -1 with errno and a message in 'error'.  ENOENT: no such row;
 * EEXIST: the row exists; ENOSPC: no free VNI (or disk full); EAGAIN: the
 * database is busy; EBADMSG: a token failed to decrypt; EPROTO: the file
 * is not ours, is damaged or is from a newer fmbroker.
 *
 * Session tokens are kept encrypted (AES-256-GCM, see tokencrypt.h); the
 * struct store_job handed out holds the plaintext and store_job_free()
 * wipes it.
 */
#ifndef FMB_STORE_H
#define FMB_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define STORE_JOB_ID_MAX     128 /* job ids end up in FM URLs */
#define STORE_FM_JOB_ID_MAX  256
#define STORE_VNIS_MAX       4 /* a CXI service holds at most 4 VNIs */
#define STORE_KIND_MAX       32
#define STORE_TARGET_MAX     512
#define STORE_EVENT_TYPE_MAX 64

struct store;

/* active -> releasing (CLEANUP) -> released (FM release done).
 * active -> lost (the FM lost the reservation); lost -> releasing.
 *
 * The one list of job states, in order (X (NAME, "name", unreleased)):
 * whatever loops over them uses it (STORE_JOB_STATE_COUNT,
 * store_job_state_name), and the lists outside C (api/openapi.yaml, the
 * shell completion, the CLI's help) are checked against it by
 * unit.job_states.  'unreleased': a job in that state may hold its FM
 * reservation (store_job_list_unreleased lists them, reconciliation
 * scans them).  A new state also needs a migration: the jobs table's
 * CHECK and a job_counts row (schema.c). */
#define STORE_JOB_STATES(X)           \
    X (ACTIVE, "active", true)        \
    X (RELEASING, "releasing", false) \
    X (RELEASED, "released", false)   \
    X (LOST, "lost", true)

enum store_job_state {
#define STORE_JOB_STATE_ENUM(name, text, unreleased) STORE_JOB_##name,
    STORE_JOB_STATES (STORE_JOB_STATE_ENUM)
#undef STORE_JOB_STATE_ENUM
        STORE_JOB_STATE_COUNT
};

/* reserving: intent written, FM answer not yet recorded (a crash here is
 * resolved by asking the FM).  reserved, not_eligible, unavailable (FM down
 * or slow: the job runs with software collectives), lost, released. */
enum store_hwcoll_state {
    STORE_HWCOLL_RESERVING,
    STORE_HWCOLL_RESERVED,
    STORE_HWCOLL_NOT_ELIGIBLE,
    STORE_HWCOLL_UNAVAILABLE,
    STORE_HWCOLL_LOST,
    STORE_HWCOLL_RELEASED,
};

/* What a node agent reported about the job's CXI services on one node. */
enum store_cxi_state {
    STORE_CXI_PENDING, /* nothing reported yet */
    STORE_CXI_CREATED,
    STORE_CXI_DESTROYED,
    STORE_CXI_FAILED,
};

enum store_step_state {
    STORE_STEP_CLEANING,
    STORE_STEP_CLEANED,
    STORE_STEP_FAILED,
};

struct store_job {
    char id[STORE_JOB_ID_MAX + 1];
    char fm_job_id[STORE_FM_JOB_ID_MAX + 1];
    uint32_t uid;
    char *user;  /* owned; may be NULL */
    char *nodes; /* owned; JSON array of node names, or NULL (count only) */
    unsigned node_count;
    bool node_list; /* RUN named the nodes (brief reads say so too) */
    unsigned ncores;
    char *request; /* owned; canonical JSON of the RUN request */
    enum store_job_state state;
    enum store_hwcoll_state hwcoll;
    char *hwcoll_reason; /* owned; may be NULL */
    unsigned mcast_limit;
    unsigned tcs; /* the job's traffic classes (FMB_TC_* mask); 0: [cxi] tcs */
    char *token;  /* owned plaintext session token, or NULL; wiped on free */
    /* A token is stored but does not decrypt (a damaged row, another
     * key): 'token' is NULL and the job is otherwise whole, so it can
     * still be listed and released.  The damage hook heard of it. */
    bool token_damaged;
    uint16_t vnis[STORE_VNIS_MAX];
    unsigned nvnis;
    int64_t created_ms;
    int64_t updated_ms;
    int64_t released_ms; /* 0 until released */
};

/* Jobs in id order, filtered.  The listing reads the index of its state
 * or its user (or every job), from 'after' on; a filter that index does
 * not hold (since_ms; a user within a state, a state within a user) is
 * tested on each job read,
 * so a page of few matches may read many jobs: 'scan_max' bounds them. */
struct store_job_filter {
    int state;         /* enum store_job_state, or -1 for any */
    int64_t uid;       /* or -1 for any */
    int64_t since_ms;  /* updated at or after; 0 for any */
    const char *node;  /* only jobs whose node list has this node; NULL: any */
    const char *after; /* paging: ids greater than this; NULL from the start */
    unsigned limit;    /* jobs listed at most; 0: no limit */
    unsigned scan_max; /* jobs read at most, listed or not; 0: no bound */
    /* Out (STORE_JOB_ID_MAX + 1 bytes; may be NULL): where the next page
     * starts ('after') when the listing stopped at 'limit' or 'scan_max'
     * (the next page may then be empty), "" when it read to the end;
     * untouched when store_job_list fails. */
    char *next_after;
};

struct store_node {
    const char *job_id;
    const char *node;
    enum store_cxi_state cxi;
    const char *detail; /* may be NULL */
    int64_t updated_ms;
};

struct store_vni {
    uint16_t vni;
    const char *job_id;
    bool quarantined;
    int64_t until_ms; /* quarantined: when it frees itself; 0: when nodes report */
    int64_t since_ms;
};

struct store_outbox_entry {
    int64_t id;
    const char *kind;   /* e.g. "fm_delete_job" */
    const char *target; /* e.g. an FM job id */
    const char *arg;    /* kind-specific, "" if none */
    unsigned attempts;
    int64_t next_ms;
    int64_t created_ms;
    const char *last_error; /* may be NULL */
};

struct store_event {
    int64_t seq;
    int64_t at_ms;
    const char *type;
    const char *job_id; /* may be NULL */
    const char *detail; /* JSON object text */
};

/* Callbacks for listings; the struct and its strings are borrowed for the
 * duration of the call.  Return 0 to go on, -1 to stop (the listing then
 * fails with the callback's errno). */
typedef int (*store_job_f) (const struct store_job *job, void *arg);
/* What reconciliation compares with the FM's list, without the token,
 * the VNIs or the text columns a full read decrypts and copies. */
struct store_job_brief {
    const char *id;
    const char *fm_job_id;
    enum store_job_state state;
    enum store_hwcoll_state hwcoll;
    int64_t updated_ms;
};
typedef int (*store_job_brief_f) (const struct store_job_brief *job, void *arg);
typedef int (*store_node_f) (const struct store_node *node, void *arg);
typedef int (*store_vni_f) (const struct store_vni *vni, void *arg);
typedef int (*store_outbox_f) (const struct store_outbox_entry *e, void *arg);
typedef int (*store_event_f) (const struct store_event *ev, void *arg);
typedef int64_t (*store_clock_f) (void *arg);

/* ---- lifetime ------------------------------------------------------ */

/* Open (creating if needed) the database at 'db_path' and the token key at
 * 'key_path' (created 0600 on first start).  Refuses, without changing the
 * file, one that is not SQLite, not ours, newer than this code, or damaged
 * as far as a check bounded in time sees: truncation, the schema, and the
 * small tables (meta, vnis, the kept counts) in full, or missing a table.
 * It does not read the jobs, steps, nodes, outbox or events: damage there
 * fails (EPROTO) the call that reads it, and store_check_full() finds it.
 * An index or trigger missing or different from fmbroker's is made again
 * (store_open_repair says which). */
int store_open (const char *db_path,
                const char *key_path,
                struct store **ret,
                struct fmb_error *error);
/* Called (at most once per read of a row) when a job's stored token does
 * not decrypt; 'why' says how, never with the token.  The store goes on
 * as if the job had no token. */
typedef void (*store_damage_f) (void *arg, const char *job_id, const char *why);
void store_set_damage_hook (struct store *st, store_damage_f fn, void *arg);

/* The WAL is checkpointed on a thread of the store's own (a commit never
 * copies the WAL into the database file on the caller's thread), after
 * every 1,000 pages committed, and at least once a second after commits;
 * past 16,384 pages (64 MiB) the committing thread checkpoints itself.
 * What it did so far: */
struct store_wal_stats {
    int wal_pages;                    /* WAL frames after the last commit */
    int backfilled;                   /* of those, copied (by the last checkpoint) */
    unsigned long checkpoints;        /* by the store's thread */
    unsigned long failures;           /* of those, failed (SQLite error) */
    unsigned long writer_checkpoints; /* by the committing thread (over the cap) */
    unsigned long writer_finishes;    /* the last frames, by store_finish_checkpoint */
    int writer_finish_pages_max;      /* the most frames one of those copied */
    unsigned long restarts;           /* commits that started the WAL over */
};
/* The committing thread, when nothing waits on it: once the WAL holds
 * 3,000 pages and the store's thread could not copy its last few frames
 * (at most 64) because commits kept coming, copy them here (two fsyncs),
 * so that the next commit starts the WAL over instead of growing the
 * file.  True if it copied frames; false otherwise (the usual case:
 * a flag read, nothing done). */
bool store_finish_checkpoint (struct store *st);
/* -1 ENOENT when the thread could not start (auto-checkpoint is used). */
int store_wal_stats (struct store *st, struct store_wal_stats *ret);
/* Test support: the WAL sizes (pages) that wake the checkpointer and
 * that make the committing thread checkpoint. */
void store_set_wal_limits (struct store *st, int checkpoint_pages, int max_pages);

/* Rows changed so far (never decreases): a commit that moved it wrote. */
int64_t store_changes (struct store *st);
void store_close (struct store *st);

/* Every page and index of the database at 'db_path', read-only (safe
 * beside a running broker), then the counts kept for metrics and status
 * (jobs by state, the tallies) against the rows they count, and the
 * schema's tables, indexes and triggers against fmbroker's: 0 if SQLite's
 * integrity_check finds nothing, every count matches and no object is
 * missing or different; otherwise -1, 'error' naming the first problem
 * and 'cb' called with each: errno EPROTO for damaged pages (at most 100
 * reported; nothing else is compared then) or a missing table, EUCLEAN
 * when only what is derived from the rows is wrong -- counts that differ
 * or are missing, indexes or triggers missing or different:
 * store_recount() puts those right.  Other failures: -1 with their
 * errno. */
typedef void (*store_problem_f) (const char *problem, void *arg);
int store_check_full (const char *db_path,
                      store_problem_f cb,
                      void *arg,
                      struct fmb_error *error);
/* What was put right: indexes and triggers made again (missing from the
 * file, or different from fmbroker's), kept counts set from the rows. */
struct store_repair {
    unsigned objects;
    char made[200]; /* "index job_nodes_waiting (missing), ..." */
    unsigned counts;
};
/* Make again every index and trigger that is missing or different, and
 * set every count kept for metrics and status (jobs by state, VNIs,
 * multicast reservations, outbox depth) to what the tables hold, in one
 * transaction.  Safe beside a running broker, whose commits wait while
 * the tables are counted (0.08 s at a million stored jobs, 1,000 active)
 * or an index is made (0.8 s for the nodes' at a million).  The file
 * must exist at this code's schema version (EPROTO otherwise, nothing
 * written), with every table (EPROTO). */
int store_recount (const char *db_path,
                   struct store_repair *ret,
                   struct fmb_error *error);
/* What store_open put right the same way: the indexes and triggers it
 * found missing or different, and then (a count may have drifted while
 * its trigger was gone) the counts.  objects == 0: nothing was wrong. */
const struct store_repair *store_open_repair (const struct store *st);

/* Timestamps come from this clock (default: wall clock ms). For tests. */
void store_set_clock (struct store *st, store_clock_f now, void *arg);

/* The schema version this code writes, and the one the open file has. */
int store_schema_version (void);
int store_file_version (struct store *st);

/* Test support: SQLite's plan (EXPLAIN QUERY PLAN, the details joined by
 * "; ") for one of the store's own queries named by 'query': "prune_jobs",
 * "prune_events", "recover", "unreleased", "count" (store_job_count),
 * store_job_list's statement for a filter by "list_state" (active),
 * "list_state_uid" (lost, a uid), "list_released_uid" (released, a uid),
 * "list_uid" or "list_all" (none). */
int store_query_plan (struct store *st,
                      const char *query,
                      char *out,
                      size_t len,
                      struct fmb_error *error);

/* Benchmark support: add 'count' released jobs (ids "r000000000"...),
 * released at times spread evenly from 'from_ms' to 'to_ms' in id order,
 * with their nodes, steps and events (jobs.c says how many; 15,000-30,000
 * a second here, ~1 KB each). */
int store_fill_released (struct store *st,
                         int64_t count,
                         int64_t from_ms,
                         int64_t to_ms,
                         struct fmb_error *error);

/* Test support: create a database whose schema stops at 'version'. */
int store_create_at_version (const char *db_path, int version, struct fmb_error *error);

/* ---- transactions -------------------------------------------------- */

int store_begin (struct store *st, struct fmb_error *error);
/* The outermost transaction, begun with its first statement: one that no
 * statement used commits without taking a lock or writing a byte (the
 * loop opens one every pass, most of which read nothing).  If that BEGIN
 * fails, every statement that writes fails with its error, and so does
 * the commit; statements that only read run on their own.  EBUSY if one
 * is open. */
int store_begin_on_use (struct store *st, struct fmb_error *error);
/* Why the open transaction cannot commit (its BEGIN failed); NULL when
 * it can, as far as is known.  Statements that only read still run then,
 * each on its own. */
const char *store_tx_error (const struct store *st);
int store_commit (struct store *st, struct fmb_error *error);
void store_rollback (struct store *st);

/* ---- jobs ---------------------------------------------------------- */

/* Insert a new job (EEXIST if its id is taken) with its nodes; sets its
 * created_ms and updated_ms to the time stored. */
int store_job_put (struct store *st, struct store_job *job, struct fmb_error *error);
int store_job_get (struct store *st,
                   const char *id,
                   struct store_job **ret,
                   struct fmb_error *error);
/* The job without its nodes and request (NULL): what costs the same
 * however many nodes it has. */
int store_job_get_brief (struct store *st,
                         const char *id,
                         struct store_job **ret,
                         struct fmb_error *error);
void store_job_free (struct store_job *job);
int store_job_set_state (struct store *st,
                         const char *id,
                         enum store_job_state state,
                         struct fmb_error *error);
/* Set the hardware-collective outcome.  'reason' may be NULL.  'token'
 * non-NULL replaces the stored token; NULL leaves it. */
int store_job_set_hwcoll (struct store *st,
                          const char *id,
                          enum store_hwcoll_state hwcoll,
                          const char *reason,
                          unsigned mcast_limit,
                          const char *token,
                          struct fmb_error *error);
/* Has this store a record of the job 'id' with FM id 'fm_job_id' in any
 * state, other than one never eligible for hardware collectives (that is,
 * an intent to reserve may have been written for it)?  Reconciliation deletes only FM
 * reservations it has a record of (promise 9). */
int store_job_known (struct store *st,
                     const char *id,
                     const char *fm_job_id,
                     bool *known,
                     struct fmb_error *error);
/* Remove a job with its steps and nodes (a released job whose id the RM
 * reuses).  EBUSY while it still holds or quarantines VNIs. */
int store_job_delete (struct store *st, const char *id, struct fmb_error *error);
/* The jobs a listing passes to 'cb' have neither nodes nor request (NULL):
 * both grow with the job's nodes. */
int store_job_list (struct store *st,
                    const struct store_job_filter *filter,
                    store_job_f cb,
                    void *arg,
                    struct fmb_error *error);
/* A page of the jobs an FM reservation may belong to, in brief: at most
 * 'max' jobs in 'state' (STORE_JOB_ACTIVE or STORE_JOB_LOST) whose ids
 * sort after 'after' ("" for the first page), in id order.  A page costs
 * what it returns, however many jobs are stored.  Returns how many it
 * listed (fewer than 'max': there are no more), or -1. */
int store_job_list_unreleased (struct store *st,
                               enum store_job_state state,
                               const char *after,
                               unsigned max,
                               store_job_brief_f cb,
                               void *arg,
                               struct fmb_error *error);
/* The ids of jobs whose reservation a restart interrupted (hwcoll
 * reserving, job not released): what recovery resumes. */
typedef int (*store_id_f) (const char *id, void *arg);
int store_job_list_reserving (struct store *st,
                              store_id_f cb,
                              void *arg,
                              struct fmb_error *error);
int store_job_count (struct store *st,
                     enum store_job_state state,
                     unsigned *ret,
                     struct fmb_error *error);

/* Live reservations (hwcoll reserved, job active or releasing) and the
 * multicast addresses they may use (sum of mcast_limit).  Like the VNI
 * counts and the outbox depth, kept by triggers: one row read. */
int store_hwcoll_usage (struct store *st,
                        unsigned *ret_jobs,
                        unsigned *ret_addrs,
                        struct fmb_error *error);

const char *store_job_state_name (enum store_job_state s);
const char *store_hwcoll_state_name (enum store_hwcoll_state s);
const char *store_cxi_state_name (enum store_cxi_state s);
const char *store_step_state_name (enum store_step_state s);
/* Name -> value; -1 if unknown. */
int store_job_state_parse (const char *name);
/* May a job in state 's' hold its FM reservation (active, lost)? */
bool store_job_state_unreleased (enum store_job_state s);
/* The first such state after 'after' (-1: the first of all) in the
 * list's order; -1 when there is none. */
int store_job_state_next_unreleased (int after);

/* ---- steps --------------------------------------------------------- */

int store_step_put (struct store *st,
                    const char *job_id,
                    const char *step_id,
                    enum store_step_state state,
                    const char *detail,
                    struct fmb_error *error);
int store_step_get (struct store *st,
                    const char *job_id,
                    const char *step_id,
                    enum store_step_state *ret,
                    struct fmb_error *error);

/* ---- per-node CXI reports ------------------------------------------ */

int store_node_put (struct store *st,
                    const char *job_id,
                    const char *node,
                    enum store_cxi_state cxi,
                    const char *detail,
                    struct fmb_error *error);
/* The job's node reports in node order, or only 'node''s (NULL: all). */
int store_node_list (struct store *st,
                     const char *job_id,
                     const char *node,
                     store_node_f cb,
                     void *arg,
                     struct fmb_error *error);
/* Those of the job's nodes that have not reported 'destroyed', in node
 * order, reading only them. */
int store_node_list_waiting (struct store *st,
                             const char *job_id,
                             store_node_f cb,
                             void *arg,
                             struct fmb_error *error);
/* Has the job any node recorded (*ret_nodes), and has one of them not
 * reported 'destroyed' (*ret_waiting)?  Its cost does not grow with the
 * job's nodes. */
int store_node_waiting (struct store *st,
                        const char *job_id,
                        bool *ret_nodes,
                        bool *ret_waiting,
                        struct fmb_error *error);
/* How many jobs name 'node' and still hold something (not released, or
 * their VNIs held or quarantined), counted up to 'max'; reads the node's
 * own rows only (job_nodes_by_node). */
int store_node_live_jobs (struct store *st,
                          const char *node,
                          unsigned max,
                          unsigned *ret,
                          struct fmb_error *error);

/* ---- VNI pool ------------------------------------------------------ */

/* Take 'count' VNIs from [min,max] for 'job_id', next-fit from the
 * persisted cursor, never one that is held or quarantined.  All or none:
 * ENOSPC when the pool cannot supply them. */
int store_vni_alloc (struct store *st,
                     const char *job_id,
                     unsigned count,
                     unsigned min,
                     unsigned max,
                     uint16_t out[],
                     struct fmb_error *error);
/* The job's VNIs move to quarantine until 'until_ms' (0: until freed). */
int store_vni_quarantine (struct store *st,
                          const char *job_id,
                          int64_t until_ms,
                          struct fmb_error *error);
/* Return the job's VNIs to the pool (nodes done, or an admin forces it). */
int store_vni_free_job (struct store *st, const char *job_id, struct fmb_error *error);
/* Free quarantined VNIs whose time has come; *ret_freed counts them. */
int store_vni_expire (struct store *st,
                      int64_t now_ms,
                      unsigned *ret_freed,
                      struct fmb_error *error);
/* How many VNIs of [min, max] are neither held nor in quarantine, from
 * store_vni_counts' figures: a read whatever the size of the pool. */
int store_vni_left (struct store *st,
                    unsigned min,
                    unsigned max,
                    unsigned held,
                    unsigned quarantined,
                    int64_t *ret,
                    struct fmb_error *error);
/* The VNIs above 'after' (0: from the first), in order, at most 'limit'
 * (0: all). */
int store_vni_list (struct store *st,
                    unsigned after,
                    unsigned limit,
                    store_vni_f cb,
                    void *arg,
                    struct fmb_error *error);
int store_vni_counts (struct store *st,
                      unsigned *ret_held,
                      unsigned *ret_quarantined,
                      struct fmb_error *error);
int store_vni_cursor (struct store *st, unsigned *ret, struct fmb_error *error);

/* ---- outbox of pending FM operations -------------------------------- */

/* Add an operation due at 'due_ms'.  Adding one that is already pending
 * (same kind, target and arg) returns the existing entry's id. */
int store_outbox_put (struct store *st,
                      const char *kind,
                      const char *target,
                      const char *arg,
                      int64_t due_ms,
                      int64_t *ret_id,
                      struct fmb_error *error);
/* Entries due at 'now_ms', oldest due first, at most 'limit' (0: all). */
int store_outbox_due (struct store *st,
                      int64_t now_ms,
                      unsigned limit,
                      store_outbox_f cb,
                      void *arg,
                      struct fmb_error *error);
/* When the next entry is due (wall ms); INT64_MAX if the outbox is empty. */
int store_outbox_next_ms (struct store *st, int64_t *ret, struct fmb_error *error);
int store_outbox_done (struct store *st, int64_t id, struct fmb_error *error);
int store_outbox_retry (struct store *st,
                        int64_t id,
                        int64_t next_ms,
                        const char *last_error,
                        struct fmb_error *error);
int store_outbox_depth (struct store *st, unsigned *ret, struct fmb_error *error);
/* Is an entry of 'kind' for 'target' queued (any arg)?  One key lookup. */
int store_outbox_has (struct store *st,
                      const char *kind,
                      const char *target,
                      bool *ret,
                      struct fmb_error *error);

/* ---- event log ----------------------------------------------------- */

/* Append an event; 'detail' is a JSON object text ("{}" if NULL).  The
 * sequence numbers only grow, also across restarts and pruning. */
int store_event_append (struct store *st,
                        const char *type,
                        const char *job_id,
                        const char *detail,
                        int64_t *ret_seq,
                        struct fmb_error *error);
int store_event_list (struct store *st,
                      int64_t after,
                      unsigned limit,
                      store_event_f cb,
                      void *arg,
                      struct fmb_error *error);
int store_event_last (struct store *st, int64_t *ret, struct fmb_error *error);
/* The oldest sequence number still kept (0: the log is empty). */
int store_event_first (struct store *st, int64_t *ret, struct fmb_error *error);

/* ---- retention ----------------------------------------------------- */

/* Delete at most 'max' released jobs released before 'jobs_before_ms'
 * (with their steps and nodes; never one whose VNIs are still
 * quarantined), and at most 'max' events older than 'events_before_ms'.
 * *ret_jobs and *ret_events get the counts; fewer than 'max' of each
 * means nothing more is due. */
int store_prune (struct store *st,
                 int64_t jobs_before_ms,
                 int64_t events_before_ms,
                 unsigned max,
                 unsigned *ret_jobs,
                 unsigned *ret_events,
                 struct fmb_error *error);

#endif

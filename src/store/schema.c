/* schema.c: the schema's migrations, and the statements that count what
 * migration 6's triggers keep (store_check_full compares them, store_recount
 * sets them).
 *
 * Nothing here runs a statement: open.c migrates with these, derived.c
 * replays them into a scratch database to compare the schema.
 */
#include <stddef.h>

#include "store_private.h"

/* Does row 'r' (jobs, NEW or OLD) hold a multicast reservation for a live
 * job?  1 or 0 (both columns are NOT NULL).  With the counts below, part
 * of migration 6: never edit them, add a migration. */
#define LIVE_MCAST(r) \
    "(" r ".hwcoll = 'reserved' AND " r ".state IN ('active', 'releasing'))"
/* What each tally counts, counted: migration 6 starts from these, and
 * store_check_full compares the tallies with them. */
#define COUNT_VNIS_HELD        "(SELECT count(*) FROM vnis WHERE state = 'held')"
#define COUNT_VNIS_QUARANTINED "(SELECT count(*) FROM vnis WHERE state = 'quarantined')"
#define COUNT_OUTBOX           "(SELECT count(*) FROM outbox)"
#define COUNT_MCAST_JOBS       "(SELECT count(*) FROM jobs WHERE " LIVE_MCAST ("jobs") ")"
#define COUNT_MCAST_ADDRESSES \
    "(SELECT coalesce(sum(mcast_limit), 0) FROM jobs WHERE " LIVE_MCAST ("jobs") ")"
/* Every tally, counted: (name, count) rows for a VALUES list. */
#define TALLY_ROWS                                  \
    "('vnis_held', " COUNT_VNIS_HELD                \
    "),"                                            \
    " ('vnis_quarantined', " COUNT_VNIS_QUARANTINED \
    "),"                                            \
    " ('outbox', " COUNT_OUTBOX                     \
    "),"                                            \
    " ('mcast_jobs', " COUNT_MCAST_JOBS             \
    "),"                                            \
    " ('mcast_addresses', " COUNT_MCAST_ADDRESSES ")"
/* job_counts' rows, counted (schema 5) */
#define JOB_COUNT_ROWS                                                             \
    "SELECT column1, (SELECT count(*) FROM jobs WHERE state = column1) AS column2" \
    " FROM (VALUES ('active'), ('releasing'), ('released'), ('lost'))"

/* Schema migrations: migrations[i] takes the file from version i to i+1.
 * Never edit a released entry; add a new one. */
static const char *const migrations[] = {
    /* 0 -> 1: jobs, their steps and nodes, the VNI pool */
    "PRAGMA application_id = 1179468370;" /* STORE_APPLICATION_ID */
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY,"
    "  value INTEGER NOT NULL) STRICT;"
    "INSERT INTO meta (key, value) VALUES ('vni_cursor', 0);"
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY,"
    "  fm_job_id TEXT NOT NULL,"
    "  uid INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967294),"
    "  user TEXT,"
    "  nodes TEXT,"
    "  node_count INTEGER NOT NULL CHECK (node_count >= 0),"
    "  ncores INTEGER NOT NULL DEFAULT 0,"
    "  request TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN"
    "    ('active', 'releasing', 'released', 'lost')),"
    "  hwcoll TEXT NOT NULL CHECK (hwcoll IN ('reserving', 'reserved',"
    "    'not_eligible', 'unavailable', 'lost', 'released')),"
    "  hwcoll_reason TEXT,"
    "  mcast_limit INTEGER NOT NULL DEFAULT 0,"
    "  token BLOB,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  released_ms INTEGER NOT NULL DEFAULT 0) STRICT;"
    "CREATE INDEX jobs_by_state ON jobs (state, id);"
    "CREATE INDEX jobs_by_uid ON jobs (uid, id);"
    "CREATE TABLE job_steps ("
    "  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  step_id TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('cleaning', 'cleaned', 'failed')),"
    "  detail TEXT,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (job_id, step_id)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE job_nodes ("
    "  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  node TEXT NOT NULL,"
    "  cxi TEXT NOT NULL CHECK (cxi IN"
    "    ('pending', 'created', 'destroyed', 'failed')),"
    "  detail TEXT,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (job_id, node)) STRICT, WITHOUT ROWID;"
    /* A VNI has a row while a job holds it or it sits in quarantine; the
     * primary key is what makes sharing a VNI impossible. */
    "CREATE TABLE vnis ("
    "  vni INTEGER PRIMARY KEY CHECK (vni BETWEEN 1 AND 65535),"
    "  job_id TEXT NOT NULL REFERENCES jobs (id),"
    "  pos INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('held', 'quarantined')),"
    "  until_ms INTEGER NOT NULL DEFAULT 0,"
    "  since_ms INTEGER NOT NULL) STRICT;"
    "CREATE INDEX vnis_by_job ON vnis (job_id, pos);",

    /* 1 -> 2: the durable outbox and the event log */
    "CREATE TABLE outbox ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  kind TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  arg TEXT NOT NULL DEFAULT '',"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_ms INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  last_error TEXT,"
    "  UNIQUE (kind, target, arg)) STRICT;"
    "CREATE INDEX outbox_by_due ON outbox (next_ms, id);"
    /* AUTOINCREMENT: a sequence number is never reused, even after the
     * newest events are pruned, so a reader's cursor stays valid. */
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  at_ms INTEGER NOT NULL,"
    "  type TEXT NOT NULL,"
    "  job_id TEXT,"
    "  detail TEXT NOT NULL) STRICT;",

    /* 2 -> 3: finding released jobs by age, for retention, without
     * indexing the active ones */
    "CREATE INDEX jobs_released ON jobs (released_ms) WHERE state = 'released';",

    /* 3 -> 4: the job's own traffic classes (RUN's tcs), a mask of
     * FMB_TC_* bits; 0 = none chosen, [cxi] tcs applies */
    "ALTER TABLE jobs ADD COLUMN tcs INTEGER NOT NULL DEFAULT 0"
    "  CHECK (tcs BETWEEN 0 AND 15);",

    /* 4 -> 5: jobs counted by state, kept by triggers: counting them
     * (metrics, status) read every entry of jobs_by_state for the state,
     * ~0.2 s on the loop at 1,000,000 released jobs.  Counting them here
     * is the one full read, once. */
    "CREATE TABLE job_counts ("
    "  state TEXT PRIMARY KEY,"
    "  n INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
    "INSERT INTO job_counts (state, n)"
    "  SELECT column1, (SELECT count(*) FROM jobs WHERE state = column1)"
    "  FROM (VALUES ('active'), ('releasing'), ('released'), ('lost'));"
    "CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs BEGIN"
    "  UPDATE job_counts SET n = n + 1 WHERE state = NEW.state; END;"
    "CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs BEGIN"
    "  UPDATE job_counts SET n = n - 1 WHERE state = OLD.state; END;"
    "CREATE TRIGGER jobs_counted_moved AFTER UPDATE OF state ON jobs"
    "  WHEN OLD.state IS NOT NEW.state BEGIN"
    "  UPDATE job_counts SET n = n - 1 WHERE state = OLD.state;"
    "  UPDATE job_counts SET n = n + 1 WHERE state = NEW.state; END;",

    /* 5 -> 6: the other counts metrics, status and health show, kept by
     * triggers as job_counts is: VNIs held and quarantined (each scrape
     * read every row of vnis), live jobs' multicast reservations and
     * addresses (every active job's row), and the outbox's depth (every
     * entry: 99,000 while a reconciliation's releases wait).  /metrics
     * took 8-11 ms per scrape at 13,000 active jobs, 1 ms with these.  A job
     * holds its reservation while active or releasing; the trigger on
     * jobs only does arithmetic when that, or its size, changes. */
    "CREATE TABLE tallies ("
    "  name TEXT PRIMARY KEY,"
    "  n INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
    "INSERT INTO tallies (name, n) VALUES " TALLY_ROWS ";"
    "CREATE TRIGGER vnis_tallied_in AFTER INSERT ON vnis BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'vnis_' || NEW.state; END;"
    "CREATE TRIGGER vnis_tallied_out AFTER DELETE ON vnis BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'vnis_' || OLD.state; END;"
    "CREATE TRIGGER vnis_tallied_moved AFTER UPDATE OF state ON vnis"
    "  WHEN OLD.state IS NOT NEW.state BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'vnis_' || OLD.state;"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'vnis_' || NEW.state; END;"
    "CREATE TRIGGER outbox_tallied_in AFTER INSERT ON outbox BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'outbox'; END;"
    "CREATE TRIGGER outbox_tallied_out AFTER DELETE ON outbox BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'outbox'; END;"
    "CREATE TRIGGER jobs_mcast_in AFTER INSERT ON jobs"
    "  WHEN " LIVE_MCAST ("NEW") " BEGIN"
    "  UPDATE tallies SET n = n + 1 WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n + NEW.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    "CREATE TRIGGER jobs_mcast_out AFTER DELETE ON jobs"
    "  WHEN " LIVE_MCAST ("OLD") " BEGIN"
    "  UPDATE tallies SET n = n - 1 WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n - OLD.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    "CREATE TRIGGER jobs_mcast_moved AFTER UPDATE OF state, hwcoll, mcast_limit"
    "  ON jobs WHEN " LIVE_MCAST ("OLD") " IS NOT " LIVE_MCAST ("NEW")
    "  OR (" LIVE_MCAST ("NEW") " AND OLD.mcast_limit IS NOT NEW.mcast_limit)"
    "  BEGIN"
    "  UPDATE tallies SET n = n + " LIVE_MCAST ("NEW") " - " LIVE_MCAST ("OLD")
    "    WHERE name = 'mcast_jobs';"
    "  UPDATE tallies SET n = n + " LIVE_MCAST ("NEW") " * NEW.mcast_limit"
    "    - " LIVE_MCAST ("OLD") " * OLD.mcast_limit WHERE name = 'mcast_addresses';"
    "  END;"
    /* and the quarantined VNIs by the time they leave it: expiry runs
     * every second and read every VNI held (1.5 ms at 24,000) */
    "CREATE INDEX vnis_expiring ON vnis (until_ms)"
    "  WHERE state = 'quarantined' AND until_ms > 0;",

    /* 6 -> 7: the nodes of a job still to report its CXI services
     * destroyed.  Each report after CLEANUP asks whether any is left: it
     * counted every node of the job (O(nodes) a report, O(nodes^2) an
     * epilog wave), and this finds the first one in a key lookup. */
    "CREATE INDEX job_nodes_waiting ON job_nodes (job_id) WHERE cxi != 'destroyed';",

    /* 7 -> 8: a node's jobs (issue 51).  A node's RUN of a new job asks
     * how many jobs the node is in that still hold something, against
     * [api] node_max_jobs: without this the question read every node
     * row of every job stored. */
    "CREATE INDEX job_nodes_by_node ON job_nodes (node, job_id);",
};

#define SCHEMA_VERSION ((int)(sizeof (migrations) / sizeof (migrations[0])))

const char *store_migration (int from)
{
    return from >= 0 && from < SCHEMA_VERSION ? migrations[from] : NULL;
}

int store_schema_version (void)
{
    return SCHEMA_VERSION;
}

/* The counts triggers keep, against what they count (schema 5: jobs by
 * state; 6: the tallies): a row for each that differs or is missing.
 * Only a file changed behind SQLite's back (damage the page checks do
 * not see, a hand edit with the triggers dropped) can make them differ;
 * metrics, status and health would then show wrong figures (or, with a
 * row missing, fail), and store_recount() puts them right. */
const char SQL_CHECK_JOB_COUNTS[] =
    "SELECT 'job_counts ' || e.column1, c.n, e.column2"
    " FROM (" JOB_COUNT_ROWS
    ") AS e LEFT JOIN job_counts AS c ON c.state = e.column1"
    " WHERE c.n IS NOT e.column2";
const char SQL_CHECK_TALLIES[] =
    "SELECT 'tallies ' || e.column1, t.n, e.column2"
    " FROM (VALUES " TALLY_ROWS
    ") AS e LEFT JOIN tallies AS t ON t.name = e.column1"
    " WHERE t.n IS NOT e.column2";

/* Every kept count set to what it counts, missing rows made again; rows
 * already right are left alone, so that the changes are the fixes. */
const char SQL_RECOUNT[] =
    "INSERT INTO job_counts (state, n) " JOB_COUNT_ROWS
    " WHERE true ON CONFLICT (state) DO UPDATE SET n = excluded.n"
    " WHERE n IS NOT excluded.n;"
    "INSERT INTO tallies (name, n) VALUES " TALLY_ROWS
    " ON CONFLICT (name) DO UPDATE SET n = excluded.n WHERE n IS NOT excluded.n;";

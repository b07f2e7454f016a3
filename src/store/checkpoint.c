/* checkpoint.c: WAL checkpoints on a thread of the store's own, so that
 * no commit on the caller's thread writes them back.
 *
 * SQLite's default (wal_autocheckpoint = 1000 pages) makes the commit
 * that crosses 1000 pages copy them all into the database file and fsync
 * it: ~200 ms on the loop thread with a busy disk.  Instead the writer's
 * WAL hook only notes the WAL's size and, once 'checkpoint_pages' frames
 * were committed since the last checkpoint, wakes the checkpointer,
 * which runs a PASSIVE checkpoint on its own connection: it copies what
 * is committed while the writer goes on appending, and never takes the
 * writer's lock.  Below the threshold the checkpointer still copies what
 * was committed at least once a second, so a store that goes quiet does
 * not keep its changes only in the WAL.
 *
 * Starting the WAL over.  The writer starts the WAL over at its first
 * commit after a checkpoint copied all of it; until then every commit
 * appends, and past the file's end an fdatasync also writes the inode
 * (ext4, and any file system: the size changed): a second I/O in every
 * commit.  A thread that copies while the writer commits every
 * millisecond never catches up: it always leaves the frames committed
 * during its own copy.  So once the WAL holds RESTART_ROUNDS rounds, the
 * writer's commits wake the thread again while more than FINISH_PAGES
 * are left, and the writer's thread copies the last few itself when it
 * has a moment (store_finish_checkpoint).  That costs the loop two fsyncs
 * per cycle, and the commit that starts the WAL over a third (SQLite
 * syncs the new header): 3-21 ms each while benchmark 5 releases and
 * prunes, hence one cycle every few rounds, not every round.  The commits
 * in between overwrite blocks the file already has.  (Before, a WAL past
 * the threshold woke the thread at every commit, ~1 checkpoint and 2 more
 * fsyncs per 2 RUNs of one client, and grew appending: a RUN of one
 * client took 1.3-1.8 ms, against 1.0-1.3 ms with this.)
 *
 * A restart is seen as a commit that leaves the WAL smaller than the one
 * before.  A first commit bigger than the whole WAL before it goes
 * unnoticed: 'copied' then counts frames of the old WAL, the next round
 * comes that much late, and sets 'copied' right.  A reader that holds
 * old frames (a long backup) makes rounds copy nothing: until the WAL
 * grows by another round, neither thread tries again.
 *
 * Durability is unchanged: a commit is durable when its WAL frames are
 * fsync'ed (synchronous = FULL on the writer); the checkpointer's
 * connection is synchronous = FULL too, so the database file is fsync'ed
 * before the WAL's copied frames are marked reusable.
 *
 * Bound: should the checkpointer fall behind (a disk slower than the
 * writes), the writer checkpoints by itself once the WAL passes
 * 'max_pages' -- a stall, but a bounded file.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_private.h"

#define CKPT_PAGES_DEFAULT 1000  /* SQLite's own auto-checkpoint threshold */
#define CKPT_MAX_PAGES     16384 /* 64 MiB of 4 KiB pages: the writer steps in */
#define CKPT_IDLE_MS       1000  /* a WAL below the threshold: copied after this */
#define CKPT_SIZE_LIMIT \
    "16777216" /* journal_size_limit: the WAL file shrinks to this */
/* See "Starting the WAL over".  What the writer's thread copies itself so
 * that the WAL can start over: at most 256 KiB (a round copies 4 MiB).
 * When: once the WAL holds 3 rounds, 12 MiB, under journal_size_limit
 * (which would cut a bigger file back at every restart). */
#define FINISH_PAGES   64
#define RESTART_ROUNDS 3

struct store_checkpointer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    sqlite3 *db; /* the thread's own connection */
    bool stop;
    bool due;     /* a round is wanted (see wal_hook) */
    bool dirty;   /* commits since the last checkpoint */
    bool running; /* a checkpoint in progress on the thread */
    int checkpoint_pages;
    int max_pages;
    int last_pages; /* the WAL after the previous commit (smaller: started over) */
    int copied;     /* frames of this WAL already in the database file */
    int round_at;   /* the WAL's frames when the last round (or finish) began */
    bool gained;    /* the last round or finish copied frames: worth chasing */
    unsigned long generation; /* WALs so far (restarts, the cap's truncations) */
    struct store_wal_stats stats;
};

/* Should the WAL start over?  (Copying it began, and it is long.) */
static bool restart_due (const struct store_checkpointer *c)
{
    return c->copied > 0 &&
           c->last_pages >= (long long)RESTART_ROUNDS * c->checkpoint_pages;
}

/* A new WAL: nothing of it copied yet. */
static void wal_started_over (struct store_checkpointer *c)
{
    c->generation++;
    c->copied = c->round_at = c->stats.backfilled = 0;
    c->gained = false;
}

/* A round (or a finish) that began when the WAL had 'log' frames copied
 * up to 'done' -- of this WAL, if no restart came in between. */
static void note_copied (struct store_checkpointer *c,
                         unsigned long generation,
                         int log,
                         int done)
{
    if (c->generation != generation)
        return;
    c->stats.backfilled = done;
    c->gained = done > c->copied;
    if (c->gained)
        c->copied = done;
    c->round_at = log;
}

/* The writer's WAL hook: after every commit, on the writer's thread. */
static int wal_hook (void *arg, sqlite3 *db, const char *name, int pages)
{
    struct store_checkpointer *c = arg;
    bool wake, cap;
    pthread_mutex_lock (&c->mu);
    if (pages < c->last_pages) { /* this commit started the WAL over */
        c->stats.restarts++;
        wal_started_over (c);
    }
    c->last_pages = c->stats.wal_pages = pages;
    /* the first commit since a round starts the thread's idle delay (it
     * waits without one while nothing is to copy) */
    bool first = !c->dirty;
    c->dirty = true;
    /* a round's worth committed since the last round; or, once the WAL is
     * due to start over and rounds gain on it, more left than the
     * writer's thread should copy */
    wake =
        !c->due && (pages - c->round_at >= c->checkpoint_pages ||
                    (restart_due (c) && c->gained && pages - c->copied > FINISH_PAGES));
    if (wake)
        c->due = true;
    cap = pages >= c->max_pages;
    if (wake || first)
        pthread_cond_signal (&c->wake);
    pthread_mutex_unlock (&c->mu);
    if (cap) {
        /* The checkpointer is behind: copy and start the WAL over here.
         * (While the thread is copying this fails at once, SQLITE_BUSY
         * whatever the busy handler: the next commit tries again.) */
        int log = 0, done = 0;
        int rc = sqlite3_wal_checkpoint_v2 (
            db, name, SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
        pthread_mutex_lock (&c->mu);
        c->stats.writer_checkpoints++;
        if (rc == SQLITE_OK) { /* truncated: the next commit starts it over */
            c->stats.wal_pages = c->last_pages = 0;
            wal_started_over (c);
        }
        pthread_mutex_unlock (&c->mu);
    }
    return SQLITE_OK;
}

/* Wait until a checkpoint is due (or the idle delay passed with commits
 * outstanding); false when told to stop.  Called and returns locked. */
static bool wait_due (struct store_checkpointer *c)
{
    while (!c->stop && !c->due) {
        if (!c->dirty) {
            pthread_cond_wait (&c->wake, &c->mu);
            continue;
        }
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_sec += CKPT_IDLE_MS / 1000;
        if (pthread_cond_timedwait (&c->wake, &c->mu, &until) == ETIMEDOUT)
            break;
    }
    return !c->stop;
}

static void *checkpointer (void *arg)
{
    struct store_checkpointer *c = arg;
    pthread_mutex_lock (&c->mu);
    while (wait_due (c)) {
        c->due = false;
        c->dirty = false;
        c->running = true;
        unsigned long generation = c->generation;
        pthread_mutex_unlock (&c->mu);
        int log = 0, done = 0;
        int rc = sqlite3_wal_checkpoint_v2 (
            c->db, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        pthread_mutex_lock (&c->mu);
        c->running = false;
        if (rc == SQLITE_OK) {
            c->stats.checkpoints++;
            /* Not all of it copied (the writer went on): the next round
             * comes from the commits (wal_hook) or the idle delay. */
            note_copied (c, generation, log, done);
            if (done < log)
                c->dirty = true;
        } else { /* the writer restarting the WAL (busy), or a failure: next time */
            if ((rc & 0xff) != SQLITE_BUSY)
                c->stats.failures++;
            c->dirty = true;
        }
    }
    pthread_mutex_unlock (&c->mu);
    return NULL;
}

static int setup_db (sqlite3 *db)
{
    return sqlite3_exec (db,
                         "PRAGMA synchronous = FULL;"
                         "SELECT count(*) FROM sqlite_schema;",
                         NULL,
                         NULL,
                         NULL);
}

int store_checkpointer_start (struct store *st, const char *db_path)
{
    struct store_checkpointer *c = calloc (1, sizeof (*c));
    if (!c)
        return -1;
    c->checkpoint_pages = CKPT_PAGES_DEFAULT;
    c->max_pages = CKPT_MAX_PAGES;
    pthread_mutex_init (&c->mu, NULL);
    pthread_cond_init (&c->wake, NULL);
    int rc = sqlite3_open_v2 (
        db_path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = setup_db (c->db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec (
            st->db, "PRAGMA journal_size_limit = " CKPT_SIZE_LIMIT, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        errno = store_errno (rc);
        goto error;
    }
    sqlite3_busy_timeout (c->db, 5000);
    if ((rc = pthread_create (&c->thread, NULL, checkpointer, c)) != 0) {
        errno = rc;
        goto error;
    }
    /* replaces SQLite's auto-checkpoint (which is a WAL hook too) */
    sqlite3_wal_hook (st->db, wal_hook, c);
    st->ckpt = c;
    return 0;
error:
    sqlite3_close (c->db);
    pthread_cond_destroy (&c->wake);
    pthread_mutex_destroy (&c->mu);
    free (c);
    return -1;
}

void store_checkpointer_stop (struct store *st)
{
    struct store_checkpointer *c = st->ckpt;
    if (!c)
        return;
    sqlite3_wal_hook (st->db, NULL, NULL);
    pthread_mutex_lock (&c->mu);
    c->stop = true;
    pthread_cond_signal (&c->wake);
    pthread_mutex_unlock (&c->mu);
    pthread_join (c->thread, NULL);
    sqlite3_close (c->db);
    pthread_cond_destroy (&c->wake);
    pthread_mutex_destroy (&c->mu);
    free (c);
    st->ckpt = NULL;
}

bool store_finish_checkpoint (struct store *st)
{
    struct store_checkpointer *c = st->ckpt;
    if (!c)
        return false;
    pthread_mutex_lock (&c->mu);
    int left = c->last_pages - c->copied;
    bool finish = restart_due (c) && c->gained && left > 0 && left <= FINISH_PAGES &&
                  !c->running && !c->due;
    unsigned long generation = c->generation;
    int copied = c->copied;
    pthread_mutex_unlock (&c->mu);
    if (!finish)
        return false;
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2 (
        st->db, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    bool copied_some = rc == SQLITE_OK && done > copied;
    pthread_mutex_lock (&c->mu);
    if (rc == SQLITE_OK)
        note_copied (c, generation, log, done);
    if (copied_some) {
        c->stats.writer_finishes++;
        if (done - copied > c->stats.writer_finish_pages_max)
            c->stats.writer_finish_pages_max = done - copied;
    }
    pthread_mutex_unlock (&c->mu);
    return copied_some;
}

int store_wal_stats (struct store *st, struct store_wal_stats *ret)
{
    struct store_checkpointer *c = st->ckpt;
    if (!c) {
        errno = ENOENT;
        return -1;
    }
    pthread_mutex_lock (&c->mu);
    *ret = c->stats;
    pthread_mutex_unlock (&c->mu);
    return 0;
}

void store_set_wal_limits (struct store *st, int checkpoint_pages, int max_pages)
{
    struct store_checkpointer *c = st->ckpt;
    if (c) {
        pthread_mutex_lock (&c->mu);
        c->checkpoint_pages = checkpoint_pages;
        c->max_pages = max_pages;
        pthread_mutex_unlock (&c->mu);
    }
}

/* pass.h: one pass of the broker's loop and everything that waits on its
 * commit (group commit).
 *
 * A pass is one store transaction, begun by its first statement
 * (store_begin_on_use): most passes touch no row (answers going out, FM
 * replies that change nothing) and cost the store nothing, where a
 * BEGIN and COMMIT cost two statements and four file locks (fcntl).
 * When that BEGIN fails (another writer holds the lock past the busy
 * timeout), every write in the pass fails (its request says so) and so
 * does the commit: the on-abort hooks run and the held FM calls are
 * dropped, but the answers go as they are, since none claims a change;
 * reads still run, each on its own, and health says why.
 *
 * Between pass_begin and pass_end, answers are deferred (http_hold) and
 * FM calls that change the fabric are held (fmc_hold); pass_end commits,
 * then sends the answers and starts the held calls -- or, when the
 * commit failed, turns the answers into 503s, drops the held calls and
 * runs the on-abort hooks, so that whatever remembered the pass's writes
 * in memory forgets them too.  Nothing leaves the broker claiming a
 * change before it is durable.
 *
 * Should a transaction be open already when the pass begins (a bug),
 * the pass's writes go into that one and the pass "commits" trivially.
 */
#ifndef FMB_PASS_H
#define FMB_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct store;
struct http;
struct fmc;
struct pass;

/* Runs at pass_end: 'committed' says whether the pass's writes are durable. */
typedef void (*pass_end_f) (void *arg, bool committed);
/* Runs at pass_end only when the commit failed. */
typedef void (*pass_abort_f) (void *arg);
/* A piece of work that writes the store; -1 with 'error' filled rolls it back. */
typedef int (*pass_write_f) (void *arg, struct fmb_error *error);

/* 'http' and 'fmc' may be NULL (tests; VNI-only mode has no fabric). */
struct pass *pass_create (struct store *st, struct http *http, struct fmc *fmc);
void pass_destroy (struct pass *p);

void pass_begin (struct pass *p);
/* Commit and settle; true if the pass's writes are durable.  Sets
 * pass_flush_now when answers were released. */
bool pass_end (struct pass *p);

/* Hooks for this pass (ignored outside a pass: nothing to abort).  -1 if
 * it cannot be registered (out of memory, logged). */
int pass_on_end (struct pass *p, pass_end_f fn, void *arg);
int pass_on_abort (struct pass *p, pass_abort_f fn, void *arg);
/* 'arg' is going away: drop the hooks registered with it. */
void pass_forget (struct pass *p, void *arg);

/* Run 'fn' all-or-nothing inside the pass (a savepoint; outside a pass,
 * its own transaction).  On failure it is rolled back and -1 returned
 * with 'error' filled. */
int pass_write (struct pass *p, pass_write_f fn, void *arg, struct fmb_error *error);

/* Should a piece of background work (a retention or reconciliation
 * slice) leave this pass alone?  True when another piece already ran in
 * it (one slice a pass: whichever asks first; the other asks again a
 * millisecond later), while the pass holds answers to requests: they
 * would wait for the slice, and for a commit carrying its writes, and
 * while foreground work is in flight (pass_set_foreground: RUNs waiting
 * on the FM, whose answers would wait for the slice).  (FM answers and
 * background writes do not count: the releases of 3,000 orphans would hold matching
 * off.)  False again once that piece has been put off for PASS_BACKGROUND_DEFER_MAX_MS
 * in a row, so that a steady stream of requests slows it, never stops it.  '*since' (0
 * at first) is the piece's own: since when it waits; 'now_ms' monotonic, > 0. */
#define PASS_BACKGROUND_DEFER_MAX_MS 25
bool pass_defer_background (struct pass *p, int64_t *since, int64_t now_ms);
/* Do requests wait on this pass: it holds answers, or foreground work is
 * in flight?  (What pass_defer_background defers for.) */
bool pass_serving (const struct pass *p);
/* Is foreground work in flight?  (Set once by its owner; NULL: none.) */
typedef bool (*pass_busy_f) (void *arg);
void pass_set_foreground (struct pass *p, pass_busy_f fn, void *arg);
/* The rule behind it, for a pass that holds answers ('serving') or not. */
bool pass_background_waits (int64_t *since, bool serving, int64_t now_ms);

/* Between pass_begin and pass_end? */
bool pass_open (const struct pass *p);
/* Loop passes so far (each one transaction). */
uint64_t pass_count (const struct pass *p);
/* Answers were released by the last pass_end: send them without waiting,
 * then pass_start_kept.  The FM calls a pass committed wait for
 * pass_start_kept (once a loop turn, after the answers), which starts
 * them for about FMC_START_BUDGET_US; the rest in the next turns. */
bool pass_flush_now (const struct pass *p);
void pass_start_kept (struct pass *p);
/* The last pass that tried to write could not commit (until a writing pass
 * commits again); 'why' is the store's message. */
bool pass_commits_failing (const struct pass *p, const char **why);
/* The time the passes' commits took since the last call (the store's
 * fsync, mostly), so that a long loop turn can say how much of it was
 * the disk. */
int64_t pass_take_commit_us (struct pass *p);

#endif

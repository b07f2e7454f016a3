/* offloop.h: work that must not hold an event loop, done on a thread.
 *
 * One worker thread runs jobs in the order they were submitted; a job
 * the loop wants back (its result) comes back through offloop_take,
 * announced by offloop_fd becoming readable, so the loop's poll() wakes
 * for it.  A job without a 'done' list entry (offloop_free_later) just
 * runs and is gone: for freeing big structures off the loop.
 *
 * Threading: everything but the job's 'run' function is called from the
 * loop's thread; 'run' is called on the worker and must touch only what
 * the job owns.  The thread starts with the first submission.
 */
#ifndef FMB_OFFLOOP_H
#define FMB_OFFLOOP_H

#include <stdbool.h>

struct offloop;

struct offloop_job {
    /* On the worker.  Returns true to hand the job back to the loop
     * (offloop_take), false when it is finished with it (it freed it). */
    bool (*run) (struct offloop_job *job);
    struct offloop_job *next; /* the queue's; the submitter leaves it alone */
};

int offloop_create (struct offloop **ret);
/* Runs the jobs still queued and joins the thread.  Jobs handed back
 * and not taken are not touched: their owner frees them from its own
 * books. */
void offloop_destroy (struct offloop *ol);

/* Queue 'job'.  -1 (errno) when the thread cannot be started: the caller
 * then does the work itself. */
int offloop_submit (struct offloop *ol, struct offloop_job *job);
/* Readable while jobs are handed back and not taken; -1 before the
 * thread started. */
int offloop_fd (struct offloop *ol);
/* The jobs handed back so far, oldest first, as a list through 'next'
 * (NULL: none); clears the fd's readiness. */
struct offloop_job *offloop_take (struct offloop *ol);
/* Jobs submitted and not yet taken (or finished). */
unsigned offloop_pending (struct offloop *ol);

/* A job that frees 'ptr' with 'fn' off the loop; when it cannot be
 * queued, frees it at once. */
void offloop_free_later (struct offloop *ol, void (*fn) (void *), void *ptr);

#endif

/* offloop.c: one worker thread, two queues and an eventfd; see offloop.h.
 *
 * The loop's side never waits for the worker longer than it takes to
 * move a list head under the mutex: the worker takes the whole queue
 * at once and works without holding it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "offloop.h"

struct offloop {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool started;
    bool stop;
    int efd;                  /* counts jobs handed back */
    struct offloop_job *todo; /* newest first */
    struct offloop_job *done; /* newest first */
    unsigned pending;         /* submitted, not yet taken or finished */
};

static struct offloop_job *reverse (struct offloop_job *list)
{
    struct offloop_job *out = NULL;
    while (list) {
        struct offloop_job *j = list;
        list = j->next;
        j->next = out;
        out = j;
    }
    return out;
}

/* Run a batch in submission order; hand back what asks for it. */
static void run_batch (struct offloop *ol, struct offloop_job *batch)
{
    batch = reverse (batch);
    while (batch) {
        struct offloop_job *j = batch;
        batch = j->next;
        j->next = NULL;
        bool back = j->run (j);
        pthread_mutex_lock (&ol->mu);
        if (back) {
            j->next = ol->done;
            ol->done = j;
        } else
            ol->pending--;
        pthread_mutex_unlock (&ol->mu);
        if (back) {
            uint64_t one = 1;
            (void)!write (ol->efd, &one, sizeof (one));
        }
    }
}

static void *worker (void *arg)
{
    struct offloop *ol = arg;
    pthread_mutex_lock (&ol->mu);
    for (;;) {
        while (!ol->todo && !ol->stop)
            pthread_cond_wait (&ol->wake, &ol->mu);
        struct offloop_job *batch = ol->todo;
        ol->todo = NULL;
        bool stop = ol->stop;
        pthread_mutex_unlock (&ol->mu);
        run_batch (ol, batch);
        pthread_mutex_lock (&ol->mu);
        if (stop && !ol->todo)
            break;
    }
    pthread_mutex_unlock (&ol->mu);
    return NULL;
}

int offloop_create (struct offloop **ret)
{
    struct offloop *ol = calloc (1, sizeof (*ol));
    if (!ol)
        return -1;
    ol->efd = -1;
    pthread_mutex_init (&ol->mu, NULL);
    pthread_cond_init (&ol->wake, NULL);
    *ret = ol;
    return 0;
}

void offloop_destroy (struct offloop *ol)
{
    if (!ol)
        return;
    int saved = errno;
    if (ol->started) {
        pthread_mutex_lock (&ol->mu);
        ol->stop = true;
        pthread_cond_signal (&ol->wake);
        pthread_mutex_unlock (&ol->mu);
        pthread_join (ol->thread, NULL);
    }
    if (ol->efd >= 0)
        close (ol->efd);
    pthread_cond_destroy (&ol->wake);
    pthread_mutex_destroy (&ol->mu);
    free (ol);
    errno = saved;
}

static int start (struct offloop *ol)
{
    if (ol->started)
        return 0;
    if (ol->efd < 0 && (ol->efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return -1;
    int rc = pthread_create (&ol->thread, NULL, worker, ol);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    ol->started = true;
    return 0;
}

int offloop_submit (struct offloop *ol, struct offloop_job *job)
{
    if (start (ol) < 0)
        return -1;
    pthread_mutex_lock (&ol->mu);
    job->next = ol->todo;
    ol->todo = job;
    ol->pending++;
    pthread_cond_signal (&ol->wake);
    pthread_mutex_unlock (&ol->mu);
    return 0;
}

int offloop_fd (struct offloop *ol)
{
    return ol->started ? ol->efd : -1;
}

struct offloop_job *offloop_take (struct offloop *ol)
{
    if (!ol->started)
        return NULL;
    uint64_t count;
    (void)!read (ol->efd, &count, sizeof (count));
    pthread_mutex_lock (&ol->mu);
    struct offloop_job *list = ol->done;
    ol->done = NULL;
    for (struct offloop_job *j = list; j; j = j->next)
        ol->pending--;
    pthread_mutex_unlock (&ol->mu);
    return reverse (list);
}

unsigned offloop_pending (struct offloop *ol)
{
    pthread_mutex_lock (&ol->mu);
    unsigned n = ol->pending;
    pthread_mutex_unlock (&ol->mu);
    return n;
}

struct free_job {
    struct offloop_job job; /* first: the job is the allocation */
    void (*fn) (void *);
    void *ptr;
};

static bool run_free (struct offloop_job *job)
{
    struct free_job *f = (struct free_job *)job;
    f->fn (f->ptr);
    free (f);
    return false;
}

void offloop_free_later (struct offloop *ol, void (*fn) (void *), void *ptr)
{
    struct free_job *f = ol ? malloc (sizeof (*f)) : NULL;
    if (f) {
        f->job.run = run_free;
        f->fn = fn;
        f->ptr = ptr;
        if (offloop_submit (ol, &f->job) == 0)
            return;
        free (f);
    }
    fn (ptr);
}

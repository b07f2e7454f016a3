/* serve.c: the node service (serve.h). */
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "engine.h"
#include "servestate.h"
#include "fileutil.h"
#include "jobrecord.h"
#include "log.h"
#include "monotime.h"
#include "nodeservice.h"
#include "spool.h"
#include "validate.h"

static volatile sig_atomic_t stop_signal, reload_signal;

static void on_stop (int sig)
{
    (void)sig;
    stop_signal = 1;
}

static void on_hup (int sig)
{
    (void)sig;
    reload_signal = 1;
}

/* SIGTERM, SIGINT and SIGHUP are blocked in every thread, and taken only
 * while the main thread waits for the next caller; *waiting gets that
 * mask.  A request is never cut short by one (a setup cut short would
 * leave a job half made). */
static void handle_signals (sigset_t *waiting)
{
    struct sigaction sa = {.sa_handler = on_stop};
    struct sigaction hup = {.sa_handler = on_hup};
    sigset_t stop;
    sigemptyset (&sa.sa_mask);
    sigemptyset (&hup.sa_mask);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGHUP, &hup, NULL);
    signal (SIGPIPE, SIG_IGN); /* a broker or caller gone: EPIPE */
    sigemptyset (&stop);
    sigaddset (&stop, SIGTERM);
    sigaddset (&stop, SIGINT);
    sigaddset (&stop, SIGHUP);
    pthread_sigmask (SIG_BLOCK, &stop, waiting);
    sigdelset (waiting, SIGTERM);
    sigdelset (waiting, SIGINT);
    sigdelset (waiting, SIGHUP);
}

/* The socket at path, anyone's to connect to (each caller's uid is
 * checked).  A socket left by a service that died is replaced; one that
 * answers is another service's. */
static int listen_at (const char *path, struct fmb_error *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return fmb_errorf (e, "%s: the path is too long for a socket", path);
    }
    strcpy (sa.sun_path, path);
    /* the node's record directory (0755, as the records make it) */
    char dir[sizeof (sa.sun_path)];
    snprintf (dir, sizeof (dir), "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (fmb_mkdir_p (dir, 0755, e) < 0)
            return -1;
    }
    if (lstat (path, &st) == 0) {
        if (!S_ISSOCK (st.st_mode)) {
            errno = EEXIST;
            return fmb_errorf (e, "%s: exists and is not a socket", path);
        }
        int probe = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool answers =
            probe >= 0 && connect (probe, (struct sockaddr *)&sa, sizeof (sa)) == 0;
        if (probe >= 0)
            close (probe);
        if (answers) {
            errno = EADDRINUSE;
            return fmb_errorf (e, "%s: another fmbroker-cxi serve answers there", path);
        }
        unlink (path);
    }
    /* non-blocking: a caller gone between poll and accept is EAGAIN */
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fmb_errorf (e, "socket: %s", strerror (errno));
    mode_t old = umask (0177);
    int rc = bind (fd, (struct sockaddr *)&sa, sizeof (sa));
    umask (old);
    if (rc < 0 || chmod (path, 0666) < 0 || listen (fd, 256) < 0) {
        int err = errno;
        close (fd);
        errno = err;
        return fmb_errorf (e, "%s: %s", path, strerror (err));
    }
    return fd;
}

/* The request into r, all of it within REQUEST_WAIT_S (a caller that
 * trickles bytes holds no worker longer); -1 with why. */
static int read_request (int fd, struct node_request *r, struct fmb_error *e)
{
    static __thread char buf[NODE_SERVICE_REQUEST_MAX + 1];
    int64_t deadline = fmb_monotime_ms () + REQUEST_WAIT_S * 1000;
    size_t n = 0;
    while (n < 2 || memcmp (buf + n - 2, "\n\n", 2) != 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - fmb_monotime_ms ();
        int ready = left > 0 ? poll (&p, 1, (int)left) : 0;
        if (ready < 0 && errno == EINTR)
            continue;
        ssize_t got = ready > 0 ? read (fd, buf + n, NODE_SERVICE_REQUEST_MAX - n) : -1;
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0 || (n += (size_t)got) == NODE_SERVICE_REQUEST_MAX) {
            errno = EPROTO;
            return fmb_errorf (e, "a request ended early, is too long or too slow");
        }
    }
    buf[n - 1] = '\0';
    return node_request_decode (buf, r, e);
}

/* The answer: the status, a tab, the reason on one line. */
static void answer (int fd, int status, const char *reason)
{
    char line[FMB_ERROR_TEXT_MAX + 160];
    int n = snprintf (line, sizeof (line), "%d\t%s", status, reason);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof (line) - 1)
        n = (int)sizeof (line) - 2;
    char *tab = strchr (line, '\t'); /* the reason: one line, no controls */
    for (int i = tab ? (int)(tab - line) + 1 : n; i < n; i++)
        if ((unsigned char)line[i] < 0x20)
            line[i] = ' ';
    line[n] = '\n';
    (void)!send (fd, line, (size_t)n + 1, MSG_NOSIGNAL);
}

/* Has the caller gone (fmbroker-slurm-prolog gave up waiting, or slurmd
 * killed it at PrologEpilogTimeout)?  Its request is then not made: it
 * ran fmbroker-cxi itself, or the job is being torn down. */
static bool caller_gone (int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll (&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* The turn of r's job, once no other request of it holds it.  A wait
 * is said (debug): an epilog that came during its job's setup, or a
 * step's wait, is behind it. */
static struct job_turn *turn_take (struct service *svc, const struct node_request *r)
{
    const char *job = r->job;
    struct job_turn *t = NULL, *free_slot = NULL;
    pthread_mutex_lock (&svc->mu);
    for (unsigned i = 0; i < SERVE_WORKERS && !t; i++)
        if (svc->turns[i].users && strcmp (svc->turns[i].job, job) == 0)
            t = &svc->turns[i];
        else if (!svc->turns[i].users && !free_slot)
            free_slot = &svc->turns[i];
    if (!t) { /* a worker holds at most one: there is a free slot */
        t = free_slot;
        snprintf (t->job, sizeof (t->job), "%s", job);
    }
    t->users++;
    if (t->busy) { /* (the slot is ours by 'users': said unlocked) */
        pthread_mutex_unlock (&svc->mu);
        fmb_log (LOG_DEBUG,
                 "job %s: a request (%s) waits for the job's turn",
                 job,
                 node_op_name (r->op));
        pthread_mutex_lock (&svc->mu);
    }
    while (t->busy)
        pthread_cond_wait (&svc->changed, &svc->mu);
    t->busy = true;
    pthread_mutex_unlock (&svc->mu);
    return t;
}

static void turn_give (struct service *svc, struct job_turn *t)
{
    pthread_mutex_lock (&svc->mu);
    t->busy = false;
    t->users--;
    pthread_cond_broadcast (&svc->changed);
    pthread_mutex_unlock (&svc->mu);
}

/* Is 'job' in 'ring' (ENDED_REMEMBERED entries)? */
static bool in_ring (struct service *svc,
                     char (*ring)[NODE_PROTO_JOB_MAX],
                     const char *job)
{
    bool found = false;
    pthread_mutex_lock (&svc->mu);
    for (unsigned i = 0; i < ENDED_REMEMBERED && !found; i++)
        found = strcmp (ring[i], job) == 0;
    pthread_mutex_unlock (&svc->mu);
    return found;
}

static void ring_add (struct service *svc,
                      char (*ring)[NODE_PROTO_JOB_MAX],
                      unsigned *next,
                      const char *job)
{
    pthread_mutex_lock (&svc->mu);
    snprintf (ring[*next], NODE_PROTO_JOB_MAX, "%s", job);
    *next = (*next + 1) % ENDED_REMEMBERED;
    pthread_mutex_unlock (&svc->mu);
}

/* Has the job's end been asked for here (no user sets it up again)? */
static bool job_ended (struct service *svc, const char *job)
{
    return in_ring (svc, svc->ended, job);
}

/* A step's end: the answer at once (srun waits for node 0's slurmstepd);
 * the broker's DELETE of the step's trees is deferred.  One never made
 * (the broker away) leaves them to the job's end, which deletes all. */
static void step_end (struct service *svc, int fd, const struct node_request *r)
{
    if (!valid_job_id (r->job) || !valid_job_id (r->step)) {
        fmb_log (LOG_WARNING, "a step's end without a valid job and step: refused");
        answer (fd, EXIT_USAGE, "not a job and step");
        return;
    }
    pthread_mutex_lock (&svc->mu);
    struct deferred *d = &svc->d;
    bool full = d->nsteps == STEPS_MAX;
    if (!full) {
        snprintf (d->steps[d->nsteps++],
                  sizeof (d->steps[0]),
                  "/v1/jobs/%s/steps/%s",
                  r->job,
                  r->step);
        serve_defer_locked (svc);
    }
    pthread_mutex_unlock (&svc->mu);
    if (full) {
        fmb_log (LOG_WARNING,
                 "job %s step %s: %d step ends wait already: left to the job's end",
                 r->job,
                 r->step,
                 STEPS_MAX);
        answer (fd, EXIT_FAIL, "too many step ends waiting");
        return;
    }
    answer (fd, 0, "");
}

/* The steps' ends of 'job' still deferred are dropped at its end: the
 * job's end deletes all its trees. */
static void drop_steps (struct service *svc, const char *job)
{
    char prefix[160];
    int n = snprintf (prefix, sizeof (prefix), "/v1/jobs/%s/steps/", job);
    pthread_mutex_lock (&svc->mu);
    struct deferred *d = &svc->d;
    unsigned kept = 0, had = d->nsteps;
    for (unsigned i = 0; i < d->nsteps; i++)
        if (strncmp (d->steps[i], prefix, (size_t)n) != 0)
            memmove (d->steps[kept++], d->steps[i], sizeof (d->steps[0]));
    d->nsteps = kept;
    pthread_mutex_unlock (&svc->mu);
    if (kept < had)
        fmb_log (LOG_DEBUG,
                 "job %s: %u step end(s) dropped: the job's end deletes its trees",
                 job,
                 had - kept);
}

/* Is the job's record on this node (its setup made)? */
static bool record_there (struct service *svc, const char *job)
{
    char path[1200];
    return jobrecord_path (path, sizeof (path), svc->state_dir, job) == 0 &&
           access (path, F_OK) == 0;
}

/* The job's setup.  'early' (slurmd's Prolog=, root): answered once its
 * turn is taken, then made, a record left from an earlier run of the job
 * id (requeued) removed first.  Otherwise (a step's or a job shell's)
 * made unless the job's record is there by its turn, answered once made.
 * A user's only for a job of its own that has not ended here. */
/* Does this node's record of the job (root's, written at its setup)
 * name another uid than 'uid'?  A user asking for someone else's job is
 * then refused before it takes the job's turn (where it could hold the
 * job's own setup back). */
static bool record_names_other (struct service *svc, const char *job, uid_t uid)
{
    char path[1200];
    json_t *o = jobrecord_facts_path (path, sizeof (path), svc->state_dir, job) == 0
                    ? json_load_file (path, 0, NULL)
                    : NULL;
    json_t *owner = json_object_get (o, "uid");
    bool other =
        json_is_integer (owner) && json_integer_value (owner) != (json_int_t)uid;
    json_decref (o);
    return other;
}

/* This thread's CPU time in microseconds, for the setup's debug line
 * (what the node's own work costs beside the job's start). */
static int64_t thread_cpu_us (void)
{
    struct timespec ts;
    if (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A user's setup of a job that is not its own, or has ended here:
 * refused (answered), true. */
static bool user_refused (struct service *svc,
                          const struct caller *c,
                          const struct node_request *r)
{
    const char *why = NULL;
    if (job_ended (svc, r->job))
        why = "the job has ended on this node";
    else if (record_names_other (svc, r->job, c->uid))
        why = "not this user's job";
    if (!why)
        return false;
    fmb_log (LOG_WARNING,
             "job %s: uid %u asked for its setup: refused (%s)",
             r->job,
             (unsigned)c->uid,
             why);
    answer (c->fd, EXIT_FAIL, why);
    return true;
}

static void setup (struct service *svc,
                   const struct caller *c,
                   const struct node_request *r)
{
    struct engine_outcome out;
    struct fmb_error e;
    bool user = c->uid != 0;
    if (user && user_refused (svc, c, r))
        return;
    struct job_turn *t = turn_take (svc, r);
    /* the turn may have waited behind the job's end: asked again */
    if (user && user_refused (svc, c, r))
        return turn_give (svc, t);
    /* a caller gone by now made the job itself (fmbroker-slurm-prolog
     * gave up waiting and ran fmbroker-cxi) or is being torn down */
    if (caller_gone (c->fd)) {
        fmb_log (LOG_WARNING,
                 "job %s: its setup's caller stopped waiting before its turn: not made "
                 "here",
                 r->job);
        return turn_give (svc, t);
    }
    if (r->early && !user) {
        if (jobrecord_remove (svc->state_dir, r->job, &e) < 0)
            fmb_log (LOG_WARNING, "job %s: %s", r->job, e.text);
        answer (c->fd, 0, "");
    } else if (record_there (svc, r->job)) {
        answer (c->fd, 0, "");
        return turn_give (svc, t);
    }
    int64_t t0 = fmb_monotime_ms (), cpu0 = thread_cpu_us ();
    engine_setup (svc->eng, r, user ? (int64_t)c->uid : -1, &out);
    int64_t cpu = thread_cpu_us () - cpu0;
    char whose[64] = "";
    if (user)
        snprintf (
            whose, sizeof (whose), ", for its job shell (uid %u)", (unsigned)c->uid);
    fmb_log (LOG_DEBUG,
             "job %s: prolog made in %lld ms, %lld us of CPU (exit %d%s)",
             r->job,
             (long long)(fmb_monotime_ms () - t0),
             (long long)cpu,
             out.status,
             r->early ? ""
             : user   ? whose
                      : ", for its first step");
    turn_give (svc, t);
    if (!r->early)
        answer (c->fd, out.status, out.why);
    serve_report_kept (svc, out.kept);
}

/* The job's end: made with the broker connection already open, and
 * answered with the exit status the caller acts on (1: drain) and why,
 * "done" when it is 0, or NODE_SERVICE_BUSY when a service is still in
 * use (the caller then runs fmbroker-cxi, whose epilog waits for it: the
 * service serves others meanwhile).  One whose caller has gone is not
 * made: the caller ran fmbroker-cxi. */
static void end (struct service *svc,
                 const struct caller *c,
                 const struct node_request *r)
{
    struct engine_outcome out;
    char facts[1200];
    struct job_turn *t = turn_take (svc, r);
    /* Its end made and reported here already, nothing of it left
     * (Flux's housekeeping after its epilog): not reported twice.  An
     * end that found services in use, or whose caller had gone, is not
     * in 'made': the next one makes it. */
    if (in_ring (svc, svc->made, r->job) &&
        jobrecord_facts_path (facts, sizeof (facts), svc->state_dir, r->job) == 0 &&
        access (facts, F_OK) < 0) {
        fmb_log (LOG_DEBUG, "job %s: its end was made here already", r->job);
        answer (c->fd, 0, "done");
        return turn_give (svc, t);
    }
    ring_add (svc, svc->ended, &svc->next_ended, r->job);
    if (caller_gone (c->fd)) {
        fmb_log (LOG_WARNING,
                 "job %s: its epilog stopped waiting before its turn: not made here",
                 r->job);
        return turn_give (svc, t);
    }
    drop_steps (svc, r->job);
    int64_t t0 = fmb_monotime_ms ();
    engine_end (svc->eng, r, &out);
    if (out.status == 0)
        ring_add (svc, svc->made, &svc->next_made, r->job);
    fmb_log (LOG_DEBUG,
             "job %s: epilog made in %lld ms (exit %d)",
             r->job,
             (long long)(fmb_monotime_ms () - t0),
             out.status);
    turn_give (svc, t);
    answer (c->fd,
            out.status,
            out.status == 0 ? "done"
            : out.status == NODE_SERVICE_BUSY
                ? "the job's CXI services are still in use"
                : out.why);
    serve_report_kept (svc, out.kept);
}

/* Is the request one this caller may make?  Answered (refused) if not. */
static bool allowed (const struct caller *c, const struct node_request *r)
{
    if (c->uid != 0 && (r->op != NODE_OP_SETUP || r->early)) {
        fmb_log (LOG_WARNING,
                 "a request (%s) from uid %u (pid %d) refused: root's only",
                 node_op_name (r->op),
                 (unsigned)c->uid,
                 (int)c->pid);
        answer (c->fd, EXIT_USAGE, "root's only");
        return false;
    }
    if (r->node[0] && !valid_node_name (r->node)) {
        fmb_log (LOG_WARNING,
                 "a request (%s) with a node name that is none: refused",
                 node_op_name (r->op));
        answer (c->fd, EXIT_USAGE, "not a node name");
        return false;
    }
    if (r->op != NODE_OP_STEP_END && !valid_job_id (r->job)) {
        fmb_log (LOG_WARNING,
                 "a request (%s) without a valid job id: refused",
                 node_op_name (r->op));
        answer (c->fd, EXIT_USAGE, "not a job id");
        return false;
    }
    return true;
}

/* One caller's request, answered. */
static void serve_caller (struct caller *c)
{
    static __thread struct node_request r; /* large: not on a thread's stack */
    struct fmb_error e;
    if (read_request (c->fd, &r, &e) < 0) {
        fmb_log (LOG_WARNING,
                 "a request from uid %u (pid %d): %s",
                 (unsigned)c->uid,
                 (int)c->pid,
                 e.text);
        answer (c->fd, EXIT_USAGE, e.text);
        return;
    }
    if (!allowed (c, &r))
        return;
    switch (r.op) {
    case NODE_OP_SETUP:
        setup (c->svc, c, &r);
        break;
    case NODE_OP_END:
        end (c->svc, c, &r);
        break;
    case NODE_OP_STEP_END:
        step_end (c->svc, c->fd, &r);
        break;
    case NODE_OP_WAIT: /* whatever the job had in the making is made */
        turn_give (c->svc, turn_take (c->svc, &r));
        answer (c->fd, 0, "");
        break;
    case NODE_OP_NONE:
        break;
    }
}

static struct user_calls *user_slot (struct service *svc, uid_t uid)
{
    struct user_calls *free_slot = NULL;
    for (unsigned i = 0; i < USERS_TRACKED; i++)
        if (svc->users[i].n && svc->users[i].uid == uid)
            return &svc->users[i];
        else if (!svc->users[i].n && !free_slot)
            free_slot = &svc->users[i];
    if (free_slot)
        free_slot->uid = uid;
    return free_slot;
}

static struct caller *user_next_locked (struct service *svc);
static void start_worker (struct caller *c);

static void *worker (void *arg)
{
    struct caller *c = arg;
    struct service *svc = c->svc;
    serve_caller (c);
    close (c->fd);
    /* a report the broker did not take (away): tried again within
     * seconds, not at the next job */
    pthread_mutex_lock (&svc->mu);
    bool idle = !svc->d.retry_at_ms && !svc->d.reports;
    pthread_mutex_unlock (&svc->mu);
    if (idle && serve_reports_kept (svc->state_dir)) {
        pthread_mutex_lock (&svc->mu);
        if (!svc->d.retry_at_ms && !svc->d.reports)
            serve_schedule_retry (&svc->d, true);
        pthread_mutex_unlock (&svc->mu);
        serve_wake_background (svc);
    }
    pthread_mutex_lock (&svc->mu);
    svc->nworkers--;
    if (c->uid != 0) {
        svc->nuser_workers--;
        user_slot (svc, c->uid)->n--;
    }
    struct caller *next = user_next_locked (svc);
    pthread_cond_broadcast (&svc->changed);
    pthread_mutex_unlock (&svc->mu);
    free (c);
    if (next)
        start_worker (next);
    return NULL;
}

/* A worker for the caller on fd, once one is free; a user over its share
 * is turned away at once. */
/* A thread for the caller (counted already); in line where none can
 * start. */
static void start_worker (struct caller *c)
{
    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init (&attr);
    pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize (&attr, 256 * 1024);
    if (pthread_create (&th, &attr, worker, c) != 0) {
        fmb_log (LOG_ERR, "cannot start a thread for a caller: serving it in line");
        worker (c);
    }
    pthread_attr_destroy (&attr);
}

/* May a user caller start now?  Counted if so.  Under svc->mu. */
static bool user_start_locked (struct service *svc, uid_t uid)
{
    struct user_calls *u = user_slot (svc, uid);
    if (!u || u->n >= USER_CALLS_MAX || svc->nuser_workers >= USER_WORKERS_MAX ||
        svc->nworkers >= SERVE_WORKERS)
        return false;
    u->n++;
    svc->nuser_workers++;
    svc->nworkers++;
    return true;
}

/* The first user caller waiting in line that may start now, taken off
 * the line and counted, or NULL.  Under svc->mu. */
static struct caller *user_next_locked (struct service *svc)
{
    for (unsigned i = 0; i < svc->nqueued; i++) {
        struct caller *c = svc->user_queue[i];
        if (!user_start_locked (svc, c->uid))
            continue;
        memmove (&svc->user_queue[i],
                 &svc->user_queue[i + 1],
                 (svc->nqueued - i - 1) * sizeof (svc->user_queue[0]));
        svc->nqueued--;
        return c;
    }
    return NULL;
}

/* A worker for the caller on fd, once one is free.  A user over its
 * share waits in line for one of its own to end (a burst of a Flux
 * user's jobs on one node); a full line refuses it. */
static void take_caller (struct service *svc, int fd)
{
    struct ucred cred = {0};
    socklen_t len = sizeof (cred);
    struct caller *c = calloc (1, sizeof (*c));
    if (!c || getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        free (c);
        close (fd);
        return;
    }
    *c = (struct caller){.svc = svc, .fd = fd, .uid = cred.uid, .pid = cred.pid};
    pthread_mutex_lock (&svc->mu);
    svc->last_caller_ms = fmb_monotime_ms ();
    if (cred.uid) {
        bool now = user_start_locked (svc, cred.uid);
        bool queued = !now && svc->nqueued < USER_QUEUE_MAX;
        if (queued)
            svc->user_queue[svc->nqueued++] = c;
        pthread_mutex_unlock (&svc->mu);
        if (now)
            start_worker (c);
        else if (!queued) {
            fmb_log (LOG_WARNING,
                     "uid %u (pid %d): %d requests of users wait already: refused",
                     (unsigned)cred.uid,
                     (int)cred.pid,
                     USER_QUEUE_MAX);
            answer (fd, EXIT_FAIL, "too many requests from users at once");
            close (fd);
            free (c);
        }
        return;
    }
    while (svc->nworkers >= SERVE_WORKERS)
        pthread_cond_wait (&svc->changed, &svc->mu);
    svc->nworkers++;
    pthread_mutex_unlock (&svc->mu);
    start_worker (c);
}

/* Callers already connected when the service stops are served, and so
 * are those that come while a job is still in the making here: a step's
 * or an epilog's wait for a setup taken here is answered here.  Once no
 * worker is left, those in line are taken, and then no more. */
static void drain_callers (struct service *svc, int lfd)
{
    for (;;) {
        int fd;
        while ((fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR)
            if (fd >= 0)
                take_caller (svc, fd);
        pthread_mutex_lock (&svc->mu);
        unsigned busy = svc->nworkers;
        pthread_mutex_unlock (&svc->mu);
        if (!busy)
            return;
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        (void)poll (&p, 1, 100);
    }
}

static void reload (struct service *svc)
{
    struct fmb_error e;
    reload_signal = 0;
    if (engine_reload (svc->eng, &e) < 0)
        fmb_log (LOG_ERR,
                 "SIGHUP: the configuration is not reloaded (%s): "
                 "the one read before stays in force",
                 e.text);
    else
        fmb_log (LOG_NOTICE, "SIGHUP: the configuration is reloaded");
}

/* Callers until SIGTERM or SIGINT. */
static void accept_loop (struct service *svc,
                         int lfd,
                         const char *path,
                         const sigset_t *waiting)
{
    while (!stop_signal) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int n = ppoll (&p, 1, NULL, waiting);
        if (reload_signal)
            reload (svc);
        if (n <= 0)
            continue; /* a signal ('stop_signal' says which) */
        int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            take_caller (svc, fd);
            continue;
        }
        if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR) {
            fmb_log (LOG_WARNING, "%s: accept: %s", path, strerror (errno));
            usleep (100 * 1000); /* out of files: no busy loop */
        }
    }
}

static struct service *service_create (struct agent *ag)
{
    struct service *svc = calloc (1, sizeof (*svc)); /* large: not on the stack */
    if (!svc)
        return NULL;
    if (pipe2 (svc->wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
        !(svc->eng = engine_create (ag))) {
        free (svc);
        return NULL;
    }
    pthread_mutex_init (&svc->mu, NULL);
    pthread_cond_init (&svc->changed, NULL);
    svc->state_dir = ag->args.state_dir;
    srandom ((unsigned)(fmb_monotime_ms () ^ (getpid () << 16)));
    svc->d.warm_at_ms =
        fmb_monotime_ms () + (int64_t)(random () % (WARM_SPREAD_MS / 10));
    serve_schedule_retry (
        &svc->d, serve_reports_kept (svc->state_dir)); /* kept before a restart */
    return svc;
}

static void service_destroy (struct service *svc)
{
    engine_destroy (svc->eng);
    close (svc->wake[0]);
    close (svc->wake[1]);
    pthread_mutex_destroy (&svc->mu);
    pthread_cond_destroy (&svc->changed);
    free (svc);
}

int cmd_serve (struct agent *ag)
{
    struct fmb_error e;
    struct cxilib resident = {0};
    char dflt[1200];
    pthread_t bg;
    snprintf (
        dflt, sizeof (dflt), "%s/%s", ag->args.state_dir, JOBRECORD_SERVICE_SOCKET);
    const char *path = ag->args.listen ? ag->args.listen : dflt;
    sigset_t waiting;
    handle_signals (&waiting);
    int lfd = listen_at (path, &e);
    if (lfd < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_FAIL;
    }
    struct service *svc = service_create (ag);
    if (!svc || pthread_create (&bg, NULL, serve_background, svc) != 0) {
        fmb_log (LOG_ERR, "the node service cannot start: out of memory or threads");
        if (svc)
            service_destroy (svc);
        close (lfd);
        return EXIT_FAIL;
    }
    /* libcxi stays loaded: each setup's dlopen is then a reference */
    if (cxilib_open (ag->args.libcxi, &resident, &e) < 0)
        fmb_log (LOG_INFO, "libcxi not loaded now (%s): each setup tries", e.text);
    fmb_log (LOG_NOTICE,
             "serving job setups and ends, and step ends, on %s (node %s)",
             path,
             engine_node (svc->eng));
    accept_loop (svc, lfd, path, &waiting);
    fmb_log (LOG_NOTICE, "stopping: serving those in line on %s, then no more", path);
    drain_callers (svc, lfd);
    /* no new caller finds the socket; those that connected just before
     * its name went are served, not reset */
    unlink (path);
    drain_callers (svc, lfd);
    close (lfd);
    pthread_mutex_lock (&svc->mu);
    svc->stopping = true;
    pthread_mutex_unlock (&svc->mu);
    serve_wake_background (svc);
    pthread_join (bg, NULL);
    cxilib_close (&resident);
    service_destroy (svc);
    return 0;
}

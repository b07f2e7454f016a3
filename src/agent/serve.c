/* serve.c: the node service (serve.h). */
#include "serve.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include "apiclient.h"
#include "fileutil.h"
#include "log.h"
#include "monotime.h"
#include "nodeservice.h"
#include "report.h"
#include "slurmvars.h"
#include "spool.h"
#include "validate.h"

#define REQUEST_WAIT_S   2 /* a caller that sends nothing is dropped */
#define REQUEST_VARS_MAX 16
/* The broker's bookkeeping (the nodes' reports, the steps' ends) waits
 * until no caller came for IDLE_MS, or at most DEFER_MAX_MS: it does not
 * take the CPU the job's tasks start on. */
#define IDLE_MS      50
#define DEFER_MAX_MS 1000
#define STEPS_MAX    256
/* a job's reason, as a run of the agent keeps it */
#define REASON_MAX sizeof (((struct agent *)0)->final_reason)

/* What the service does between callers. */
/* Kept reports the broker could not take are tried again within
 * seconds, not at the next timer: 1 s, doubling to 30 s, each wait
 * drawn within +-50% so that the nodes of a job that all missed (a
 * broker restarting) do not come back in step. */
#define REPORT_RETRY_FIRST_MS 1000
#define REPORT_RETRY_MAX_MS   30000
/* The kept connection to the broker is opened at start and again after
 * the broker closed it (a restart, a fail-over), each node at a moment
 * of its own within this window: the next job's launch then costs no
 * node a TLS handshake, and a whole machine's handshakes are spread
 * over the window rather than all at the next launch. */
#define WARM_SPREAD_MS 30000

struct deferred {
    bool reports;               /* kept reports to deliver */
    char steps[STEPS_MAX][300]; /* DELETE paths of steps that ended */
    unsigned nsteps;
    int64_t since_ms;       /* when the oldest was deferred; 0: none */
    int64_t retry_at_ms;    /* kept reports tried again then; 0: none kept */
    int64_t retry_delay_ms; /* the last wait, doubled at each miss */
    int64_t warm_at_ms;     /* the connection to the broker opened then; 0: open */
    bool local_broker;      /* on its Unix socket: nothing to keep warm */
};

/* What a prolog takes from Slurm, and a step's end, and nothing else. */
static const char *const request_vars[] = {
    SLURM_PROLOG_VARS,
    "FMB_STEP",   /* a step's end (the SPANK plugin) */
    "FMB_WAIT",   /* a wait for the prologs handed over (nodeservice.h) */
    "FMB_SETUP",  /* a step's setup of its job, where no Prolog= runs */
    "FMB_NCORES", /* ... and this node's CPUs from the step's credential */
};

static volatile sig_atomic_t stopping;

static void on_stop (int sig)
{
    (void)sig;
    stopping = 1;
}

/* SIGTERM and SIGINT stop the service between requests, never inside
 * one (a prolog cut short would leave a job half made): they are blocked
 * but while it waits for the next caller; *waiting gets that mask. */
static void handle_signals (sigset_t *waiting)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigset_t stop;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    signal (SIGPIPE, SIG_IGN); /* a broker or caller gone: EPIPE */
    sigemptyset (&stop);
    sigaddset (&stop, SIGTERM);
    sigaddset (&stop, SIGINT);
    sigprocmask (SIG_BLOCK, &stop, waiting);
    sigdelset (waiting, SIGTERM);
    sigdelset (waiting, SIGINT);
}

/* The socket at path, root's alone.  A socket left by a service that
 * died is replaced; one that answers is another service's. */
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
    if (rc < 0 || chmod (path, 0600) < 0 || listen (fd, 128) < 0) {
        int err = errno;
        close (fd);
        errno = err;
        return fmb_errorf (e, "%s: %s", path, strerror (err));
    }
    return fd;
}

/* Only root (slurmd's prolog) may ask: a service for any uid follows. */
static bool caller_is_root (int fd)
{
    struct ucred cred;
    socklen_t len = sizeof (cred);
    if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    if (cred.uid == 0)
        return true;
    fmb_log (LOG_WARNING,
             "request from uid %u (pid %d) refused: root's only",
             (unsigned)cred.uid,
             (int)cred.pid);
    return false;
}

static bool wanted_var (const char *line)
{
    for (size_t i = 0; i < sizeof (request_vars) / sizeof (request_vars[0]); i++) {
        size_t n = strlen (request_vars[i]);
        if (strncmp (line, request_vars[i], n) == 0 && line[n] == '=')
            return true;
    }
    return false;
}

/* The request's variables into env (pointing into buf); -1 with why. */
static int read_request (int fd, char *buf, char **env, struct fmb_error *e)
{
    struct timeval tv = {.tv_sec = REQUEST_WAIT_S};
    size_t n = 0;
    int nvars = 0;
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
    while (n < 2 || memcmp (buf + n - 2, "\n\n", 2) != 0) {
        ssize_t r = read (fd, buf + n, NODE_SERVICE_REQUEST_MAX - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (n += (size_t)r) == NODE_SERVICE_REQUEST_MAX) {
            errno = EPROTO;
            return fmb_errorf (e, "a request ended early or is too long");
        }
    }
    buf[n - 1] = '\0';
    for (char *line = buf, *nl; (nl = strchr (line, '\n')); line = nl + 1) {
        *nl = '\0';
        if (wanted_var (line) && nvars < REQUEST_VARS_MAX)
            env[nvars++] = line;
    }
    env[nvars] = NULL;
    return 0;
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
    for (int i = 2; i < n; i++)
        if ((unsigned char)line[i] < 0x20)
            line[i] = ' ';
    line[n] = '\n';
    (void)!write (fd, line, (size_t)n + 1);
}

static const char *request_var (char *const *env, const char *name)
{
    size_t n = strlen (name);
    for (char *const *v = env; *v; v++)
        if (strncmp (*v, name, n) == 0 && (*v)[n] == '=')
            return *v + n + 1;
    return NULL;
}

/* A step's end: the answer at once (srun waits for node 0's slurmstepd);
 * the broker's DELETE of the step's trees is deferred.  One never made
 * (the broker away) leaves them to the job's end, which deletes all. */
static void step_end (struct deferred *d, int fd, char *const *env)
{
    const char *job = request_var (env, "SLURM_JOB_ID");
    const char *step = request_var (env, "FMB_STEP");
    if (!job || !step || !valid_job_id (job) || !valid_job_id (step)) {
        fmb_log (LOG_WARNING, "a step's end without a valid job and step: refused");
        answer (fd, EXIT_USAGE, "not a job and step");
        return;
    }
    if (d->nsteps == STEPS_MAX) {
        fmb_log (LOG_WARNING,
                 "job %s step %s: %d step ends wait already: left to the job's end",
                 job,
                 step,
                 STEPS_MAX);
        answer (fd, EXIT_FAIL, "too many step ends waiting");
        return;
    }
    snprintf (
        d->steps[d->nsteps++], sizeof (d->steps[0]), "/v1/jobs/%s/steps/%s", job, step);
    answer (fd, 0, "");
}

static void schedule_retry (struct deferred *d, bool left);

/* A fresh run for the service's own background work (deferred reports
 * and step ends, opening its connection) on the kept connection: one
 * try a call, callers may be waiting behind it.  NULL: out of memory. */
static struct agent *background_run (struct agent *ag)
{
    struct agent *run = calloc (1, sizeof (*run));
    if (run) {
        run->in_service = true;
        run->single_try = true;
        run->keep = ag->keep;
    }
    return run;
}

/* The deferred work, on the kept connection; stops at a broker away.
 * Reports still kept are tried again after a back-off. */
static void run_deferred (struct agent *ag, struct deferred *d)
{
    struct fmb_error e;
    unsigned left = d->reports;
    struct agent *run = background_run (ag);
    if (!run)
        return;
    if (agent_setup (run, &ag->args) == 0) {
        for (unsigned i = 0; i < d->nsteps && !run->broker_down; i++)
            if (agent_broker_call (run, "DELETE", d->steps[i], NULL, NULL, &e) < 0)
                fmb_log (LOG_WARNING,
                         "step cleanup: %s (the job's end deletes its trees)",
                         e.text);
            else
                fmb_log (LOG_DEBUG, "step cleanup: DELETE %s done", d->steps[i]);
        if (d->reports && !run->broker_down)
            left = report_deliver_pending (run);
        else
            left = d->reports;
    }
    api_target_clear (&run->target);
    free (run);
    d->reports = false;
    d->nsteps = 0;
    d->since_ms = 0;
    schedule_retry (d, left > 0);
}

/* A wait of about 'ms': somewhere in [ms/2, 3ms/2). */
static int64_t jittered (int64_t ms)
{
    return ms / 2 + (int64_t)(random () % (ms > 0 ? ms : 1));
}

/* Kept reports left: tried again after a back-off; none: reset. */
static void schedule_retry (struct deferred *d, bool left)
{
    if (!left) {
        d->retry_at_ms = d->retry_delay_ms = 0;
        return;
    }
    d->retry_delay_ms =
        d->retry_delay_ms ? d->retry_delay_ms * 2 : REPORT_RETRY_FIRST_MS;
    if (d->retry_delay_ms > REPORT_RETRY_MAX_MS)
        d->retry_delay_ms = REPORT_RETRY_MAX_MS;
    d->retry_at_ms = fmb_monotime_ms () + jittered (d->retry_delay_ms);
}

/* Is anything kept in the report spool? */
static int spooled_one (const struct spooled_report *r, void *arg)
{
    (void)r;
    *(bool *)arg = true;
    return 1;
}

static bool reports_kept (const struct agent *ag)
{
    bool any = false;
    (void)spool_each (ag->args.state_dir, spooled_one, &any, NULL);
    return any;
}

/* The connection to the broker, opened (and authenticated, so that the
 * broker keeps it: [api] tcp_idle_timeout_s) before a job needs it.
 * Closed by the broker: opened again at a moment of its own. */
static void warm (struct agent *ag, struct deferred *d)
{
    struct fmb_error e;
    /* (one the broker closed is let go here, a Unix socket's too) */
    if (api_keep_is_open (ag->keep) || d->local_broker) {
        d->warm_at_ms = 0;
        return;
    }
    if (!d->warm_at_ms) { /* a moment of this node's within the window */
        d->warm_at_ms = fmb_monotime_ms () + (int64_t)(random () % WARM_SPREAD_MS);
        return;
    }
    if (fmb_monotime_ms () < d->warm_at_ms)
        return;
    d->warm_at_ms = 0;
    struct agent *run = background_run (ag);
    if (!run)
        return;
    if (agent_setup (run, &ag->args) == 0 && !run->target.url)
        d->local_broker = true;
    else if (run->target.url &&
             agent_broker_call (run, "GET", "/v1/health", NULL, NULL, &e) < 0)
        fmb_log (LOG_INFO, "the broker's connection, opened ahead of jobs: %s", e.text);
    else
        fmb_log (LOG_DEBUG, "the broker's connection opened ahead of jobs");
    api_target_clear (&run->target);
    free (run);
}

/* Has the caller gone (fmbroker-slurm-prolog gave up waiting, or slurmd
 * killed it at PrologEpilogTimeout)?  Its job is then not made here: it
 * ran fmbroker-cxi itself, or the job is being torn down. */
static bool caller_gone (int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll (&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* One job's prolog or epilog, as slurmd's Prolog=/Epilog= would run it,
 * in a fresh context on the service's kept connection; its exit status.
 * 'kept': a report left for the deferred work; 'why': the job's reason
 * when it failed ("" else). */
static int run_in_service (struct agent *ag,
                           serve_run_fn run_hook,
                           char *const *env,
                           bool *kept,
                           char *why,
                           size_t whylen)
{
    struct agent *run = calloc (1, sizeof (*run));
    if (!run) {
        fmb_log (LOG_ERR,
                 "job %s: the node service is out of memory",
                 request_var (env, "SLURM_JOB_ID"));
        return EXIT_FAIL;
    }
    run->in_service = true;
    run->keep = ag->keep;
    int status = run_hook (run, ag, env);
    *kept = run->delivery_detached && !run->broker_down;
    snprintf (why, whylen, "%s", status ? run->final_reason : "");
    cxilib_close (&run->lib);
    api_target_clear (&run->target);
    free (run);
    return status;
}

/* A job's prolog: made, and answered at once when slurmd's Prolog= handed
 * it (slurmd goes on to start the step, whose slurmstepd waits for the
 * job's services: nodeservice.h), or once made when the step asked
 * (FMB_SETUP: no Prolog= on this node); its 'created' report goes to d. */
static void prolog_for (struct agent *ag,
                        serve_run_fn run_hook,
                        int fd,
                        char *const *env,
                        bool answer_first,
                        struct deferred *d)
{
    const char *job = request_var (env, "SLURM_JOB_ID");
    if (caller_gone (fd)) {
        fmb_log (
            LOG_WARNING,
            "job %.128s: its prolog stopped waiting before its turn: not made here",
            job && valid_job_id (job) ? job : "?");
        return;
    }
    /* A record left from an earlier run of this job id (requeued, its
     * epilog failed) must not pass for this run's: a step that finds a
     * record does not wait for the service. */
    struct fmb_error e;
    if (job && valid_job_id (job) && jobrecord_remove (ag->args.state_dir, job, &e) < 0)
        fmb_log (LOG_WARNING, "job %s: %s", job, e.text);
    if (answer_first)
        answer (fd, 0, "");
    int64_t t0 = fmb_monotime_ms ();
    bool kept = false;
    char why[REASON_MAX];
    int status = run_in_service (ag, run_hook, env, &kept, why, sizeof (why));
    fmb_log (LOG_DEBUG,
             "job %.128s: prolog made in %lld ms (exit %d%s)",
             job && valid_job_id (job) ? job : "?",
             (long long)(fmb_monotime_ms () - t0),
             status,
             answer_first ? "" : ", for its first step");
    if (!answer_first)
        answer (fd, status, why);
    /* the 'created' report kept, to go once the job is under way */
    d->reports |= kept;
}

/* The request's SLURM_JOB_ID, or NULL once refused with why ('what'
 * names the request in the log). */
static const char *job_of (int fd, char *const *env, const char *what)
{
    const char *job = request_var (env, "SLURM_JOB_ID");
    if (job && valid_job_id (job))
        return job;
    fmb_log (LOG_WARNING, "%s without a valid job id: refused", what);
    answer (fd, EXIT_USAGE, "not a job id");
    return NULL;
}

static bool is_epilog (char *const *env)
{
    const char *ctx = request_var (env, "SLURM_SCRIPT_CONTEXT");
    return ctx && strcmp (ctx, "epilog_slurmd") == 0;
}

/* The steps' ends of 'job' still deferred are dropped at its epilog: the
 * job's end deletes all its trees. */
static void drop_steps (struct deferred *d, const char *job)
{
    char prefix[160];
    int n = snprintf (prefix, sizeof (prefix), "/v1/jobs/%s/steps/", job);
    unsigned kept = 0;
    for (unsigned i = 0; i < d->nsteps; i++)
        if (strncmp (d->steps[i], prefix, (size_t)n) != 0)
            memmove (d->steps[kept++], d->steps[i], sizeof (d->steps[0]));
    if (kept < d->nsteps)
        fmb_log (LOG_DEBUG,
                 "job %s: %u step end(s) dropped: the job's end deletes its trees",
                 job,
                 d->nsteps - kept);
    d->nsteps = kept;
}

/* A job's epilog on this node (Slurm's variables, from Epilog=
 * fmbroker-slurm-prolog): made here with the broker connection already
 * open, and answered with the exit status slurmd acts on (1: drain) and
 * why, "done" when it is 0 (a service older than this answers an epilog
 * "0" and makes nothing: the caller then runs fmbroker-cxi), or
 * NODE_SERVICE_BUSY when a service is still in use (the caller then runs
 * fmbroker-cxi, whose epilog waits for it: the service serves others
 * meanwhile).  One whose caller has gone is not made: the caller ran
 * fmbroker-cxi.  Its 'destroyed' report supersedes a 'created' kept. */
static void epilog_for (struct agent *ag,
                        serve_run_fn run_hook,
                        int fd,
                        char *const *env,
                        struct deferred *d)
{
    const char *job = job_of (fd, env, "an epilog");
    if (!job)
        return;
    if (caller_gone (fd)) {
        fmb_log (LOG_WARNING,
                 "job %s: its epilog stopped waiting before its turn: not made here",
                 job);
        return;
    }
    drop_steps (d, job);
    int64_t t0 = fmb_monotime_ms ();
    bool kept = false;
    char why[REASON_MAX];
    int status = run_in_service (ag, run_hook, env, &kept, why, sizeof (why));
    fmb_log (LOG_DEBUG,
             "job %s: epilog made in %lld ms (exit %d)",
             job,
             (long long)(fmb_monotime_ms () - t0),
             status);
    answer (fd,
            status,
            status == 0                   ? "done"
            : status == NODE_SERVICE_BUSY ? "the job's CXI services are still in use"
                                          : why);
    d->reports |= kept;
}

/* A step's setup of its job (FMB_SETUP): made here unless the job's
 * record is there (its prolog, handed over before, or another step's
 * setup made it), answered once made. */
static void setup_for (struct agent *ag,
                       serve_run_fn run_hook,
                       int fd,
                       char *const *env,
                       struct deferred *d)
{
    const char *job = job_of (fd, env, "a step's setup");
    char path[1200];
    if (!job)
        return;
    if (jobrecord_path (path, sizeof (path), ag->args.state_dir, job) < 0) {
        fmb_log (LOG_WARNING, "job %s: its record's path is too long: refused", job);
        answer (fd, EXIT_FAIL, "the record's path is too long");
        return;
    }
    if (access (path, F_OK) == 0) {
        answer (fd, 0, "");
        return;
    }
    prolog_for (ag, run_hook, fd, env, false, d);
}

/* One caller: its job's setup, prolog or epilog, a wait, or its step's
 * end, answered; the broker's bookkeeping that follows goes to d. */
static void serve_caller (struct agent *ag,
                          serve_run_fn run_hook,
                          int fd,
                          struct deferred *d)
{
    static char buf[NODE_SERVICE_REQUEST_MAX + 1];
    char *env[REQUEST_VARS_MAX + 1];
    struct fmb_error e;
    if (!caller_is_root (fd))
        return;
    if (read_request (fd, buf, env, &e) < 0) {
        fmb_log (LOG_WARNING, "%s", e.text);
        return;
    }
    unsigned nsteps = d->nsteps;
    if (request_var (env, "FMB_WAIT"))
        answer (fd, 0, ""); /* every prolog taken before is made */
    else if (request_var (env, "FMB_STEP"))
        step_end (d, fd, env);
    else if (request_var (env, "FMB_SETUP"))
        setup_for (ag, run_hook, fd, env, d);
    else if (is_epilog (env))
        epilog_for (ag, run_hook, fd, env, d);
    else
        prolog_for (ag, run_hook, fd, env, true, d);
    if ((d->reports || d->nsteps > nsteps) && d->since_ms == 0)
        d->since_ms = fmb_monotime_ms ();
}

/* The callers in line when the service stops, each served as before:
 * its socket stays until none is left, so that a step's or an epilog's
 * wait for a prolog taken here is answered here (a socket gone would say
 * "no service" while the prolog is still to be made).  One that connects
 * after the last is turned away as the socket closes: a prolog then runs
 * fmbroker-cxi itself. */
static void drain_callers (struct agent *ag,
                           serve_run_fn run_hook,
                           int lfd,
                           struct deferred *d)
{
    int fd;
    while ((fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR)
        if (fd >= 0) {
            serve_caller (ag, run_hook, fd, d);
            close (fd);
        }
}

/* Until 'at' (0: never): -1, or the ms left (0: due). */
static int64_t until (int64_t at)
{
    if (at == 0)
        return -1;
    int64_t left = at - fmb_monotime_ms ();
    return left < 0 ? 0 : left;
}

static int64_t sooner (int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* How long to wait for the next caller before the deferred work, a
 * retry of kept reports or opening the broker's connection: -1 (none)
 * forever. */
static int64_t wait_ms (const struct deferred *d)
{
    int64_t ms = sooner (until (d->retry_at_ms), until (d->warm_at_ms));
    if (d->since_ms == 0)
        return ms;
    int64_t left = d->since_ms + DEFER_MAX_MS - fmb_monotime_ms ();
    return sooner (ms, left < 0 ? 0 : left < IDLE_MS ? left : IDLE_MS);
}

int cmd_serve (struct agent *ag, serve_run_fn run_hook)
{
    struct fmb_error e;
    struct cxilib resident = {0};
    char dflt[1200];
    snprintf (
        dflt, sizeof (dflt), "%s/%s", ag->args.state_dir, JOBRECORD_SERVICE_SOCKET);
    const char *path = ag->args.listen ? ag->args.listen : dflt;
    sigset_t waiting;
    handle_signals (&waiting);
    /* each run reads the token afresh: the service keeps no copy */
    api_target_clear (&ag->target);
    int lfd = listen_at (path, &e);
    if (lfd < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return EXIT_FAIL;
    }
    if (!(ag->keep = api_keep_create ())) {
        close (lfd);
        return EXIT_FAIL;
    }
    /* libcxi stays loaded: each prolog's dlopen is then a reference */
    if (cxilib_open (ag->args.libcxi, &resident, &e) < 0)
        fmb_log (LOG_INFO, "libcxi not loaded now (%s): each prolog tries", e.text);
    fmb_log (
        LOG_NOTICE, "serving job setups, prologs, epilogs and step ends on %s", path);
    static struct deferred d; /* large: not on the stack */
    srandom ((unsigned)(fmb_monotime_ms () ^ (getpid () << 16)));
    d.warm_at_ms = fmb_monotime_ms () + (int64_t)(random () % (WARM_SPREAD_MS / 10));
    schedule_retry (&d, reports_kept (ag)); /* kept before a restart */
    while (!stopping) {
        /* callers, and the kept connection: readable when the broker
         * closed it (then opened again, at a moment of this node's) */
        struct pollfd p[2] = {
            {.fd = lfd, .events = POLLIN},
            {.fd = d.local_broker ? -1 : api_keep_fd (ag->keep), .events = POLLIN}};
        int64_t ms = wait_ms (&d);
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
        int n = ppoll (p, 2, ms < 0 ? NULL : &ts, &waiting);
        if (d.retry_at_ms && until (d.retry_at_ms) == 0)
            d.reports = true; /* the kept reports' turn */
        if ((n == 0 && d.since_ms) || (d.since_ms && wait_ms (&d) == 0) || d.reports)
            run_deferred (ag, &d); /* idle, or waited long enough */
        if (n == 0 || (n > 0 && p[1].revents))
            warm (ag, &d);
        if (n <= 0 || !p[0].revents)
            continue; /* a signal ('stopping' says which), or the broker's side */
        int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR) {
                fmb_log (LOG_WARNING, "%s: accept: %s", path, strerror (errno));
                usleep (100 * 1000); /* out of files: no busy loop */
            }
            continue;
        }
        serve_caller (ag, run_hook, fd, &d);
        close (fd);
        if (!d.retry_at_ms && !d.reports && reports_kept (ag))
            schedule_retry (&d, true); /* a report the broker did not take */
    }
    fmb_log (LOG_NOTICE, "stopping: serving those in line on %s, then no more", path);
    drain_callers (ag, run_hook, lfd, &d);
    unlink (path);
    close (lfd);
    if (d.since_ms)
        run_deferred (ag, &d);
    cxilib_close (&resident);
    api_keep_destroy (ag->keep);
    ag->keep = NULL;
    return 0;
}

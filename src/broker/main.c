/* fmbrokerd: the fabric-manager broker daemon.
 *
 * Start-up, in order: arguments; configuration (validated whole); the
 * state directory (0700) and the store (created, checked, migrated); the
 * FM client (credentials checked now); the API socket; reservations a
 * crash interrupted are resumed; the FM session starts (its first listing
 * reconciles); READY=1 to systemd; then the loop.
 *
 * The loop polls the API's sockets, the FM client's sockets and a
 * signalfd, then runs the periodic work (outbox, reconcile, probes,
 * quarantine expiry, long-poll timeouts).  SIGTERM/SIGINT: stop
 * accepting, give FM calls in flight their deadline, answer what waits,
 * commit, close.  SIGHUP: reload the configuration (config_apply.c says
 * what changes live and what waits for a restart).
 */
#include <errno.h>
#include <malloc.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "broker.h"
#include "cmdline.h"
#include "config_apply.h"
#include "events.h"
#include "fmclient.h"
#include "http.h"
#include "lifecycle.h"
#include "metrics.h"
#include "outbox.h"
#include "pass.h"
#include "reservations.h"
#include "statelock.h"
#include "store.h"
#include "timer.h"
#include "fileutil.h"
#include "log.h"
#include "monotime.h"

#define MAX_POLLFDS 1100
/* The timers say when the loop must wake (timer.h); this is only a
 * ceiling, so that a lost wake-up costs at most this much. */
#define LOOP_MAX_WAIT_MS 1000

/* SIGHUP: read the file again (with the same --set overrides on top) and
 * take what can change live; a configuration that does not load or check
 * leaves the running one in place. */
static void reload_config (struct broker *b)
{
    struct fmb_config *next = malloc (sizeof (*next));
    struct fmb_error error;
    sd_notify (0, "RELOADING=1\nSTATUS=reloading the configuration");
    int rc = -1; /* <0 failed, else how many changes wait for a restart */
    if (!next)
        fmb_errorf (&error, "out of memory");
    else if (cmdline_load_config (next, NULL, &error) == 0 &&
             broker_check_config (next, &error) == 0)
        rc = broker_apply_config (b, next, &error);
    if (rc < 0) {
        fmb_log (LOG_ERR, "reload: %s; keeping the running configuration", error.text);
        snprintf (b->reload_error, sizeof (b->reload_error), "%s", error.text);
    } else {
        b->reload_error[0] = '\0';
        fmb_log (LOG_NOTICE,
                 "reload: configuration %s applied%s",
                 b->cfg.source[0] ? b->cfg.source : "(built-in defaults)",
                 rc ? "; some changes wait for a restart (see above)" : "");
    }
    free (next);
    sd_notify (0, "READY=1\nSTATUS=serving");
}

/* The lock first: a second broker must not even open the database. */
static int open_state (struct broker *b, struct fmb_error *error)
{
    char db[PATH_MAX], key[PATH_MAX];
    if (fmb_mkdir_p (b->cfg.state_dir, 0700, error) < 0)
        return fmb_error_prefix (error, "[broker] state_dir");
    if (statelock_acquire (&b->lock, b->cfg.state_dir, error) < 0)
        return -1;
    snprintf (db, sizeof (db), "%s/fmbroker.db", b->cfg.state_dir);
    snprintf (key, sizeof (key), "%s/token.key", b->cfg.state_dir);
    if (store_open (db, key, &b->st, error) < 0)
        return -1;
    const struct store_repair *fixed = store_open_repair (b->st);
    if (fixed->objects)
        fmb_log (LOG_WARNING,
                 "store: %s was changed outside fmbroker: made again %s; %u "
                 "kept count%s put right (fmbrokerd --check-db reads the rest)",
                 db,
                 fixed->made,
                 fixed->counts,
                 fixed->counts == 1 ? "" : "s");
    broker_attach_store (b);
    return 0;
}

static int signal_fd (void)
{
    sigset_t set;
    sigemptyset (&set);
    sigaddset (&set, SIGTERM);
    sigaddset (&set, SIGINT);
    sigaddset (&set, SIGHUP);
    sigprocmask (SIG_BLOCK, &set, NULL);
    signal (SIGPIPE, SIG_IGN);
    return signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Group commit: everything a pass writes (intents, outcomes, events) is
 * one transaction, committed once, and answers wait for it (pass.h).  A
 * 'full' pass also handles FM answers and timers; the short one only HTTP. */
/* One pass over what poll() found: 'api_fds' (nh) are http_pollfds'
 * entries, 'fab_fds' (nf) fmc_pollfds'; !full: only send what the last
 * pass answered (no FM work, no accepts, no timers). */
static void run_pass (struct broker *b,
                      const struct pollfd *api_fds,
                      int nh,
                      const struct pollfd *fab_fds,
                      int nf,
                      bool full)
{
    pass_begin (b->pass);
    if (full && b->fmc)
        fmc_process (b->fmc, fab_fds, nf);
    /* also sends what earlier passes released */
    http_process (b->http, full ? api_fds : NULL, full ? nh : 0);
    if (full)
        timers_run (b->timers, now_mono ());
    else /* a resumed connection queues its answer; this run writes it */
        http_process (b->http, NULL, 0);
    pass_end (b->pass);
}

/* After a storm (a full machine's nodes connecting, RUNning, reporting)
 * the memory its connections and requests took is free but still the
 * process's: glibc keeps it.  When the loop is about to sleep after many
 * passes, it is given back to the system.  At most once every few
 * seconds (a trim walks the heap: a few ms). */
#define TRIM_AFTER_PASSES 1000
#define TRIM_EVERY_MS     5000

static void give_back_memory (int timeout_ms)
{
    static unsigned passes;
    static int64_t last_ms;
    if (++passes < TRIM_AFTER_PASSES || timeout_ms < 500)
        return;
    int64_t now = fmb_monotime_ms ();
    if (now - last_ms < TRIM_EVERY_MS)
        return;
    malloc_trim (0);
    passes = 0;
    last_ms = now;
}

/* One pass of the loop: wait at most 'max_ms', handle what is ready,
 * then the periodic work.  Returns false when a stop signal came. */
static bool loop_once (struct broker *b, int sigfd, int max_ms)
{
    struct pollfd fds[MAX_POLLFDS];
    int n = 0, nh, nf = 0;
    fds[n].fd = sigfd;
    fds[n].events = POLLIN;
    fds[n++].revents = 0;
    nh = http_pollfds (b->http, fds + n, MAX_POLLFDS - n);
    int fab_at = n + nh;
    if (b->fmc)
        nf = fmc_pollfds (b->fmc, fds + fab_at, MAX_POLLFDS - fab_at);
    n = fab_at + nf;

    int timeout = max_ms;
    int t = http_timeout_ms (b->http);
    if (t >= 0 && t < timeout)
        timeout = t;
    if (b->fmc && (t = fmc_timeout_ms (b->fmc)) >= 0 && t < timeout)
        timeout = t;
    int64_t due = timers_next_ms (b->timers, now_mono ());
    if (due >= 0 && due < timeout)
        timeout = (int)due;
    if (pass_flush_now (b->pass))
        timeout = 0;
    give_back_memory (timeout);
    if (poll (fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
        fmb_log (LOG_ERR, "poll: %s", strerror (errno));
        return false;
    }
    int64_t busy_since = fmb_monotime_us ();
    bool go_on = true;
    if (fds[0].revents & POLLIN) {
        struct signalfd_siginfo si;
        while (read (sigfd, &si, sizeof (si)) == sizeof (si)) {
            if (si.ssi_signo == SIGHUP)
                reload_config (b);
            else {
                fmb_log (
                    LOG_NOTICE, "%s: shutting down", strsignal ((int)si.ssi_signo));
                go_on = false;
            }
        }
    }
    run_pass (b, fds + 1, nh, fds + fab_at, nf, true);
    /* Send what it answered now, not after the next pass's FM work;
     * requests that arrived meanwhile are handled in a pass of their own. */
    if (pass_flush_now (b->pass))
        run_pass (b, NULL, 0, NULL, 0, false);
    pass_start_kept (b->pass); /* the FM calls the answers went before */
    /* The answers are out: the WAL's last few frames, if the store's
     * thread left them (once per WAL cycle), so that it starts over.  Its
     * fsyncs are the disk's share of the turn, like the commits'. */
    int64_t disk_us = pass_take_commit_us (b->pass), finish_from = fmb_monotime_us ();
    if (store_finish_checkpoint (b->st))
        disk_us += fmb_monotime_us () - finish_from;
    metrics_pass (b->metrics, fmb_monotime_us () - busy_since, disk_us, now_mono ());
    return go_on;
}

/* systemd's watchdog: a ping every half of its interval. */
static int64_t watchdog_ping (void *arg, int64_t now)
{
    const uint64_t *wd_usec = arg;
    (void)now;
    sd_notify (0, "WATCHDOG=1");
    return (int64_t)(*wd_usec / 2000);
}

static void shutdown_gracefully (struct broker *b, int sigfd)
{
    broker_quiesce (b);
    /* Reservations in flight get their deadline; their intent is in the
     * store either way, so cutting them short later loses nothing. */
    int64_t end = now_mono () + b->cfg.fm_reserve_timeout_ms + 500;
    while (reservations_pending (b->rsv) && now_mono () < end)
        loop_once (b, sigfd, 50);
    reservations_shutdown (b->rsv);
    outbox_steps_answer_all (b->outbox);
    events_wake (b->events, true);
    for (int i = 0; i < 5; i++) /* let the answers go out */
        loop_once (b, sigfd, 10);
}

/* Everything the broker serves with, in the order each needs the last
 * (lifecycle.c); -1 (logged) if one cannot be had.  shut_down frees what
 * there is. */
static int start (struct broker *b)
{
    struct fmb_error error;
    /* The store's damage hook reports to the events from the start. */
    if (broker_create_early (b) < 0) {
        fmb_errorf (&error, "out of memory");
        goto fail;
    }
    if (open_state (b, &error) < 0 || broker_create_serving (b, &error) < 0)
        goto fail;
    return 0;
fail:
    fmb_log (LOG_ERR, "%s", error.text);
    return -1;
}

static void shut_down (struct broker *b)
{
    broker_destroy (b);
    statelock_release (&b->lock); /* after the database is closed */
}

int main (int argc, char **argv)
{
    struct broker b = {.lock.fd = -1};
    int rc = 1;

    umask (077); /* state, keys and sockets are private unless chmod'ed on purpose */
    fmb_log_init ("fmbrokerd", LOG_INFO);
    int status = cmdline_configure (argc, argv, &b.cfg);
    if (status >= 0)
        return status;
    srandom ((unsigned)getpid () ^ (unsigned)now_mono ());
    b.started_ms = now_wall ();

    int sigfd = signal_fd ();
    if (sigfd < 0) {
        fmb_log (LOG_ERR, "signalfd: %s", strerror (errno));
        return 1;
    }
    if (start (&b) < 0)
        goto done;
    fmb_log (LOG_INFO,
             "serving on %s%s%s (cluster %s, VNIs %u-%u, FM %s)",
             b.cfg.socket,
             b.cfg.tcp[0] ? " and " : "",
             b.cfg.tcp,
             b.cfg.cluster_name,
             b.cfg.vni_min,
             b.cfg.vni_max,
             b.fmc ? b.cfg.fm_url : "none");
    sd_notify (0, "READY=1\nSTATUS=serving");

    uint64_t wd_usec = 0;
    if (sd_watchdog_enabled (0, &wd_usec) > 0)
        timer_add (b.timers, "watchdog", 0, watchdog_ping, &wd_usec);
    while (loop_once (&b, sigfd, LOOP_MAX_WAIT_MS))
        ;
    sd_notify (0, "STOPPING=1");
    shutdown_gracefully (&b, sigfd);
    rc = 0;
done:
    shut_down (&b);
    close (sigfd);
    return rc;
}

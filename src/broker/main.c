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
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "broker.h"
#include "config_apply.h"
#include "events.h"
#include "fmclient.h"
#include "fmsession.h"
#include "http.h"
#include "metrics.h"
#include "outbox.h"
#include "pass.h"
#include "ratelimit.h"
#include "reconcile.h"
#include "reservations.h"
#include "roles.h"
#include "statelock.h"
#include "store.h"
#include "svccheck.h"
#include "timer.h"
#include "routes.h"
#include "fileutil.h"
#include "log.h"
#include "monotime.h"
#include "nodeauth.h"
#include "slurmconf.h"

#define MAX_SETS    32
#define MAX_POLLFDS 1100
/* The timers say when the loop must wake (timer.h); this is only a
 * ceiling, so that a lost wake-up costs at most this much. */
#define LOOP_MAX_WAIT_MS 1000

static const char usage_text[] =
    "Usage: fmbrokerd [OPTIONS]\n"
    "Broker between resource managers and the Slingshot fabric manager: VNIs,\n"
    "multicast reservations for hardware collectives, and a local REST API.\n"
    "\n"
    "  -c, --config FILE      configuration file (default " FMB_CONFIG_PATH
    ";\n"
    "                         built-in defaults if that file does not exist)\n"
    "  -s, --set SEC.KEY=VAL  override one configuration key (repeatable),\n"
    "                         e.g. --set broker.state_dir=/tmp/fmb\n"
    "  -f, --foreground       stay in the foreground (the only mode; systemd\n"
    "                         runs it this way)\n"
    "      --check-config     run the checks start runs (keys, files, credentials,\n"
    "                         state_dir, the socket's directory) as the service\n"
    "                         user, report every problem, and exit (0 or 2, as\n"
    "                         start would); warns when slurm.conf ($SLURM_CONF or\n"
    "                         /etc/slurm/slurm.conf) lets switch/hpe_slingshot\n"
    "                         hand out VNIs from [vni] pool too\n"
    "      --user NAME        the service user --check-config checks as when run\n"
    "                         as root (default " FMB_SERVICE_USER
    ", the unit's User=)\n"
    "      --dump-config      print the effective configuration and exit\n"
    "      --check-db         read every page of STATE_DIR/fmbroker.db (SQLite's\n"
    "                         integrity_check, read-only: safe beside a running\n"
    "                         broker), compare the counts it keeps for\n"
    "                         metrics with their tables and its tables,\n"
    "                         indexes and triggers with fmbroker's, print what\n"
    "                         is wrong and exit (0: sound; 1: damaged, counts\n"
    "                         or schema wrong, or unreadable); start-up checks\n"
    "                         only a bounded part of it\n"
    "      --recount          set the counts metrics, status and health show\n"
    "                         from the tables and make missing or changed\n"
    "                         indexes and triggers again, when --check-db finds\n"
    "                         them wrong (safe beside a running broker), and exit\n"
    "      --node-token NAME  print compute node NAME's token (\"node:NAME:HMAC\"\n"
    "                         under [api] node_key_file) for the node's\n"
    "                         client_token_file, and exit\n"
    "      --rotate-node-key  make a new node key (the old one is kept as\n"
    "                         NODE_KEY.previous, still taken for [api]\n"
    "                         node_key_grace_s after a reload: give every node\n"
    "                         its new token meanwhile), and exit\n"
    "  -V, --version          print the version and exit\n"
    "  -h, --help             print this help and exit\n"
    "\n"
    "State: STATE_DIR/fmbroker.db (SQLite) and STATE_DIR/token.key (the key\n"
    "that encrypts session tokens at rest; back it up with the database).\n"
    "One broker per state directory: it holds an fcntl lock on\n"
    "STATE_DIR/fmbrokerd.lock (host and pid inside) for its whole life; a second\n"
    "one exits at once naming the holder.  --check-config says who holds it.\n"
    "API: [api] socket (default /run/fmbroker/fmbroker.sock), described in\n"
    "/usr/share/fmbroker/openapi.yaml.\n"
    "Signals: TERM/INT stop gracefully; HUP reloads the configuration (socket,\n"
    "state_dir, tcp, TLS files, FM url, auth and TLS settings, cluster_name and\n"
    "the VNI pool need a restart; the rest takes effect at once).\n"
    "\n"
    "Exit status: 0 success, 1 runtime failure, 2 usage or configuration error.\n";

static struct {
    const char *config;
    const char *sets[MAX_SETS];
    int nsets;
    bool check_config;
    bool dump_config;
    bool check_db;
    bool recount;
    const char *user; /* --check-config as root checks as this user */
    const char *node_token;
    bool rotate_node_key;
} arg_ = {.user = FMB_SERVICE_USER};

static int parse_args (int argc, char **argv)
{
    enum {
        OPT_CHECK = 256,
        OPT_DUMP,
        OPT_CHECK_DB,
        OPT_RECOUNT,
        OPT_USER,
        OPT_NODE_TOKEN,
        OPT_ROTATE
    };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"foreground", no_argument, NULL, 'f'},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"dump-config", no_argument, NULL, OPT_DUMP},
        {"check-db", no_argument, NULL, OPT_CHECK_DB},
        {"recount", no_argument, NULL, OPT_RECOUNT},
        {"user", required_argument, NULL, OPT_USER},
        {"node-token", required_argument, NULL, OPT_NODE_TOKEN},
        {"rotate-node-key", no_argument, NULL, OPT_ROTATE},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long (argc, argv, "c:s:fVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            arg_.config = optarg;
            break;
        case 's':
            if (arg_.nsets == MAX_SETS) {
                fprintf (stderr, "fmbrokerd: at most %d --set options\n", MAX_SETS);
                return -1;
            }
            arg_.sets[arg_.nsets++] = optarg;
            break;
        case 'f':
            break;
        case OPT_CHECK:
            arg_.check_config = true;
            break;
        case OPT_DUMP:
            arg_.dump_config = true;
            break;
        case OPT_CHECK_DB:
            arg_.check_db = true;
            break;
        case OPT_RECOUNT:
            arg_.recount = true;
            break;
        case OPT_USER:
            arg_.user = optarg;
            break;
        case OPT_NODE_TOKEN:
            arg_.node_token = optarg;
            break;
        case OPT_ROTATE:
            arg_.rotate_node_key = true;
            break;
        case 'V':
            printf ("fmbrokerd %s\n", FMB_VERSION);
            exit (0);
        case 'h':
            fputs (usage_text, stdout);
            exit (0);
        default:
            fputs ("Try 'fmbrokerd --help'.\n", stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "fmbrokerd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    /* Two of them would do only one, silently: an admin asking for a check
     * and a dump must not read the dump as "checked". */
    if (arg_.check_config + arg_.dump_config + arg_.check_db + arg_.recount +
            (arg_.node_token != NULL) + arg_.rotate_node_key >
        1) {
        fprintf (stderr,
                 "fmbrokerd: --check-config, --dump-config, --check-db, --recount, "
                 "--node-token and --rotate-node-key go one at a time\n");
        return -1;
    }
    return 0;
}

static void log_problem (const char *problem, void *arg)
{
    (void)arg;
    fmb_log (LOG_ERR, "%s", problem);
}

/* The file and the --set overrides; every problem is logged through
 * 'report' when given (start, --check-config), else the first is in
 * 'error' (reload). */
static int load_config (struct fmb_config *cfg,
                        fmb_config_report_f report,
                        struct fmb_error *error)
{
    const char *path = arg_.config;
    if (!path && access (FMB_CONFIG_PATH, F_OK) == 0)
        path = FMB_CONFIG_PATH;
    fmb_config_defaults (cfg);
    return fmb_config_load_all (cfg, path, arg_.sets, arg_.nsets, report, NULL, error);
}

/* SIGHUP: read the file again (with the same --set overrides on top) and
 * take what can change live; a configuration that does not load or check
 * leaves the running one in place. */
static void reload_config (struct broker *b)
{
    struct fmb_config *next = malloc (sizeof (*next));
    struct fmb_error error;
    sd_notify (0, "RELOADING=1\nSTATUS=reloading the configuration");
    if (!next)
        fmb_log (LOG_ERR, "reload: out of memory; the configuration is unchanged");
    else if (load_config (next, NULL, &error) < 0 ||
             broker_check_config (next, &error) < 0)
        fmb_log (LOG_ERR, "reload: %s; keeping the running configuration", error.text);
    else {
        int restart = broker_apply_config (b, next, &error);
        if (restart < 0)
            fmb_log (
                LOG_ERR, "reload: %s; keeping the running configuration", error.text);
        else
            fmb_log (LOG_NOTICE,
                     "reload: configuration %s applied%s",
                     b->cfg.source[0] ? b->cfg.source : "(built-in defaults)",
                     restart ? "; some changes wait for a restart (see above)" : "");
    }
    free (next);
    sd_notify (0, "READY=1\nSTATUS=serving");
}

/* Every check start runs, as this process's user; 2 if any failed. */
static int check_as_me (void *arg)
{
    const struct fmb_config *cfg = arg;
    char who[128];
    svccheck_whoami (who, sizeof (who));
    int n = broker_check_all (cfg, log_problem, NULL) +
            svccheck_config_file (cfg, log_problem, NULL);
    if (n)
        fmb_log (
            LOG_ERR, "%d problem%s found, checking as %s", n, n > 1 ? "s" : "", who);
    else
        printf ("checked as %s\n", who);
    return n ? 2 : 0;
}

/* Root checks for the service user (it may read what the service
 * cannot), in a child that has become that user; says so when it
 * could not. */
static int check_as_service (const struct fmb_config *cfg)
{
    struct fmb_error e;
    if (geteuid () != 0 || strcmp (arg_.user, "root") == 0)
        return check_as_me ((void *)cfg);
    int rc = svccheck_run_as (arg_.user, check_as_me, (void *)cfg, &e);
    if (rc >= 0)
        return rc;
    printf (
        "warning: could not check as the service user: %s; checked as root, "
        "who may read what the service cannot (--user NAME names it)\n",
        e.text);
    return check_as_me ((void *)cfg);
}

/* --check-config: the configuration, and who holds the state directory
 * (a standby's administrator wants to know before starting it). */
static int check_config (const struct fmb_config *cfg)
{
    struct fmb_error e;
    char holder[STATELOCK_HOST_MAX + 64];
    bool held;
    if (check_as_service (cfg) != 0)
        return 2;
    printf ("%s: configuration OK\n",
            cfg->source[0] ? cfg->source : "built-in defaults");
    const char *slurm_conf = getenv ("SLURM_CONF");
    char warning[1024];
    if (slurmconf_check (
            slurm_conf && *slurm_conf ? slurm_conf : SLURMCONF_DEFAULT_PATH,
            cfg->vni_min,
            cfg->vni_max,
            warning,
            sizeof (warning)) == 1)
        printf ("warning: %s\n", warning);
    /* A state directory start would create does not exist yet: no lock. */
    if (access (cfg->state_dir, F_OK) < 0) {
        printf ("state directory %s: start creates it\n", cfg->state_dir);
        return 0;
    }
    if (statelock_probe (cfg->state_dir, &held, holder, sizeof (holder), &e) < 0) {
        fprintf (stderr,
                 "state directory %s: %s (as uid %u): a broker started so cannot "
                 "use it\n",
                 cfg->state_dir,
                 e.text,
                 (unsigned)getuid ());
        return 2;
    }
    if (held)
        printf ("state directory %s: locked by a running broker (%s)\n",
                cfg->state_dir,
                holder);
    else
        printf ("state directory %s: not locked (last holder: %s)\n",
                cfg->state_dir,
                holder);
    return 0;
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
    store_set_damage_hook (b->st, events_token_damaged, b->events);
    store_set_clock (b->st, broker_wall_clock, NULL);
    return 0;
}

static void print_problem (const char *problem, void *arg)
{
    (void)arg;
    printf ("  %s\n", problem);
}

/* --check-db: the full check that start-up leaves out. */
static int check_db (const struct fmb_config *cfg)
{
    char db[PATH_MAX];
    struct fmb_error error;
    snprintf (db, sizeof (db), "%s/fmbroker.db", cfg->state_dir);
    if (store_check_full (db, print_problem, NULL, &error) < 0) {
        fmb_log (LOG_ERR, "%s", error.text);
        if (errno == EPROTO)
            fmb_log (LOG_ERR,
                     "%s: restore a backup (with token.key) or start on a new "
                     "state directory; the FM's reservations are reconciled",
                     db);
        else if (errno == EUCLEAN)
            fmb_log (LOG_ERR,
                     "%s: the jobs, VNIs and outbox are sound; only what is "
                     "derived from them is wrong (the counts metrics, status "
                     "and health show, or an index or trigger): run "
                     "fmbrokerd --recount (safe beside a running broker)",
                     db);
        return 1;
    }
    printf (
        "%s: no damage found (every page and index read, every kept count "
        "matches, every table, index and trigger is fmbroker's)\n",
        db);
    return 0;
}

/* --recount: the counts metrics show, set from the tables; the indexes
 * and triggers made again. */
static int recount (const struct fmb_config *cfg)
{
    char db[PATH_MAX];
    struct fmb_error error;
    struct store_repair fixed;
    snprintf (db, sizeof (db), "%s/fmbroker.db", cfg->state_dir);
    if (store_recount (db, &fixed, &error) < 0) {
        fmb_log (LOG_ERR, "%s", error.text);
        return 1;
    }
    if (fixed.objects)
        printf ("%s: made again: %s\n", db, fixed.made);
    printf ("%s: %u kept count%s put right\n",
            db,
            fixed.counts,
            fixed.counts == 1 ? "" : "s");
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
    b->stopping = true;
    fmsession_stop (b->fms);
    http_quiesce (b->http);
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

/* --node-token NAME, --rotate-node-key: 0, or 1 (logged). */
static int node_key_command (const struct fmb_config *cfg)
{
    struct fmb_error error;
    struct nodeauth *na = NULL;
    char token[NODEAUTH_TOKEN_MAX], path[FMB_CFG_PATH_MAX + 16];
    nodeauth_key_path (cfg, path, sizeof (path));
    if (arg_.rotate_node_key) {
        if (nodeauth_rotate (cfg, &error) < 0) {
            fmb_log (LOG_ERR, "%s", error.text);
            return 1;
        }
        printf (
            "new node key in %s; reload the broker (SIGHUP), then give each node "
            "its new token (fmbrokerd --node-token NAME) within [api] "
            "node_key_grace_s (%u s)\n",
            path,
            cfg->node_key_grace_s);
        return 0;
    }
    if (nodeauth_open (cfg, false, &na, &error) < 0 ||
        nodeauth_token (na, arg_.node_token, token, sizeof (token), &error) < 0) {
        fmb_log (LOG_ERR,
                 "%s%s",
                 error.text,
                 errno == ENOENT ? " (start the broker once with [api] tcp set, or run "
                                   "fmbrokerd --rotate-node-key)"
                                 : "");
        nodeauth_destroy (na);
        return 1;
    }
    printf ("%s\n", token);
    explicit_bzero (token, sizeof (token));
    nodeauth_destroy (na);
    return 0;
}

/* Configuration, --dump-config, --check-config, --check-db, --recount: the exit
 * status when main should end here, -1 to go on and serve. */
static int configure (int argc, char **argv, struct fmb_config *cfg)
{
    struct fmb_error error;
    if (parse_args (argc, argv) < 0)
        return 2;
    if (load_config (cfg, log_problem, &error) < 0) {
        fmb_log (LOG_ERR, "%s", error.text); /* how many, or what failed */
        return 2;
    }
    fmb_log_set_level (cfg->log_level);
    if (arg_.dump_config) {
        fmb_config_dump (cfg, stdout);
        return 0;
    }
    if (arg_.node_token || arg_.rotate_node_key)
        return node_key_command (cfg);
    /* The same checks for --check-config (as the service user) and for
     * start (as itself), every problem reported. */
    if (arg_.check_config)
        return check_config (cfg);
    if (broker_check_all (cfg, log_problem, NULL) > 0)
        return 2;
    if (arg_.check_db)
        return check_db (cfg);
    if (arg_.recount)
        return recount (cfg);
    if (!cfg->source[0])
        fmb_log (LOG_NOTICE, "no %s; using built-in defaults", FMB_CONFIG_PATH);
    if (cfg->fm_allow_plain_http && strncasecmp (cfg->fm_url, "http://", 7) == 0 &&
        cfg->fm_auth != FMB_AUTH_NONE)
        fmb_log (LOG_WARNING,
                 "[fabric_manager] allow_plain_http = true: FM credentials and "
                 "tokens travel in clear to %s",
                 cfg->fm_url);
    if (cfg->fm_insecure)
        fmb_log (LOG_WARNING,
                 "[fabric_manager] insecure = true: the FM's TLS certificate is not "
                 "verified");
    return -1;
}

/* The FM client's observer: every FM call that completed, heard by the
 * session and counted by call and result. */
static void observe_fm (const struct fmc_result *res, void *arg)
{
    struct broker *b = arg;
    if (b->fms)
        fmsession_heard (b->fms, res);
    metrics_fm_call (b->metrics, res);
}

/* Everything the broker serves with, in the order each needs the last;
 * -1 (logged) if one cannot be had.  shut_down frees what there is. */
static int start (struct broker *b)
{
    struct fmb_error error;
    /* The store's damage hook reports to the events from the start. */
    if (!(b->timers = timers_create ()) || !(b->events = events_create (b->timers)) ||
        !(b->roles = roles_create ()) || !(b->metrics = metrics_create ()))
        goto nomem;
    if (open_state (b, &error) < 0)
        goto fail;
    roles_resolve (b->roles, &b->cfg);
    if (fmc_create_from_config (&b->cfg, &b->fmc, &error) < 0)
        goto fail;
    if (b->fmc)
        fmc_set_observer (b->fmc, observe_fm, b);
    else
        fmb_log (
            LOG_NOTICE,
            "[fabric_manager] url is not set: VNI-only mode, no hardware collectives");
    /* 4096 buckets: more jobs cleaning steps at once than that recycle
     * the idlest bucket, which was full again anyway */
    b->step_limit = ratelimit_create (
        b->cfg.api_step_cleanup_rate, b->cfg.api_step_cleanup_burst, 4096);
    if (!b->step_limit)
        goto nomem;
    struct http_deps deps = {.routes = broker_routes,
                             .nroutes = broker_nroutes,
                             .route_arg = b,
                             .roles = b->roles,
                             .metrics = b->metrics,
                             .job_token_ok = broker_job_token_matches,
                             .job_token_arg = b};
    if (http_create (&b->cfg, &deps, &b->http, &error) < 0)
        goto fail;
    if (!(b->pass = pass_create (b->st, b->http, b->fmc)))
        goto nomem;
    events_attach (b->events, b->st, b->pass);
    if (!(b->fms = fmsession_create (b->timers, b->fmc, &b->cfg, b->events)) ||
        !(b->outbox = outbox_create (b)) || !(b->rsv = reservations_create (b)) ||
        !(b->rc = reconcile_create (b)))
        goto nomem;
    jobs_start (b); /* before recovery: the reservations' outcomes */
    reservations_recover (b->rsv);
    reconcile_start (b);
    return 0;
nomem:
    fmb_errorf (&error, "out of memory");
fail:
    fmb_log (LOG_ERR, "%s", error.text);
    return -1;
}

static void shut_down (struct broker *b)
{
    http_destroy (b->http);
    fmc_destroy (b->fmc);
    pass_destroy (b->pass);
    events_destroy (b->events);
    roles_destroy (b->roles);
    timers_destroy (b->timers);
    reservations_destroy (b->rsv);
    reconcile_destroy (b->rc);
    outbox_destroy (b->outbox);
    fmsession_destroy (b->fms);
    store_close (b->st);
    ratelimit_destroy (b->step_limit);
    metrics_destroy (b->metrics);
    statelock_release (&b->lock); /* after the database is closed */
}

int main (int argc, char **argv)
{
    struct broker b = {.lock.fd = -1};
    int rc = 1;

    umask (077); /* state, keys and sockets are private unless chmod'ed on purpose */
    fmb_log_init ("fmbrokerd", LOG_INFO);
    int status = configure (argc, argv, &b.cfg);
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

/* cmdline.c: fmbrokerd's command line (cmdline.h): its options, the
 * configuration (file and --set overrides), and the modes that exit
 * without serving: --dump-config, --check-config, --check-db, --recount,
 * --node-token and --rotate-node-key. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdline.h"
#include "config_apply.h"
#include "fmcheck.h"
#include "log.h"
#include "nodeauth.h"
#include "slurmconf.h"
#include "statelock.h"
#include "store.h"
#include "svccheck.h"

#define MAX_SETS 32

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
    "      --fm               with --check-config: also make the FM session and\n"
    "                         one call on its collectives API (GET of the jobs\n"
    "                         listing, which changes nothing), as the service\n"
    "                         user, and name what is wrong: the URL's path or\n"
    "                         port, the credentials, the CA (exit 2)\n"
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
    bool user_given;
    bool check_fm; /* --check-config --fm */
    const char *node_token;
    bool rotate_node_key;
} arg_ = {.user = FMB_SERVICE_USER};

/* The modes and the options that go with one: 0, or -1 (said). */
static int check_modes (void)
{
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
    /* Without --check-config it would change nothing, and the admin would
     * believe the check ran as that user. */
    if (arg_.user_given && !arg_.check_config) {
        fprintf (stderr, "fmbrokerd: --user goes with --check-config\n");
        return -1;
    }
    if (arg_.check_fm && !arg_.check_config) {
        fprintf (stderr, "fmbrokerd: --fm goes with --check-config\n");
        return -1;
    }
    return 0;
}

/* 0: go on; 1: done (--help, --version printed); -1: bad usage (said). */
static int parse_args (int argc, char **argv)
{
    enum {
        OPT_CHECK = 256,
        OPT_DUMP,
        OPT_CHECK_DB,
        OPT_RECOUNT,
        OPT_USER,
        OPT_FM,
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
        {"fm", no_argument, NULL, OPT_FM},
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
            arg_.user_given = true;
            break;
        case OPT_FM:
            arg_.check_fm = true;
            break;
        case OPT_NODE_TOKEN:
            arg_.node_token = optarg;
            break;
        case OPT_ROTATE:
            arg_.rotate_node_key = true;
            break;
        case 'V':
            printf ("fmbrokerd %s\n", FMB_VERSION);
            return 1;
        case 'h':
            fputs (usage_text, stdout);
            return 1;
        default:
            fputs ("Try 'fmbrokerd --help'.\n", stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "fmbrokerd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return check_modes ();
}

static void log_problem (const char *problem, void *arg)
{
    (void)arg;
    fmb_log (LOG_ERR, "%s", problem);
}

/* The file and the --set overrides; every problem is logged through
 * 'report' when given (start, --check-config), else the first is in
 * 'error' (reload). */
int cmdline_load_config (struct fmb_config *cfg,
                         fmb_config_report_f report,
                         struct fmb_error *error)
{
    const char *path = arg_.config;
    if (!path && access (FMB_CONFIG_PATH, F_OK) == 0)
        path = FMB_CONFIG_PATH;
    fmb_config_defaults (cfg);
    return fmb_config_load_all (cfg, path, arg_.sets, arg_.nsets, report, NULL, error);
}

/* Every check start runs, as this process's user; 2 if any failed. */
static int check_as_me (void *arg)
{
    const struct fmb_config *cfg = arg;
    char who[128];
    svccheck_whoami (who, sizeof (who));
    int n = broker_check_all (cfg, SVCCHECK_UNIT_DIRS, log_problem, NULL) +
            svccheck_config_file (cfg, log_problem, NULL);
    /* the FM with the credentials just checked (as this user) */
    if (n == 0 && arg_.check_fm)
        n = fmcheck_run (cfg, log_problem, NULL);
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
    char holder[STATELOCK_HOST_MAX + 64] = "";
    bool held = false;
    if (check_as_service (cfg) != 0)
        return 2;
    /* A state directory start would create does not exist yet: no lock. */
    bool state_exists = access (cfg->state_dir, F_OK) == 0;
    if (state_exists &&
        statelock_probe (cfg->state_dir, &held, holder, sizeof (holder), &e) < 0) {
        fprintf (stderr,
                 "state directory %s: %s (as uid %u): a broker started so cannot "
                 "use it\n",
                 cfg->state_dir,
                 e.text,
                 (unsigned)getuid ());
        return 2;
    }
    /* Start would exit 1 ("another broker is listening"), and under the
     * unit be restarted every few seconds: a broker that does not hold
     * this state directory answers on this socket. */
    if (!held && svccheck_socket_listening (cfg->socket)) {
        fmb_log (LOG_ERR,
                 "[api] socket %s: another broker is listening there (it does not "
                 "hold state directory %s): this one would exit at start; stop "
                 "that one, or give each its own socket",
                 cfg->socket,
                 cfg->state_dir);
        return 2;
    }
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
    if (!state_exists)
        printf ("state directory %s: start creates it\n", cfg->state_dir);
    else if (held)
        printf ("state directory %s: locked by a running broker (%s)\n",
                cfg->state_dir,
                holder);
    else
        printf ("state directory %s: not locked (last holder: %s)\n",
                cfg->state_dir,
                holder);
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
int cmdline_configure (int argc, char **argv, struct fmb_config *cfg)
{
    struct fmb_error error;
    int parsed = parse_args (argc, argv);
    if (parsed != 0)
        return parsed < 0 ? 2 : 0;
    if (cmdline_load_config (cfg, log_problem, &error) < 0) {
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
    if (broker_check_all (cfg, 0, log_problem, NULL) > 0)
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
    char root_state[FMB_CFG_PATH_MAX * 3 + 512];
    if (svccheck_root_over_state (cfg, root_state, sizeof (root_state)))
        fmb_log (LOG_WARNING, "%s", root_state);
    return -1;
}

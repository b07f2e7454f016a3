/* fmbrokerd: the fabric-manager broker daemon.
 *
 * At this stage it loads the configuration, opens (creating or migrating)
 * the state database and prints the broker's status; serving the REST API
 * and talking to the fabric manager come with the broker proper.
 *
 * Startup order: parse arguments, load and validate the configuration,
 * create the state directory (0700), open the store, report.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fileutil.h"
#include "log.h"
#include "store.h"

#define MAX_SETS 32

static const char usage_text[] =
    "Usage: fmbrokerd [OPTIONS]\n"
    "Broker between resource managers and the Slingshot fabric manager.\n"
    "\n"
    "  -c, --config FILE      configuration file (default " FMB_CONFIG_PATH
    ";\n"
    "                         built-in defaults if that file does not exist)\n"
    "  -s, --set SEC.KEY=VAL  override one configuration key (repeatable),\n"
    "                         e.g. --set broker.state_dir=/tmp/fmb\n"
    "  -f, --foreground       stay in the foreground (the only mode; systemd\n"
    "                         runs it this way)\n"
    "      --check-config     validate the configuration and exit\n"
    "      --dump-config      print the effective configuration and exit\n"
    "  -V, --version          print the version and exit\n"
    "  -h, --help             print this help and exit\n"
    "\n"
    "State: STATE_DIR/fmbroker.db (SQLite) and STATE_DIR/token.key (the key\n"
    "that encrypts session tokens at rest; back it up with the database).\n"
    "\n"
    "Exit status: 0 success, 1 runtime failure, 2 usage or configuration error.\n";

static struct {
    const char *config;
    const char *sets[MAX_SETS];
    int nsets;
    bool check_config;
    bool dump_config;
} arg_;

static int parse_args (int argc, char **argv)
{
    enum { OPT_CHECK = 256, OPT_DUMP };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"set", required_argument, NULL, 's'},
        {"foreground", no_argument, NULL, 'f'},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"dump-config", no_argument, NULL, OPT_DUMP},
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
    return 0;
}

static int load_config (struct fmb_config *cfg, struct fmb_error *error)
{
    fmb_config_defaults (cfg);
    if (arg_.config) {
        if (fmb_config_load (cfg, arg_.config, error) < 0)
            return -1;
    } else if (access (FMB_CONFIG_PATH, F_OK) == 0) {
        if (fmb_config_load (cfg, FMB_CONFIG_PATH, error) < 0)
            return -1;
    }
    for (int i = 0; i < arg_.nsets; i++)
        if (fmb_config_set (cfg, arg_.sets[i], error) < 0)
            return -1;
    return 0;
}

static int print_status (struct store *st, const char *db, struct fmb_error *error)
{
    unsigned counts[4], held, quarantined, depth, cursor;
    int64_t last_event;
    for (int s = STORE_JOB_ACTIVE; s <= STORE_JOB_LOST; s++)
        if (store_job_count (st, s, &counts[s], error) < 0)
            return -1;
    if (store_vni_counts (st, &held, &quarantined, error) < 0 ||
        store_outbox_depth (st, &depth, error) < 0 ||
        store_vni_cursor (st, &cursor, error) < 0 ||
        store_event_last (st, &last_event, error) < 0)
        return -1;
    printf ("database:       %s (schema %d)\n", db, store_file_version (st));
    printf ("jobs:           %u active, %u releasing, %u released, %u lost\n",
            counts[STORE_JOB_ACTIVE],
            counts[STORE_JOB_RELEASING],
            counts[STORE_JOB_RELEASED],
            counts[STORE_JOB_LOST]);
    printf ("vnis:           %u held, %u quarantined, cursor %u\n",
            held,
            quarantined,
            cursor);
    printf ("outbox:         %u pending FM operations\n", depth);
    printf ("events:         last sequence %lld\n", (long long)last_event);
    return 0;
}

int main (int argc, char **argv)
{
    struct fmb_config cfg;
    struct fmb_error error;
    struct store *st = NULL;
    char db[PATH_MAX], key[PATH_MAX];

    umask (077); /* state, keys and sockets are private unless chmod'ed on purpose */
    fmb_log_init ("fmbrokerd", LOG_INFO);
    if (parse_args (argc, argv) < 0)
        return 2;
    if (load_config (&cfg, &error) < 0) {
        fmb_log (LOG_ERR, "%s", error.text);
        return 2;
    }
    fmb_log_set_level (cfg.log_level);
    if (arg_.dump_config) {
        fmb_config_dump (&cfg, stdout);
        return 0;
    }
    if (arg_.check_config) {
        printf ("%s: configuration OK\n",
                cfg.source[0] ? cfg.source : "built-in defaults");
        return 0;
    }
    if (!cfg.source[0])
        fmb_log (LOG_NOTICE, "no %s; using built-in defaults", FMB_CONFIG_PATH);
    if (!cfg.fm_url[0])
        fmb_log (LOG_NOTICE,
                 "[fabric_manager] url is not set: VNI-only mode, no hardware "
                 "collectives");

    if (fmb_mkdir_p (cfg.state_dir, 0700, &error) < 0) {
        fmb_log (LOG_ERR, "[broker] state_dir: %s", error.text);
        return 1;
    }
    snprintf (db, sizeof (db), "%s/fmbroker.db", cfg.state_dir);
    snprintf (key, sizeof (key), "%s/token.key", cfg.state_dir);
    if (store_open (db, key, &st, &error) < 0) {
        fmb_log (LOG_ERR, "%s", error.text);
        return 1;
    }
    int rc = print_status (st, db, &error);
    if (rc < 0)
        fmb_log (LOG_ERR, "%s", error.text);
    store_close (st);
    return rc < 0 ? 1 : 0;
}

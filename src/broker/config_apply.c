/* config_apply.c: the checks start-up and --check-config share, and the
 * live reload (SIGHUP).
 *
 * broker_check_config is the one place that decides whether a loaded
 * configuration can start: beyond what the parser checks (syntax, types,
 * rules between keys), it opens what start opens -- the FM credentials,
 * CA and client certificate files, the TCP listener's tokens file,
 * certificate and key -- without listening or calling the FM.  So a
 * configuration that --check-config passes does not then fail at start
 * for a reason it could have seen.
 *
 * Reload keeps the state directory, the listeners and the FM session:
 * keys tied to them keep their old values and are logged as needing a
 * restart.  Everything read at use time (log level, role users and
 * groups, the tokens file, hwcoll sizing, intervals, timeouts of RUN,
 * VNI counts per job, retention) takes effect at once.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "broker.h"
#include "config_apply.h"
#include "fmclient.h"
#include "http.h"
#include "reconcile.h"
#include "roles.h"
#include "svccheck.h"
#include "callerid.h"
#include "fileutil.h"
#include "log.h"
#include "nsscache.h"

/* A file start reads: 0, or 1 after reporting. */
static int check_readable (
    const char *key, const char *path, bool secret, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    char *text = NULL;
    if (!path[0])
        return 0;
    if ((secret && fmb_check_private_file (path, &error) < 0) ||
        fmb_read_file (path, 1024 * 1024, false, &text, NULL, &error) < 0) {
        fmb_error_prefix (&error, "%s", key);
        report (error.text, arg);
        return 1;
    }
    explicit_bzero (text, strlen (text));
    free (text);
    return 0;
}

static int check_fm (const struct fmb_config *cfg, svccheck_report_f report, void *arg)
{
    struct fmb_error error;
    if (!cfg->fm_url[0])
        return 0;
    if (cfg->fm_auth != FMB_AUTH_NONE) {
        const char *dir = fmb_config_auth_dir (cfg);
        struct stat st;
        if (stat (dir, &st) < 0 || !S_ISDIR (st.st_mode)) {
            int saved = stat (dir, &st) < 0 ? errno : ENOTDIR;
            fmb_errorf (
                &error, "[fabric_manager] auth_dir %s: %s", dir, strerror (saved));
            report (error.text, arg);
            return 1; /* the credentials in it cannot be read either */
        }
    }
    int n = check_readable (
        "[fabric_manager] ca_file", cfg->fm_ca_file, false, report, arg);
    n += check_readable (
        "[fabric_manager] mtls_cert", cfg->fm_mtls_cert, false, report, arg);
    n += check_readable (
        "[fabric_manager] mtls_key", cfg->fm_mtls_key, true, report, arg);
    /* The same constructor start uses: credentials present, private, not empty. */
    struct fmc *fmc = NULL;
    if (fmc_create_from_config (cfg, &fmc, &error) < 0) {
        report (error.text, arg);
        return n + 1;
    }
    fmc_destroy (fmc);
    return n;
}

int broker_check_all (const struct fmb_config *cfg,
                      unsigned flags,
                      svccheck_report_f report,
                      void *arg)
{
    return check_fm (cfg, report, arg) + callerid_check_files (cfg, report, arg) +
           svccheck_paths (cfg, flags, report, arg);
}

struct first_problem {
    struct fmb_error *error;
    int count;
};

static void keep_first (const char *problem, void *arg)
{
    struct first_problem *f = arg;
    if (f->count++ == 0)
        fmb_errorf (f->error, "%s", problem);
}

int broker_check_config (const struct fmb_config *cfg, struct fmb_error *error)
{
    struct first_problem f = {.error = error};
    if (broker_check_all (cfg, 0, keep_first, &f) == 0)
        return 0;
    if (f.count > 1) {
        char first[sizeof (error->text)];
        snprintf (first, sizeof (first), "%s", error->text);
        fmb_errorf (error,
                    "%s (and %d more: fmbrokerd --check-config lists them)",
                    first,
                    f.count - 1);
    }
    errno = EINVAL;
    return -1;
}

/* Keys reload cannot change: they name what the running broker holds
 * open (state, listeners, the FM session) or what its records mean. */
#define RESTART_STR(field, key)                      \
    {                                                \
        key, offsetof (struct fmb_config, field),    \
            sizeof (((struct fmb_config *)0)->field) \
    }
static const struct {
    const char *key;
    size_t offset;
    size_t size;
} restart_keys[] = {
    RESTART_STR (cluster_name, "[broker] cluster_name"),
    RESTART_STR (state_dir, "[broker] state_dir"),
    RESTART_STR (socket, "[api] socket"),
    /* the connection table, listen queue and step buckets are sized at start */
    RESTART_STR (api_max_connections, "[api] max_connections"),
    RESTART_STR (api_max_connections_per_user, "[api] max_connections_per_user"),
    RESTART_STR (api_reserved_connections, "[api] reserved_connections"),
    RESTART_STR (api_request_timeout_ms, "[api] request_timeout_ms"),
    RESTART_STR (api_listen_backlog, "[api] listen_backlog"),
    RESTART_STR (api_step_cleanup_rate, "[api] step_cleanup_rate"),
    RESTART_STR (api_step_cleanup_burst, "[api] step_cleanup_burst"),
    RESTART_STR (tcp, "[api] tcp"),
    RESTART_STR (tls_cert, "[api] tls_cert"),
    RESTART_STR (tls_key, "[api] tls_key"),
    RESTART_STR (tls_priorities, "[api] tls_priorities"),
    RESTART_STR (tls_client_ca, "[api] tls_client_ca"),
    RESTART_STR (tcp_max_connections, "[api] tcp_max_connections"),
    RESTART_STR (tcp_max_unauthenticated, "[api] tcp_max_unauthenticated"),
    RESTART_STR (tcp_listen_backlog, "[api] tcp_listen_backlog"),
    RESTART_STR (tcp_idle_timeout_s, "[api] tcp_idle_timeout_s"),
    RESTART_STR (tls_threads, "[api] tls_threads"),
    RESTART_STR (fm_url, "[fabric_manager] url"),
    RESTART_STR (fm_auth, "[fabric_manager] auth"),
    RESTART_STR (fm_auth_dir, "[fabric_manager] auth_dir"),
    RESTART_STR (fm_ca_file, "[fabric_manager] ca_file"),
    RESTART_STR (fm_mtls_cert, "[fabric_manager] mtls_cert"),
    RESTART_STR (fm_mtls_key, "[fabric_manager] mtls_key"),
    RESTART_STR (fm_insecure, "[fabric_manager] insecure"),
    RESTART_STR (fm_allow_plain_http, "[fabric_manager] allow_plain_http"),
    RESTART_STR (fm_timeout_ms, "[fabric_manager] timeout_ms"),
    RESTART_STR (fm_max_connections, "[fabric_manager] max_connections"),
    RESTART_STR (vni_min, "[vni] pool"),
    RESTART_STR (vni_max, "[vni] pool"),
};

int broker_apply_config (struct broker *b,
                         struct fmb_config *next,
                         struct fmb_error *error)
{
    int restart = 0;
    const char *said = NULL; /* one key may be two fields ([vni] pool) */
    for (size_t i = 0; i < sizeof (restart_keys) / sizeof (restart_keys[0]); i++) {
        char *now = (char *)&b->cfg + restart_keys[i].offset;
        char *want = (char *)next + restart_keys[i].offset;
        if (memcmp (now, want, restart_keys[i].size) != 0) {
            if (!said || strcmp (said, restart_keys[i].key) != 0) {
                fmb_log (LOG_WARNING,
                         "reload: %s changed; it takes effect at the next restart",
                         restart_keys[i].key);
                restart++;
            }
            said = restart_keys[i].key;
            memcpy (want, now, restart_keys[i].size);
        }
    }
    if (b->cfg.tcp[0])
        restart += http_tls_changed (b->http, &b->cfg);
    if (strcmp (b->cfg.tokens_file, next->tokens_file) != 0 || b->cfg.tcp[0]) {
        if (http_reload_tokens (b->http, next, error) < 0)
            return -1;
    }
    if (next->reconcile_interval_s != b->cfg.reconcile_interval_s)
        reconcile_reschedule (b->rc, next->reconcile_interval_s);
    b->cfg = *next;
    nss_cache_flush (); /* the roles' groups may have changed */
    roles_resolve (b->roles, &b->cfg);
    fmb_log_set_level (b->cfg.log_level);
    return restart;
}

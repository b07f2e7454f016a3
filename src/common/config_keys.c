/* config_keys.c: the table of every fmbroker.conf key, and what is done
 * by key (config_keys.h).
 *
 * Defaults: see cfg_keys[] below (and deploy/fmbroker.conf.example, which
 * a test keeps in step with this table).
 */
#include "config_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "config_values.h"
#include "log.h"

#define F(member) \
    offsetof (struct fmb_config, member), sizeof (((struct fmb_config *)0)->member)

const char *const cfg_auth_values[] = {"oauth", "basic", "none", NULL};
static const char *const hwcoll_mode_values[] = {"auto", "request", NULL};
static const char *const client_cert_values[] = {"none", "optional", "required", NULL};

/* clang-format off */
const struct cfg_key cfg_keys[] = {
    /* section          key                   type           min  max       default */
    { "broker",         "cluster_name",       CFG_STRING,    0,   0,        "cluster",
      F (cluster_name), cfg_check_cluster, NULL },
    { "broker",         "state_dir",          CFG_STRING,    0,   0,        "/var/lib/fmbroker",
      F (state_dir), cfg_check_abs_path, NULL },
    { "broker",         "log_level",          CFG_LOGLEVEL,  0,   0,        "info",
      F (log_level), NULL, NULL },
    /* 0 turns the periodic pass off; reconnects still reconcile. */
    { "broker",         "reconcile_interval_s", CFG_UINT,    0,   86400,    "30",
      F (reconcile_interval_s), NULL, NULL },
    /* 0 keeps every released job and event forever. */
    { "broker",         "retain_days",        CFG_UINT,    0,   36500,    "30",
      F (retain_days), NULL, NULL },
    /* false: FM reservations with our prefix that this broker has no
     * record of are reported (foreign_reservation), not deleted. */
    { "broker",         "reap_foreign",       CFG_BOOL,    0,   1,        "false",
      F (reap_foreign), NULL, NULL },

    { "api",            "socket",             CFG_STRING,    0,   0,        "/run/fmbroker/fmbroker.sock",
      F (socket), cfg_check_abs_path, NULL },
    { "api",            "tcp",                CFG_STRING,    0,   0,        "",
      F (tcp), cfg_check_hostport, NULL },
    { "api",            "tls_cert",           CFG_STRING,    0,   0,        "",
      F (tls_cert), cfg_check_path_or_empty, NULL },
    { "api",            "tls_key",            CFG_STRING,    0,   0,        "",
      F (tls_key), cfg_check_path_or_empty, NULL },
    { "api",            "tokens_file",        CFG_STRING,    0,   0,        "",
      F (tokens_file), cfg_check_path_or_empty, NULL },
    /* true: an agent token may also RUN a job (a node's RUN, Slurm's
     * launch setup without PrologSlurmctld). */
    { "api",            "agent_run",          CFG_BOOL,      0,   1,        "false",
      F (api_agent_run), NULL, NULL },
    /* With agent_run: a node's RUN of a new job is refused while the node
     * is in this many jobs that hold something (issue 51: one node's
     * credential must not take the VNI pool). */
    { "api",            "node_max_jobs",      CFG_UINT,      1,   1000000,  "256",
      F (api_node_max_jobs), NULL, NULL },
    /* A Slurm compute node's own: true, the job's setup on the node (the
     * node service's, or a Prolog=) makes the job's RUN.  A client key of its own,
     * not agent_run: a typo in a broker key must not stop the clients. */
    { "api",            "node_run",           CFG_BOOL,      0,   1,        "false",
      F (api_node_run), NULL, NULL },
    { "api",            "rm_users",           CFG_STRING,    0,   0,        FMB_RM_USERS_DEFAULT,
      F (rm_users), cfg_check_names, NULL },
    { "api",            "admin_users",        CFG_STRING,    0,   0,        "root",
      F (admin_users), cfg_check_names, NULL },
    { "api",            "admin_groups",       CFG_STRING,    0,   0,        "",
      F (admin_groups), cfg_check_names, NULL },
    /* Fair share of the API (promise 7): see fmbroker.conf(5). */
    { "api",            "max_connections",    CFG_UINT,      16,  65536,    "1024",
      F (api_max_connections), NULL, NULL },
    { "api",            "max_connections_per_user", CFG_UINT, 1,  65536,    "32",
      F (api_max_connections_per_user), NULL, NULL },
    { "api",            "reserved_connections", CFG_UINT,    0,   65536,    "64",
      F (api_reserved_connections), NULL, NULL },
    { "api",            "request_timeout_ms", CFG_UINT,      100, 600000,   "10000",
      F (api_request_timeout_ms), NULL, NULL },
    { "api",            "listen_backlog",     CFG_UINT,      1,   65535,    "128",
      F (api_listen_backlog), NULL, NULL },
    /* Step cleanups per job from token holders and agents (rm and admin
     * callers are not limited): a token bucket. */
    { "api",            "step_cleanup_rate",  CFG_UINT,      1,   100000,   "20",
      F (api_step_cleanup_rate), NULL, NULL },
    { "api",            "step_cleanup_burst", CFG_UINT,      1,   1000000,  "200",
      F (api_step_cleanup_burst), NULL, NULL },
    /* Clients (fmbroker-cxi, fmbroker) on hosts without the socket. */
    { "api",            "broker_url",         CFG_STRING,    0,   0,        "",
      F (broker_url), cfg_check_https_urls, NULL },
    { "api",            "client_token_file",  CFG_STRING,    0,   0,        "",
      F (client_token_file), cfg_check_path_or_empty, NULL },
    { "api",            "client_ca_file",     CFG_STRING,    0,   0,        "",
      F (client_ca_file), cfg_check_path_or_empty, NULL },
    /* Compute nodes: each its own token (fmbrokerd --node-token NAME). */
    { "api",            "node_key_file",      CFG_STRING,    0,   0,        "",
      F (node_key_file), cfg_check_path_or_empty, NULL },
    { "api",            "node_key_grace_s",   CFG_UINT,      0,   31536000, "86400",
      F (node_key_grace_s), NULL, NULL },
    { "api",            "revoked_nodes",      CFG_STRING,    0,   0,        "",
      F (revoked_nodes), cfg_check_names, NULL },
    { "api",            "shared_agent_token", CFG_BOOL,      0,   1,        "false",
      F (shared_agent_token), NULL, NULL },
    /* 0: sized to the process's file limit (fmbroker.conf(5)). */
    { "api",            "tcp_max_connections", CFG_UINT,     0,   65536,    "0",
      F (tcp_max_connections), NULL, NULL },
    { "api",            "tcp_max_unauthenticated", CFG_UINT, 0,   65536,    "0",
      F (tcp_max_unauthenticated), NULL, NULL },
    /* Of those, from one address (an IPv6 one's /64): a few hundred
     * addresses cannot fill the rest (issue 51). */
    { "api",            "tcp_max_unauthenticated_per_address", CFG_UINT, 1, 65536, "8",
      F (tcp_max_unauthenticated_per_address), NULL, NULL },
    /* 0: net.core.somaxconn, the most the kernel takes. */
    { "api",            "tcp_listen_backlog", CFG_UINT,      0,   1000000,  "0",
      F (tcp_listen_backlog), NULL, NULL },
    /* 0: an authenticated connection stays while its peer lives. */
    { "api",            "tcp_idle_timeout_s", CFG_UINT,      0,   31536000, "0",
      F (tcp_idle_timeout_s), NULL, NULL },
    /* 0: one a CPU, at most 8. */
    { "api",            "tls_threads",        CFG_UINT,      0,   64,       "0",
      F (tls_threads), NULL, NULL },
    { "api",            "tls_priorities",     CFG_STRING,    0,   0,        FMB_TLS_PRIORITIES_DEFAULT,
      F (tls_priorities), NULL, NULL },
    { "api",            "tls_client_ca",      CFG_STRING,    0,   0,        "",
      F (tls_client_ca), cfg_check_path_or_empty, NULL },
    { "api",            "tls_client_cert",    CFG_ENUM,      0,   0,        "none",
      F (tls_client_cert), NULL, client_cert_values },

    /* An empty url runs the broker VNI-only (no hardware collectives). */
    { "fabric_manager", "url",                CFG_STRING,    0,   0,        "",
      F (fm_url), cfg_check_url, NULL },
    { "fabric_manager", "auth",               CFG_ENUM,      0,   0,        "oauth",
      F (fm_auth), NULL, cfg_auth_values },
    /* Empty: /etc/wlm-client-auth for oauth, /etc/fmsim for basic, as Slurm. */
    { "fabric_manager", "auth_dir",           CFG_STRING,    0,   0,        "",
      F (fm_auth_dir), cfg_check_path_or_empty, NULL },
    { "fabric_manager", "ca_file",            CFG_STRING,    0,   0,        "",
      F (fm_ca_file), cfg_check_path_or_empty, NULL },
    { "fabric_manager", "mtls_cert",          CFG_STRING,    0,   0,        "",
      F (fm_mtls_cert), cfg_check_path_or_empty, NULL },
    { "fabric_manager", "mtls_key",           CFG_STRING,    0,   0,        "",
      F (fm_mtls_key), cfg_check_path_or_empty, NULL },
    { "fabric_manager", "insecure",           CFG_BOOL,      0,   1,        "false",
      F (fm_insecure), NULL, NULL },
    /* auth = oauth or basic over an http:// url sends credentials and
     * tokens in clear: refused unless this says so (and then warned of). */
    { "fabric_manager", "allow_plain_http",   CFG_BOOL,      0,   1,        "false",
      F (fm_allow_plain_http), NULL, NULL },
    { "fabric_manager", "timeout_ms",         CFG_UINT,      100, 600000,   "10000",
      F (fm_timeout_ms), NULL, NULL },
    { "fabric_manager", "reserve_timeout_ms", CFG_UINT,      1,   60000,    "2000",
      F (fm_reserve_timeout_ms), NULL, NULL },
    { "fabric_manager", "max_connections",    CFG_UINT,      1,   1024,     "16",
      F (fm_max_connections), NULL, NULL },

    { "hwcoll",         "mode",               CFG_ENUM,      0,   0,        "auto",
      F (hwcoll_mode), NULL, hwcoll_mode_values },
    { "hwcoll",         "min_nodes",          CFG_UINT,      1,   1000000,  "64",
      F (hwcoll_min_nodes), NULL, NULL },
    /* 0: size with HPE's formula from the four keys below. */
    { "hwcoll",         "addrs_per_job",      CFG_UINT,      0,   8192,     "0",
      F (hwcoll_addrs_per_job), NULL, NULL },
    { "hwcoll",         "total_addrs",        CFG_UINT,      1,   8192,     "4086",
      F (hwcoll_total_addrs), NULL, NULL },
    { "hwcoll",         "system_nodes",       CFG_UINT,      0,   1000000,  "0",
      F (hwcoll_system_nodes), NULL, NULL },
    { "hwcoll",         "jobs_per_node",      CFG_UINT,      1,   1024,     "1",
      F (hwcoll_jobs_per_node), NULL, NULL },

    { "vni",            "pool",               CFG_VNI_RANGE, 1,   65535,    "1024-65535",
      F (vni_min), NULL, NULL },
    { "vni",            "per_job",            CFG_UINT,      0,   4,        "1",
      F (vni_per_job), NULL, NULL },
    /* 4: a CXI service holds at most 4 VNIs. */
    { "vni",            "max_per_job",        CFG_UINT,      0,   4,        "4",
      F (vni_max_per_job), NULL, NULL },
    { "vni",            "quarantine_s",       CFG_UINT,      0,   604800,   "300",
      F (vni_quarantine_s), NULL, NULL },
    /* VNIs the site keeps out of the pool (system services), beside 1
     * and 10, which the pool may never hold (config_rules.c). */
    { "vni",            "reserved",           CFG_STRING,    0,   0,        "",
      F (vni_reserved), cfg_check_vni_list, NULL },

    { "cxi",            "tcs",                CFG_TCS,       0,   0,        "LOW_LATENCY,BEST_EFFORT",
      F (cxi_tcs), NULL, NULL },
    /* What a job may ask for in RUN (Slurm: --fmb-tcs); DEDICATED_ACCESS
     * is left out by default as Slurm's own plugin leaves it to admins. */
    { "cxi",            "allowed_tcs",        CFG_TCS,       0,   0,        "LOW_LATENCY,BULK_DATA,BEST_EFFORT",
      F (cxi_allowed_tcs), NULL, NULL },
    { "cxi",            "limits",             CFG_CXI_LIMITS, 0,  0,        "",
      F (cxi_limits_text), NULL, NULL },
    { "cxi",            "libcxi",             CFG_STRING,    0,   0,        "libcxi.so.1",
      F (cxi_libcxi), NULL, NULL },
};
/* clang-format on */

#define NKEYS (sizeof (cfg_keys) / sizeof (cfg_keys[0]))
_Static_assert(NKEYS <= FMB_CFG_KEYS_MAX, "raise FMB_CFG_KEYS_MAX");
const size_t cfg_nkeys = NKEYS;

/* CFG_ENUM: one of k->values (any case), stored as its index. */
static int apply_enum (const struct cfg_key *k,
                       const char *value,
                       unsigned *field,
                       struct fmb_error *error)
{
    for (unsigned i = 0; k->values[i]; i++)
        if (strcasecmp (value, k->values[i]) == 0) {
            *field = i;
            return 0;
        }
    char list[128] = "";
    for (unsigned i = 0; k->values[i]; i++) {
        strncat (list, i ? "|" : "", sizeof (list) - strlen (list) - 1);
        strncat (list, k->values[i], sizeof (list) - strlen (list) - 1);
    }
    return fmb_errorf (error, "must be one of %s", list);
}

/* CFG_VNI_RANGE: "MIN-MAX" into vni_min and vni_max. */
static int apply_vni_range (struct fmb_config *cfg,
                            const struct cfg_key *k,
                            const char *value,
                            struct fmb_error *error)
{
    unsigned lo, hi;
    char buf[64];
    char *dash;
    if (snprintf (buf, sizeof (buf), "%s", value) >= (int)sizeof (buf) ||
        !(dash = strchr (buf, '-')))
        return fmb_errorf (error, "must be MIN-MAX, e.g. 1024-65535");
    *dash = '\0';
    if (cfg_parse_uint (buf, k->min, k->max, &lo, error) < 0 ||
        cfg_parse_uint (dash + 1, k->min, k->max, &hi, error) < 0)
        return fmb_errorf (error, "must be MIN-MAX within %u-%u", k->min, k->max);
    if (lo > hi)
        return fmb_errorf (error, "MIN is above MAX");
    cfg->vni_min = lo;
    cfg->vni_max = hi;
    return 0;
}

/* Store 'value' into the member 'k' describes. */
int cfg_key_apply (struct fmb_config *cfg,
                   const struct cfg_key *k,
                   const char *value,
                   struct fmb_error *error)
{
    char *field = (char *)cfg + k->offset;
    switch (k->type) {
    case CFG_UINT:
        return cfg_parse_uint (value, k->min, k->max, (unsigned *)field, error);
    case CFG_BOOL:
        return cfg_parse_bool (value, (bool *)field, error);
    case CFG_STRING: {
        char tmp[FMB_CFG_PATH_MAX];
        if (strlen (value) >= k->size || strlen (value) >= sizeof (tmp))
            return fmb_errorf (error, "longer than %zu bytes", k->size - 1);
        strcpy (tmp, value);
        if (k->check && k->check (tmp, error) < 0)
            return -1;
        strcpy (field, tmp);
        return 0;
    }
    case CFG_ENUM:
        return apply_enum (k, value, (unsigned *)field, error);
    case CFG_LOGLEVEL: {
        int level = fmb_log_level_parse (value);
        if (level < LOG_ERR)
            return fmb_errorf (error, "must be one of error|warning|notice|info|debug");
        *(int *)field = level;
        return 0;
    }
    case CFG_VNI_RANGE:
        return apply_vni_range (cfg, k, value, error);
    case CFG_TCS:
        return fmb_config_parse_tcs (value, (unsigned *)field, error);
    case CFG_CXI_LIMITS:
        if (strlen (value) >= k->size)
            return fmb_errorf (error, "longer than %zu bytes", k->size - 1);
        if (cfg_parse_cxi_limits (value, cfg->cxi_limits, error) < 0)
            return -1;
        strcpy (field, value);
        return 0;
    }
    return fmb_errorf (error, "internal error: unknown key type");
}

const struct cfg_key *cfg_key_find (const char *section, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp (cfg_keys[i].section, section) == 0 &&
            strcmp (cfg_keys[i].key, name) == 0)
            return &cfg_keys[i];
    return NULL;
}

bool cfg_section_known (const char *section)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp (cfg_keys[i].section, section) == 0)
            return true;
    return false;
}

void fmb_config_defaults (struct fmb_config *cfg)
{
    memset (cfg, 0, sizeof (*cfg));
    for (size_t i = 0; i < NKEYS; i++) {
        struct fmb_error e;
        if (cfg_key_apply (cfg, &cfg_keys[i], cfg_keys[i].def, &e) < 0)
            abort (); /* a bad default is a programming error caught by tests */
    }
}

/* The keys the CLI, the node agent and the SPANK plugin read.  A client
 * reads the same file as the broker on the broker host; a typo in a key
 * only the broker uses (which reload refuses, keeping the running
 * configuration) must not stop every hook and monitoring check there. */
bool cfg_client_key (const char *section, const char *name)
{
    static const char *const keys[][2] = {
        {"api", "socket"},
        {"api", "broker_url"},
        {"api", "client_token_file"},
        {"api", "client_ca_file"},
        {"api", "node_run"},
        {"broker", "log_level"},
        {"vni", "pool"},
        {"cxi", "tcs"},
        {"cxi", "limits"},
        {"cxi", "libcxi"},
    };
    for (size_t i = 0; i < sizeof (keys) / sizeof (keys[0]); i++)
        if (strcmp (keys[i][0], section) == 0 && strcmp (keys[i][1], name) == 0)
            return true;
    return false;
}

int cfg_key_index (const char *section, const char *name)
{
    const struct cfg_key *k = cfg_key_find (section, name);
    return k ? (int)(k - cfg_keys) : -1;
}

void fmb_config_where (const struct fmb_config *cfg,
                       const char *section,
                       const char *key,
                       const char *value,
                       char *buf,
                       size_t size)
{
    int i = cfg_key_index (section, key);
    int line = i >= 0 ? cfg->lines[i] : 0;
    const char *file = cfg->source[0] ? cfg->source : "built-in defaults";
    char at[32] = "";
    if (line > 0)
        snprintf (at, sizeof (at), ":%d", line);
    snprintf (buf,
              size,
              "%s%s: [%s] %s%s%s%s",
              line < 0 ? "command line" : file,
              at,
              section,
              key,
              value ? " = " : "",
              value ? value : "",
              line == 0 ? " (default)" : "");
}

static void dump_value (const struct fmb_config *cfg, const struct cfg_key *k, FILE *f)
{
    const char *field = (const char *)cfg + k->offset;
    switch (k->type) {
    case CFG_UINT:
        fprintf (f, "%u", *(const unsigned *)field);
        break;
    case CFG_BOOL:
        fprintf (f, "%s", *(const bool *)field ? "true" : "false");
        break;
    case CFG_STRING:
    case CFG_CXI_LIMITS:
        fprintf (f, "%s", field);
        break;
    case CFG_ENUM:
        fprintf (f, "%s", k->values[*(const unsigned *)field]);
        break;
    case CFG_LOGLEVEL:
        fprintf (f, "%s", fmb_log_level_name (*(const int *)field));
        break;
    case CFG_VNI_RANGE:
        fprintf (f, "%u-%u", cfg->vni_min, cfg->vni_max);
        break;
    case CFG_TCS: {
        char names[96];
        fmb_config_tcs_names (*(const unsigned *)field, names, sizeof (names));
        fprintf (f, "%s", names);
        break;
    }
    }
}

void fmb_config_dump (const struct fmb_config *cfg, FILE *f)
{
    const char *section = NULL;
    fprintf (f,
             "# effective configuration (from %s)\n",
             cfg->source[0] ? cfg->source : "built-in defaults");
    for (size_t i = 0; i < NKEYS; i++) {
        const struct cfg_key *k = &cfg_keys[i];
        if (!section || strcmp (section, k->section) != 0) {
            fprintf (f, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf (f, "%s = ", k->key);
        dump_value (cfg, k, f);
        fputc ('\n', f);
    }
}

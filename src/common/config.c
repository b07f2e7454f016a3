/* config.c: the table of every fmbroker.conf key, and its loader.
 *
 * Defaults: see cfg_keys[] below (and deploy/fmbroker.conf.example, which
 * a test keeps in step with this table).
 */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include <ini.h>

#include "config.h"
#include "fileutil.h"
#include "netaddr.h"
#include "log.h"

#define CFG_FILE_MAX (1024 * 1024) /* a config file is a few KiB */

enum cfg_type {
    CFG_UINT,      /* decimal, min..max */
    CFG_BOOL,      /* true/false, yes/no, on/off, 1/0 */
    CFG_STRING,    /* char array; 'check' validates and may normalise */
    CFG_ENUM,      /* one of 'values', stored as its index (unsigned) */
    CFG_LOGLEVEL,  /* a syslog level name, stored as int */
    CFG_VNI_RANGE, /* "MIN-MAX"; stored in vni_min and vni_max */
    CFG_TCS,       /* traffic-class names, stored as a mask */
    CFG_CXI_LIMITS /* def_/res_/max_<resource>=N tokens */
};

typedef int (*cfg_check_f) (char *value, struct fmb_error *error);

struct cfg_key {
    const char *section;
    const char *key;
    enum cfg_type type;
    unsigned min;
    unsigned max;
    const char *def;
    size_t offset;
    size_t size;
    cfg_check_f check;
    const char *const *values; /* CFG_ENUM: NULL-terminated */
};

#define F(member) \
    offsetof (struct fmb_config, member), sizeof (((struct fmb_config *)0)->member)

static int check_cluster (char *value, struct fmb_error *error);
static int check_abs_path (char *value, struct fmb_error *error);
static int check_path_or_empty (char *value, struct fmb_error *error);
static int check_url (char *value, struct fmb_error *error);
static int check_names (char *value, struct fmb_error *error);
static int check_hostport (char *value, struct fmb_error *error);
static int check_https_url (char *value, struct fmb_error *error);
static int check_https_urls (char *value, struct fmb_error *error);

static const char *const auth_values[] = {"oauth", "basic", "none", NULL};
static const char *const hwcoll_mode_values[] = {"auto", "request", NULL};
static const char *const client_cert_values[] = {"none", "optional", "required", NULL};

/* clang-format off */
static const struct cfg_key cfg_keys[] = {
    /* section          key                   type           min  max       default */
    { "broker",         "cluster_name",       CFG_STRING,    0,   0,        "cluster",
      F (cluster_name), check_cluster, NULL },
    { "broker",         "state_dir",          CFG_STRING,    0,   0,        "/var/lib/fmbroker",
      F (state_dir), check_abs_path, NULL },
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
      F (socket), check_abs_path, NULL },
    { "api",            "tcp",                CFG_STRING,    0,   0,        "",
      F (tcp), check_hostport, NULL },
    { "api",            "tls_cert",           CFG_STRING,    0,   0,        "",
      F (tls_cert), check_path_or_empty, NULL },
    { "api",            "tls_key",            CFG_STRING,    0,   0,        "",
      F (tls_key), check_path_or_empty, NULL },
    { "api",            "tokens_file",        CFG_STRING,    0,   0,        "",
      F (tokens_file), check_path_or_empty, NULL },
    /* true: an agent token may also RUN a job (a node prolog's RUN,
     * Slurm's plugstack run=node: launches without PrologSlurmctld). */
    { "api",            "agent_run",          CFG_BOOL,      0,   1,        "false",
      F (api_agent_run), NULL, NULL },
    { "api",            "rm_users",           CFG_STRING,    0,   0,        FMB_RM_USERS_DEFAULT,
      F (rm_users), check_names, NULL },
    { "api",            "admin_users",        CFG_STRING,    0,   0,        "root",
      F (admin_users), check_names, NULL },
    { "api",            "admin_groups",       CFG_STRING,    0,   0,        "",
      F (admin_groups), check_names, NULL },
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
      F (broker_url), check_https_urls, NULL },
    { "api",            "client_token_file",  CFG_STRING,    0,   0,        "",
      F (client_token_file), check_path_or_empty, NULL },
    { "api",            "client_ca_file",     CFG_STRING,    0,   0,        "",
      F (client_ca_file), check_path_or_empty, NULL },
    /* Compute nodes: each its own token (fmbrokerd --node-token NAME). */
    { "api",            "node_key_file",      CFG_STRING,    0,   0,        "",
      F (node_key_file), check_path_or_empty, NULL },
    { "api",            "node_key_grace_s",   CFG_UINT,      0,   31536000, "86400",
      F (node_key_grace_s), NULL, NULL },
    { "api",            "revoked_nodes",      CFG_STRING,    0,   0,        "",
      F (revoked_nodes), check_names, NULL },
    { "api",            "shared_agent_token", CFG_BOOL,      0,   1,        "false",
      F (shared_agent_token), NULL, NULL },
    /* 0: sized to the process's file limit (fmbroker.conf(5)). */
    { "api",            "tcp_max_connections", CFG_UINT,     0,   65536,    "0",
      F (tcp_max_connections), NULL, NULL },
    { "api",            "tcp_max_unauthenticated", CFG_UINT, 0,   65536,    "0",
      F (tcp_max_unauthenticated), NULL, NULL },
    { "api",            "tls_priorities",     CFG_STRING,    0,   0,        FMB_TLS_PRIORITIES_DEFAULT,
      F (tls_priorities), NULL, NULL },
    { "api",            "tls_client_ca",      CFG_STRING,    0,   0,        "",
      F (tls_client_ca), check_path_or_empty, NULL },
    { "api",            "tls_client_cert",    CFG_ENUM,      0,   0,        "none",
      F (tls_client_cert), NULL, client_cert_values },

    /* An empty url runs the broker VNI-only (no hardware collectives). */
    { "fabric_manager", "url",                CFG_STRING,    0,   0,        "",
      F (fm_url), check_url, NULL },
    { "fabric_manager", "auth",               CFG_ENUM,      0,   0,        "oauth",
      F (fm_auth), NULL, auth_values },
    /* Empty: /etc/wlm-client-auth for oauth, /etc/fmsim for basic, as Slurm. */
    { "fabric_manager", "auth_dir",           CFG_STRING,    0,   0,        "",
      F (fm_auth_dir), check_path_or_empty, NULL },
    { "fabric_manager", "ca_file",            CFG_STRING,    0,   0,        "",
      F (fm_ca_file), check_path_or_empty, NULL },
    { "fabric_manager", "mtls_cert",          CFG_STRING,    0,   0,        "",
      F (fm_mtls_cert), check_path_or_empty, NULL },
    { "fabric_manager", "mtls_key",           CFG_STRING,    0,   0,        "",
      F (fm_mtls_key), check_path_or_empty, NULL },
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

const char *const fmb_cxi_rsrc_names[FMB_CXI_NRSRC] = {
    "txqs",
    "tgqs",
    "eqs",
    "cts",
    "tles",
    "ptes",
    "les",
    "acs",
};

/* Per-resource defaults (max / def per core), as HPE's Slurm plugin uses
 * them since 25.05; res 0 means "def x allocated cores". */
static const struct fmb_cxi_limit cxi_limit_defaults[FMB_CXI_NRSRC] = {
    {1024, 0, 2},   /* txqs */
    {512, 0, 1},    /* tgqs */
    {2047, 0, 2},   /* eqs */
    {2047, 0, 1},   /* cts */
    {2048, 0, 1},   /* tles */
    {2048, 0, 6},   /* ptes */
    {16384, 0, 16}, /* les */
    {1022, 0, 2},   /* acs */
};

static const struct {
    const char *name;
    unsigned bit;
} tc_names[] = {
    {"DEDICATED_ACCESS", FMB_TC_DEDICATED_ACCESS},
    {"LOW_LATENCY", FMB_TC_LOW_LATENCY},
    {"BULK_DATA", FMB_TC_BULK_DATA},
    {"BEST_EFFORT", FMB_TC_BEST_EFFORT},
};

/* ---- value checks -------------------------------------------------- */

static int check_cluster (char *value, struct fmb_error *error)
{
    /* The cluster name prefixes every FM job id ("{cluster}-{job}") and the
     * reconciler deletes only ids that start with "{cluster}-": a '-' in the
     * name would let cluster "a" reap cluster "a-b"'s jobs. */
    if (value[0] == '\0')
        return fmb_errorf (error, "must not be empty");
    for (const char *p = value; *p; p++)
        if (!isalnum ((unsigned char)*p) && *p != '_')
            return fmb_errorf (error, "only letters, digits and '_' are allowed");
    return 0;
}

static int check_abs_path (char *value, struct fmb_error *error)
{
    if (value[0] != '/')
        return fmb_errorf (error, "must be an absolute path");
    return 0;
}

static int check_path_or_empty (char *value, struct fmb_error *error)
{
    return value[0] ? check_abs_path (value, error) : 0;
}

/* The broker's TCP listener speaks only TLS. */
static int check_https_url (char *value, struct fmb_error *error)
{
    if (value[0] && strncmp (value, "https://", 8) != 0)
        return fmb_errorf (error,
                           "not an https URL (the broker's TCP listener is TLS only)");
    return check_url (value, error);
}

/* One https URL, or an ordered comma-separated list of them (an active
 * broker and its standbys), rewritten as "URL,URL" without blanks or
 * trailing slashes. */
static int check_https_urls (char *value, struct fmb_error *error)
{
    char out[FMB_CFG_PATH_MAX] = "", one[FMB_CFG_PATH_MAX];
    unsigned n = 0;
    if (!value[0])
        return 0;
    for (const char *p = value;; p++) {
        size_t len = strcspn (p, ",");
        while (len && isspace ((unsigned char)*p))
            p++, len--;
        while (len && isspace ((unsigned char)p[len - 1]))
            len--;
        if (len == 0)
            return fmb_errorf (error, "an empty URL in the list");
        if (++n > FMB_BROKER_URLS_MAX)
            return fmb_errorf (error, "more than %d URLs", FMB_BROKER_URLS_MAX);
        memcpy (one, p, len);
        one[len] = '\0';
        if (check_https_url (one, error) < 0) /* name the culprit in a list */
            return strchr (value, ',') ? fmb_error_prefix (error, "%s", one) : -1;
        size_t used = strlen (out);
        int w =
            snprintf (out + used, sizeof (out) - used, "%s%s", used ? "," : "", one);
        if (w < 0 || (size_t)w >= sizeof (out) - used)
            return fmb_errorf (error, "the list is too long");
        p = strchr (p, ',');
        if (!p)
            break;
    }
    strcpy (value, out);
    return 0;
}

static int check_url (char *value, struct fmb_error *error)
{
    if (value[0] == '\0')
        return 0;
    const char *host;
    if (strncmp (value, "http://", 7) == 0)
        host = value + 7;
    else if (strncmp (value, "https://", 8) == 0)
        host = value + 8;
    else
        return fmb_errorf (error, "not an http(s) URL");
    if (*host == '\0' || *host == '/')
        return fmb_errorf (error, "URL has no host");
    /* Credentials in the URL would be shown wherever the URL is (status,
     * logs, events): the FM's go in auth_dir, a broker's token in a file. */
    if (memchr (host, '@', strcspn (host, "/")))
        return fmb_errorf (error,
                           "URL must not carry credentials (a user@ part): use "
                           "[fabric_manager] auth and auth_dir, or a token file");
    for (const char *p = value; *p; p++)
        if (isspace ((unsigned char)*p) || *p == '?' || *p == '#')
            return fmb_errorf (error, "URL must not contain spaces, '?' or '#'");
    /* FM paths are appended to the base URL: drop trailing slashes so
     * "https://fm/apis/fm/" does not produce "//fabric/...". */
    size_t n = strlen (value);
    while (n > 0 && value[n - 1] == '/')
        value[--n] = '\0';
    return 0;
}

static int check_names (char *value, struct fmb_error *error)
{
    /* Comma-separated user or group names (or numeric ids), spaces ignored:
     * rewrite in place without the spaces. */
    char *out = value;
    for (const char *p = value; *p; p++) {
        if (*p == ' ' || *p == '\t')
            continue;
        if (!isalnum ((unsigned char)*p) && !strchr ("._-,", *p))
            return fmb_errorf (error, "'%c' cannot appear in a user or group name", *p);
        *out++ = *p;
    }
    *out = '\0';
    if (strstr (value, ",,") || value[0] == ',' || (out > value && out[-1] == ','))
        return fmb_errorf (error, "empty name in list");
    return 0;
}

static int check_hostport (char *value, struct fmb_error *error)
{
    if (value[0] == '\0')
        return 0;
    const char *colon = strrchr (value, ':');
    if (!colon || colon == value)
        return fmb_errorf (error, "must be HOST:PORT (IPv6 as [ADDR]:PORT)");
    if (value[0] == '[' && colon[-1] != ']')
        return fmb_errorf (error, "must be HOST:PORT (IPv6 as [ADDR]:PORT)");
    char *end;
    errno = 0;
    unsigned long port = strtoul (colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port > 65535)
        return fmb_errorf (error, "port must be 0..65535");
    /* A listener binds an address: names are not looked up, here or at
     * start, so both refuse them alike. */
    struct sockaddr_storage ss;
    socklen_t sslen;
    if (fmb_parse_hostport (value, &ss, &sslen) < 0)
        return fmb_errorf (error,
                           "HOST must be a numeric IPv4 or [IPv6] address, not a "
                           "host name");
    return 0;
}

/* ---- parsing ------------------------------------------------------- */

static int parse_uint (const char *value,
                       unsigned min,
                       unsigned max,
                       unsigned *out,
                       struct fmb_error *error)
{
    char *end;
    if (!isdigit ((unsigned char)value[0]))
        return fmb_errorf (error, "must be a whole number %u..%u", min, max);
    errno = 0;
    unsigned long v = strtoul (value, &end, 10);
    if (errno || *end || v < min || v > max)
        return fmb_errorf (error, "must be a whole number %u..%u", min, max);
    *out = (unsigned)v;
    return 0;
}

static int parse_bool (const char *value, bool *out, struct fmb_error *error)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp (value, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp (value, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return fmb_errorf (error, "must be true or false");
}

int fmb_config_parse_tcs (const char *text, unsigned *mask, struct fmb_error *error)
{
    unsigned m = 0;
    char buf[256];
    if (strncasecmp (text, "0x", 2) == 0) { /* a mask, as SLINGSHOT_TCS shows it */
        char *end;
        errno = 0;
        unsigned long v = strtoul (text + 2, &end, 16);
        if (!isxdigit ((unsigned char)text[2]) || *end || errno || v < 1 || v > 0xf)
            return fmb_errorf (error, "a mask of 0x1..0xf or traffic class names");
        *mask = (unsigned)v;
        return 0;
    }
    if (snprintf (buf, sizeof (buf), "%s", text) >= (int)sizeof (buf))
        return fmb_errorf (error, "too long");
    char *save = NULL;
    for (char *tok = strtok_r (buf, ",: ", &save); tok;
         tok = strtok_r (NULL, ",: ", &save)) {
        const char *name = strncasecmp (tok, "TC_", 3) == 0 ? tok + 3 : tok;
        size_t i;
        for (i = 0; i < sizeof (tc_names) / sizeof (tc_names[0]); i++)
            if (strcasecmp (name, tc_names[i].name) == 0)
                break;
        if (i == sizeof (tc_names) / sizeof (tc_names[0]))
            return fmb_errorf (error,
                               "unknown traffic class '%s' (DEDICATED_ACCESS, "
                               "LOW_LATENCY, BULK_DATA, BEST_EFFORT)",
                               tok);
        m |= tc_names[i].bit;
    }
    if (m == 0)
        return fmb_errorf (error, "at least one traffic class is needed");
    *mask = m;
    return 0;
}

void fmb_config_tcs_names (unsigned mask, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof (tc_names) / sizeof (tc_names[0]); i++)
        if ((mask & tc_names[i].bit) && used < len)
            used += (size_t)snprintf (
                out + used, len - used, "%s%s", used ? "," : "", tc_names[i].name);
    if (!out[0])
        snprintf (out, len, "none");
}

int fmb_config_parse_tcs_within (const char *text,
                                 unsigned allowed,
                                 unsigned *mask,
                                 struct fmb_error *error)
{
    unsigned m;
    if (fmb_config_parse_tcs (text, &m, error) < 0)
        return -1;
    if (m & ~allowed) {
        char names[96];
        fmb_config_tcs_names (allowed, names, sizeof (names));
        return fmb_errorf (error, "this cluster allows only %s", names);
    }
    *mask = m;
    return 0;
}

static int parse_cxi_limits (const char *text,
                             struct fmb_cxi_limit out[FMB_CXI_NRSRC],
                             struct fmb_error *error)
{
    struct fmb_cxi_limit lim[FMB_CXI_NRSRC];
    memcpy (lim, cxi_limit_defaults, sizeof (lim));
    char buf[FMB_CFG_LIST_MAX];
    snprintf (buf, sizeof (buf), "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r (buf, ", ", &save); tok;
         tok = strtok_r (NULL, ", ", &save)) {
        char *eq = strchr (tok, '=');
        if (!eq || (strncmp (tok, "def_", 4) && strncmp (tok, "res_", 4) &&
                    strncmp (tok, "max_", 4)))
            return fmb_errorf (
                error, "'%s': expected def_R=N, res_R=N or max_R=N", tok);
        *eq = '\0';
        int r;
        for (r = 0; r < FMB_CXI_NRSRC; r++)
            if (strcmp (tok + 4, fmb_cxi_rsrc_names[r]) == 0)
                break;
        if (r == FMB_CXI_NRSRC)
            return fmb_errorf (error,
                               "'%s': unknown resource (txqs tgqs eqs cts tles "
                               "ptes les acs)",
                               tok);
        unsigned v;
        struct fmb_error inner;
        if (parse_uint (eq + 1, 0, cxi_limit_defaults[r].max, &v, &inner) < 0)
            return fmb_errorf (error, "%s: %s", tok, inner.text);
        if (tok[0] == 'd')
            lim[r].def = v;
        else if (tok[0] == 'r')
            lim[r].res = v;
        else
            lim[r].max = v;
    }
    for (int r = 0; r < FMB_CXI_NRSRC; r++)
        if (lim[r].res > lim[r].max)
            return fmb_errorf (error,
                               "res_%s (%u) exceeds max_%s (%u)",
                               fmb_cxi_rsrc_names[r],
                               lim[r].res,
                               fmb_cxi_rsrc_names[r],
                               lim[r].max);
    memcpy (out, lim, sizeof (lim));
    return 0;
}

/* Store 'value' into the member 'k' describes. */
static int key_apply (struct fmb_config *cfg,
                      const struct cfg_key *k,
                      const char *value,
                      struct fmb_error *error)
{
    char *field = (char *)cfg + k->offset;
    switch (k->type) {
    case CFG_UINT:
        return parse_uint (value, k->min, k->max, (unsigned *)field, error);
    case CFG_BOOL:
        return parse_bool (value, (bool *)field, error);
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
        for (unsigned i = 0; k->values[i]; i++)
            if (strcasecmp (value, k->values[i]) == 0) {
                *(unsigned *)field = i;
                return 0;
            }
        {
            char list[128] = "";
            for (unsigned i = 0; k->values[i]; i++) {
                strncat (list, i ? "|" : "", sizeof (list) - strlen (list) - 1);
                strncat (list, k->values[i], sizeof (list) - strlen (list) - 1);
            }
            return fmb_errorf (error, "must be one of %s", list);
        }
    case CFG_LOGLEVEL: {
        int level = fmb_log_level_parse (value);
        if (level < LOG_ERR)
            return fmb_errorf (error, "must be one of error|warning|notice|info|debug");
        *(int *)field = level;
        return 0;
    }
    case CFG_VNI_RANGE: {
        unsigned lo, hi;
        char buf[64];
        char *dash;
        if (snprintf (buf, sizeof (buf), "%s", value) >= (int)sizeof (buf) ||
            !(dash = strchr (buf, '-')))
            return fmb_errorf (error, "must be MIN-MAX, e.g. 1024-65535");
        *dash = '\0';
        if (parse_uint (buf, k->min, k->max, &lo, error) < 0 ||
            parse_uint (dash + 1, k->min, k->max, &hi, error) < 0)
            return fmb_errorf (error, "must be MIN-MAX within %u-%u", k->min, k->max);
        if (lo > hi)
            return fmb_errorf (error, "MIN is above MAX");
        cfg->vni_min = lo;
        cfg->vni_max = hi;
        return 0;
    }
    case CFG_TCS:
        return fmb_config_parse_tcs (value, (unsigned *)field, error);
    case CFG_CXI_LIMITS:
        if (strlen (value) >= k->size)
            return fmb_errorf (error, "longer than %zu bytes", k->size - 1);
        if (parse_cxi_limits (value, cfg->cxi_limits, error) < 0)
            return -1;
        strcpy (field, value);
        return 0;
    }
    return fmb_errorf (error, "internal error: unknown key type");
}

static const struct cfg_key *key_find (const char *section, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp (cfg_keys[i].section, section) == 0 &&
            strcmp (cfg_keys[i].key, name) == 0)
            return &cfg_keys[i];
    return NULL;
}

static bool section_known (const char *section)
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
        if (key_apply (cfg, &cfg_keys[i], cfg_keys[i].def, &e) < 0)
            abort (); /* a bad default is a programming error caught by tests */
    }
}

/* ---- validation of rules that involve several keys ----------------- */

/* Problems kept from one load: a file with more is cut short, saying how
 * many more there were. */
#define CFG_ERRORS_MAX 20

struct parse_ctx {
    struct fmb_config cfg;
    const char *name;
    int lines[NKEYS]; /* where each key was set, 0 if not set */
    bool failed;      /* 'error' holds the first problem, 'errors' each */
    struct fmb_error error;
    char errors[CFG_ERRORS_MAX][FMB_ERROR_TEXT_MAX];
    int nerrors;          /* may exceed CFG_ERRORS_MAX: the rest are counted */
    bool stop;            /* the text cannot be read on (a line too long) */
    char bad_section[64]; /* an unknown section, said once */
    /* the text being parsed, fed to inih one line at a time */
    const char *text;
    size_t pos;
    int lineno;
    bool client; /* read only the keys a client uses (client_key) */
};

/* The keys the CLI, the node agent and the SPANK plugin read.  A client
 * reads the same file as the broker on the broker host; a typo in a key
 * only the broker uses (which reload refuses, keeping the running
 * configuration) must not stop every hook and monitoring check there. */
static bool client_key (const char *section, const char *name)
{
    static const char *const keys[][2] = {
        {"api", "socket"},
        {"api", "broker_url"},
        {"api", "client_token_file"},
        {"api", "client_ca_file"},
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

static int key_index (const char *section, const char *name)
{
    const struct cfg_key *k = key_find (section, name);
    return k ? (int)(k - cfg_keys) : -1;
}

/* Record one problem (the first is also ctx->error); loading goes on, so
 * that --check-config and start name every problem at once. */
__attribute__ ((format (printf, 2, 3))) static void ctx_error (struct parse_ctx *ctx,
                                                               const char *fmt,
                                                               ...)
{
    char text[FMB_ERROR_TEXT_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    if (ctx->nerrors == 0)
        snprintf (ctx->error.text, sizeof (ctx->error.text), "%s", text);
    if (ctx->nerrors < CFG_ERRORS_MAX)
        snprintf (ctx->errors[ctx->nerrors], sizeof (ctx->errors[0]), "%s", text);
    ctx->nerrors++;
    ctx->failed = true;
    errno = EINVAL;
}

/* Format "NAME:LINE: [sec] key = value: " into 'e' then the reason. */
__attribute__ ((format (printf, 4, 5))) static int cfg_fail (
    struct parse_ctx *ctx, const char *section, const char *key, const char *fmt, ...)
{
    char reason[FMB_ERROR_TEXT_MAX];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (reason, sizeof (reason), fmt, ap);
    va_end (ap);
    int i = key_index (section, key);
    char where[FMB_CFG_PATH_MAX + 16];
    int line = i >= 0 ? ctx->lines[i] : 0;
    if (line > 0)
        snprintf (where, sizeof (where), "%s:%d", ctx->name, line);
    else /* -1: the value came from the command line */
        snprintf (where, sizeof (where), "%s", line < 0 ? "command line" : ctx->name);
    ctx_error (ctx,
               "%s: [%s] %s%s: %s",
               where,
               section,
               key,
               line == 0 ? " (default)" : "",
               reason);
    return -1;
}

/* The rules between a client's own keys, all a client checks: the
 * others involve keys it leaves at their defaults (a small [vni] pool
 * against the default max_per_job would stop it for the broker's sake). */
static int client_validate (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
    if (c->broker_url[0] && !c->client_token_file[0])
        return cfg_fail (
            ctx,
            "api",
            "broker_url",
            "needs client_token_file (the broker's TCP listener wants a token)");
    return 0;
}

static int cfg_validate (struct parse_ctx *ctx)
{
    struct fmb_config *c = &ctx->cfg;

    if (c->vni_per_job > c->vni_max_per_job)
        cfg_fail (ctx,
                  "vni",
                  "per_job",
                  "%u exceeds [vni] max_per_job (%u)",
                  c->vni_per_job,
                  c->vni_max_per_job);
    if (c->vni_max - c->vni_min + 1 < c->vni_max_per_job)
        cfg_fail (ctx,
                  "vni",
                  "pool",
                  "%u-%u holds fewer VNIs than [vni] max_per_job (%u)",
                  c->vni_min,
                  c->vni_max,
                  c->vni_max_per_job);
    if (c->fm_reserve_timeout_ms > c->fm_timeout_ms)
        cfg_fail (ctx,
                  "fabric_manager",
                  "reserve_timeout_ms",
                  "%u exceeds [fabric_manager] timeout_ms (%u)",
                  c->fm_reserve_timeout_ms,
                  c->fm_timeout_ms);
    if (!c->fm_mtls_cert[0] != !c->fm_mtls_key[0])
        cfg_fail (ctx,
                  "fabric_manager",
                  c->fm_mtls_cert[0] ? "mtls_cert" : "mtls_key",
                  "mtls_cert and mtls_key must be set together");
    if (strncasecmp (c->fm_url, "http://", 7) == 0 && c->fm_auth != FMB_AUTH_NONE &&
        !c->fm_allow_plain_http)
        cfg_fail (ctx,
                  "fabric_manager",
                  "url",
                  "%s is plain http: auth = %s would send credentials and "
                  "tokens in clear; use https, or set allow_plain_http = true",
                  c->fm_url,
                  auth_values[c->fm_auth]);
    if (c->fm_insecure && c->fm_ca_file[0])
        cfg_fail (ctx,
                  "fabric_manager",
                  "insecure",
                  "contradicts ca_file: verify with a CA, or do not verify");
    if (c->tcp[0] && (!c->tls_cert[0] || !c->tls_key[0] || !c->tokens_file[0]))
        cfg_fail (ctx,
                  "api",
                  "tcp",
                  "the TCP listener needs tls_cert, tls_key and tokens_file");
    if (c->tls_client_cert != FMB_CLIENT_CERT_NONE && !c->tls_client_ca[0])
        cfg_fail (ctx,
                  "api",
                  "tls_client_cert",
                  "needs tls_client_ca (the CA that signs the nodes' certificates)");
    if (c->api_reserved_connections >= c->api_max_connections)
        cfg_fail (ctx,
                  "api",
                  "reserved_connections",
                  "%u leaves nothing of [api] max_connections (%u) to plain users",
                  c->api_reserved_connections,
                  c->api_max_connections);
    client_validate (ctx);
    if (c->hwcoll_system_nodes && c->hwcoll_min_nodes > c->hwcoll_system_nodes)
        cfg_fail (ctx,
                  "hwcoll",
                  "min_nodes",
                  "%u exceeds [hwcoll] system_nodes (%u)",
                  c->hwcoll_min_nodes,
                  c->hwcoll_system_nodes);
    if (c->fm_url[0] && fmb_config_mcast_limit (c) == 0) {
        if (c->hwcoll_addrs_per_job == 0 && c->hwcoll_system_nodes == 0)
            cfg_fail (ctx,
                      "hwcoll",
                      "addrs_per_job",
                      "0 needs [hwcoll] system_nodes for HPE's sizing "
                      "formula; set one of them");
        else
            cfg_fail (ctx,
                      "hwcoll",
                      "system_nodes",
                      "HPE's formula (%u / (%u / %u)) / %u gives 0 addresses "
                      "per job; set addrs_per_job",
                      c->hwcoll_total_addrs,
                      c->hwcoll_system_nodes,
                      c->hwcoll_min_nodes,
                      c->hwcoll_jobs_per_node);
    }
    return ctx->failed ? -1 : 0;
}

const char *fmb_config_auth_dir (const struct fmb_config *c)
{
    if (c->fm_auth_dir[0])
        return c->fm_auth_dir;
    return c->fm_auth == FMB_AUTH_BASIC ? "/etc/fmsim" : "/etc/wlm-client-auth";
}

unsigned fmb_config_mcast_limit (const struct fmb_config *c)
{
    if (c->hwcoll_addrs_per_job)
        return c->hwcoll_addrs_per_job;
    if (!c->hwcoll_system_nodes || !c->hwcoll_min_nodes || !c->hwcoll_jobs_per_node)
        return 0;
    unsigned jobs = c->hwcoll_system_nodes / c->hwcoll_min_nodes;
    if (jobs == 0)
        return 0;
    return (c->hwcoll_total_addrs / jobs) / c->hwcoll_jobs_per_node;
}

/* ---- loading ------------------------------------------------------- */

/* inih reader: hand out one line, counting lines so that the handler
 * can name them (Debian's libinih is built without INI_HANDLER_LINENO).
 * inih's line buffer is fixed; a longer line is refused, not split. */
static char *ini_reader_cb (char *str, int num, void *arg)
{
    struct parse_ctx *ctx = arg;
    const char *p = ctx->text + ctx->pos;
    if (*p == '\0' || ctx->stop)
        return NULL;
    const char *nl = strchr (p, '\n');
    size_t len = nl ? (size_t)(nl - p) + 1 : strlen (p);
    ctx->lineno++;
    if (len >= (size_t)num) {
        ctx->stop = true;
        ctx_error (
            ctx, "%s:%d: line longer than %d bytes", ctx->name, ctx->lineno, num - 2);
        return NULL;
    }
    memcpy (str, p, len);
    str[len] = '\0';
    ctx->pos += len;
    return str;
}

/* 'value' for a message, with the user:password@ of a URL in it as
 * "***@": a refused value is shown, a secret never is. */
static const char *without_userinfo (const char *value, char *out, size_t len)
{
    const char *scheme = strstr (value, "://");
    const char *at = scheme ? strchr (scheme + 3, '@') : NULL;
    if (!at || memchr (scheme + 3, '/', (size_t)(at - scheme - 3)))
        return value;
    snprintf (out, len, "%.*s***%s", (int)(scheme + 3 - value), value, at);
    return out;
}

static int config_handler (void *arg,
                           const char *section,
                           const char *name,
                           const char *value)
{
    struct parse_ctx *ctx = arg;
    int lineno = ctx->lineno;
    if (ctx->client && !client_key (section, name))
        return 1; /* the broker's to judge; defaults here */
    char where[FMB_CFG_PATH_MAX + 16];
    if (lineno > 0)
        snprintf (where, sizeof (where), "%s:%d", ctx->name, lineno);
    else
        snprintf (where, sizeof (where), "%s", ctx->name);
    const struct cfg_key *k = key_find (section, name);
    struct fmb_error inner;
    if (!k) {
        if (!section[0])
            ctx_error (ctx, "%s: %s: a key before any [section]", where, name);
        else if (!section_known (section)) {
            if (strcmp (ctx->bad_section, section) == 0)
                return 1; /* said at its first key */
            snprintf (ctx->bad_section, sizeof (ctx->bad_section), "%s", section);
            ctx_error (ctx, "%s: [%s]: unknown section", where, section);
        } else
            ctx_error (ctx, "%s: [%s] %s: unknown key", where, section, name);
        return 1; /* recorded; read on */
    }
    int i = (int)(k - cfg_keys);
    if (ctx->lines[i] && lineno > 0) {
        ctx_error (ctx,
                   "%s: [%s] %s: set twice (first at line %d)",
                   where,
                   section,
                   name,
                   ctx->lines[i]);
        return 1; /* recorded; read on */
    }
    ctx->lines[i] = lineno > 0 ? lineno : -1; /* -1: set on the command line */
    if (key_apply (&ctx->cfg, k, value, &inner) < 0) {
        char shown[FMB_CFG_PATH_MAX];
        ctx_error (ctx,
                   "%s: [%s] %s = %s: %s",
                   where,
                   section,
                   name,
                   without_userinfo (value, shown, sizeof (shown)),
                   inner.text);
        return 1; /* recorded; read on */
    }
    return 1;
}

/* Every problem of a failed load: through 'report' when given (then
 * 'error' says how many), else the first in 'error'. */
static int report_errors (struct parse_ctx *ctx,
                          fmb_config_report_f report,
                          void *arg,
                          struct fmb_error *error)
{
    int kept = ctx->nerrors < CFG_ERRORS_MAX ? ctx->nerrors : CFG_ERRORS_MAX;
    if (!report) {
        if (ctx->nerrors > 1)
            return fmb_errorf (
                error, "%s (and %d more)", ctx->error.text, ctx->nerrors - 1);
        return fmb_errorf (error, "%s", ctx->error.text);
    }
    for (int i = 0; i < kept; i++)
        report (ctx->errors[i], arg);
    if (ctx->nerrors > kept) {
        char more[64];
        snprintf (more, sizeof (more), "... and %d more", ctx->nerrors - kept);
        report (more, arg);
    }
    errno = EINVAL;
    return fmb_errorf (error,
                       "%s: %d problem%s",
                       ctx->name,
                       ctx->nerrors,
                       ctx->nerrors > 1 ? "s" : "");
}

static int finish_load (struct fmb_config *cfg,
                        struct parse_ctx *ctx,
                        int rc,
                        fmb_config_report_f report,
                        void *arg,
                        struct fmb_error *error)
{
    if (rc == -2) {
        errno = ENOMEM;
        return fmb_errorf (error, "%s: out of memory", ctx->name);
    }
    if (rc > 0)
        ctx_error (ctx, "%s:%d: syntax error", ctx->name, rc);
    /* The rules between keys, once every key has a value it may have. */
    if (!ctx->failed)
        (void)(ctx->client ? client_validate (ctx) : cfg_validate (ctx));
    if (ctx->failed)
        return report_errors (ctx, report, arg, error);
    for (size_t i = 0; i < NKEYS; i++)
        if (ctx->lines[i]) /* fmb_config_set keeps the file's other lines */
            ctx->cfg.lines[i] = ctx->lines[i];
    *cfg = ctx->cfg;
    return 0;
}

/* Split "section.key=value" and feed it to the handler as if it were a
 * line of the file (line 0: the command line). */
static void apply_assignment (struct parse_ctx *ctx, const char *assignment)
{
    char section[64], key[64];
    const char *dot = strchr (assignment, '.');
    const char *eq = strchr (assignment, '=');
    if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof (section) ||
        (size_t)(eq - dot - 1) >= sizeof (key)) {
        ctx_error (ctx, "'%s': expected SECTION.KEY=VALUE", assignment);
        return;
    }
    snprintf (section, sizeof (section), "%.*s", (int)(dot - assignment), assignment);
    snprintf (key, sizeof (key), "%.*s", (int)(eq - dot - 1), dot + 1);
    const char *saved_name = ctx->name;
    int saved_line = ctx->lineno;
    ctx->name = "command line";
    ctx->lineno = 0;
    config_handler (ctx, section, key, eq + 1);
    ctx->name = saved_name;
    ctx->lineno = saved_line;
}

/* Parse 'text' (may be NULL: defaults only), apply the overrides in
 * 'sets', then validate once: the rules that involve several keys see
 * the final values, whatever the order of the overrides. */
static int parse_text (struct fmb_config *cfg,
                       const char *name,
                       const char *source,
                       const char *text,
                       const char *const *sets,
                       int nsets,
                       bool client,
                       fmb_config_report_f report,
                       void *arg,
                       struct fmb_error *error)
{
    struct parse_ctx *ctx = calloc (1, sizeof (*ctx));
    if (!ctx)
        return fmb_errorf (error, "%s: out of memory", name);
    ctx->client = client;
    fmb_config_defaults (&ctx->cfg);
    snprintf (ctx->cfg.source, sizeof (ctx->cfg.source), "%s", source);
    ctx->name = name;
    ctx->text = text ? text : "";
    int rc = ini_parse_stream (ini_reader_cb, ctx, config_handler, ctx);
    for (int i = 0; rc != -2 && i < nsets; i++)
        apply_assignment (ctx, sets[i]);
    rc = finish_load (cfg, ctx, rc, report, arg, error);
    int saved = errno;
    free (ctx);
    errno = saved;
    return rc;
}

static int load_file (struct fmb_config *cfg,
                      const char *path,
                      bool client,
                      struct fmb_error *error)
{
    char *text;
    if (fmb_read_file (path, CFG_FILE_MAX, false, &text, NULL, error) < 0)
        return -1;
    int rc = parse_text (cfg, path, path, text, NULL, 0, client, NULL, NULL, error);
    int saved = errno;
    free (text);
    errno = saved;
    return rc;
}

int fmb_config_load (struct fmb_config *cfg, const char *path, struct fmb_error *error)
{
    return load_file (cfg, path, false, error);
}

int fmb_config_load_client (struct fmb_config *cfg,
                            const char *path,
                            struct fmb_error *error)
{
    return load_file (cfg, path, true, error);
}

int fmb_config_load_string (struct fmb_config *cfg,
                            const char *name,
                            const char *text,
                            struct fmb_error *error)
{
    return parse_text (cfg, name, "", text, NULL, 0, false, NULL, NULL, error);
}

int fmb_config_load_with_sets (struct fmb_config *cfg,
                               const char *path,
                               const char *const *sets,
                               int nsets,
                               struct fmb_error *error)
{
    return fmb_config_load_all (cfg, path, sets, nsets, NULL, NULL, error);
}

int fmb_config_load_all (struct fmb_config *cfg,
                         const char *path,
                         const char *const *sets,
                         int nsets,
                         fmb_config_report_f report,
                         void *arg,
                         struct fmb_error *error)
{
    char *text = NULL;
    if (path && fmb_read_file (path, CFG_FILE_MAX, false, &text, NULL, error) < 0)
        return -1;
    int rc = parse_text (cfg,
                         path ? path : "built-in defaults",
                         path ? path : "",
                         text,
                         sets,
                         nsets,
                         false,
                         report,
                         arg,
                         error);
    int saved = errno;
    free (text);
    errno = saved;
    return rc;
}

int fmb_config_set (struct fmb_config *cfg,
                    const char *assignment,
                    struct fmb_error *error)
{
    struct parse_ctx *ctx = calloc (1, sizeof (*ctx));
    if (!ctx)
        return fmb_errorf (error, "out of memory");
    ctx->cfg = *cfg;
    ctx->name = "command line";
    apply_assignment (ctx, assignment);
    int rc = finish_load (cfg, ctx, 0, NULL, NULL, error);
    int saved = errno;
    free (ctx);
    errno = saved;
    return rc;
}

bool fmb_config_list_has (const char *list, const char *name)
{
    size_t n = strlen (name);
    const char *p = list;
    while (*p) {
        const char *end = strchr (p, ',');
        size_t len = end ? (size_t)(end - p) : strlen (p);
        if (len == n && strncmp (p, name, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

void fmb_config_where (const struct fmb_config *cfg,
                       const char *section,
                       const char *key,
                       const char *value,
                       char *buf,
                       size_t size)
{
    int i = key_index (section, key);
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

/* ---- dump ---------------------------------------------------------- */

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

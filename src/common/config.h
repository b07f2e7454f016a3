/* config.h: fmbroker.conf, the one INI file every component reads.
 *
 * Every key lives in one table in config.c with its section, type, bounds
 * and default.  Loading parses into a staged copy, checks the rules that
 * involve several keys, and only then hands the result to the caller, so
 * a rejected file never leaves a half-applied configuration.  Errors read
 * "FILE:LINE: [section] key = value: why".
 *
 * deploy/fmbroker.conf.example documents every key; a ctest checks that
 * it and `fmbrokerd --dump-config` list the same keys and defaults.
 */
#ifndef FMB_CONFIG_H
#define FMB_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "error.h"

#define FMB_CONFIG_PATH      "/etc/fmbroker/fmbroker.conf"
#define FMB_SERVICE_USER     "fmbroker" /* fmbrokerd.service's User= */
#define FMB_RM_USERS_DEFAULT "root,slurm,flux"
#define FMB_CFG_PATH_MAX     1024
#define FMB_BROKER_URLS_MAX  8 /* [api] broker_url: an active broker and standbys */
#define FMB_CFG_LIST_MAX     1024
#define FMB_CLUSTER_MAX      64
#define FMB_UNIX_PATH_MAX    108 /* sizeof (sun_path) */
#define FMB_CXI_NRSRC        8

enum fmb_auth { FMB_AUTH_OAUTH, FMB_AUTH_BASIC, FMB_AUTH_NONE };
enum fmb_hwcoll_mode { FMB_HWCOLL_AUTO, FMB_HWCOLL_REQUEST };
enum fmb_client_cert {
    FMB_CLIENT_CERT_NONE,
    FMB_CLIENT_CERT_OPTIONAL,
    FMB_CLIENT_CERT_REQUIRED
};
/* TLS 1.2 and 1.3 only, key exchanges with forward secrecy only (GnuTLS's
 * PFS: no static RSA): GnuTLS priority syntax.  Not %SERVER_PRECEDENCE:
 * the server's first group (P-256) then wins over the X25519 key share
 * every client sends, and each connection pays a HelloRetryRequest round
 * trip and a second key share (measured on every node prolog's RUN). */
#define FMB_TLS_PRIORITIES_DEFAULT "PFS:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* Traffic classes as bits of SLINGSHOT_TCS. */
#define FMB_TC_DEDICATED_ACCESS 0x1
#define FMB_TC_LOW_LATENCY      0x2
#define FMB_TC_BULK_DATA        0x4
#define FMB_TC_BEST_EFFORT      0x8

/* One CXI resource's limits: the service may use up to 'max'; 'res' is
 * reserved outright, or if 0, 'def' per allocated core. */
struct fmb_cxi_limit {
    unsigned max;
    unsigned res;
    unsigned def;
};

/* At most this many keys (config.c checks its table against it). */
#define FMB_CFG_KEYS_MAX 96

struct fmb_config {
    char source[FMB_CFG_PATH_MAX]; /* file read, or "" for built-in defaults */
    /* where each key of the table was set: its line in 'source', -1 the
     * command line, 0 its default (fmb_config_where names it) */
    int lines[FMB_CFG_KEYS_MAX];

    /* [broker] */
    char cluster_name[FMB_CLUSTER_MAX + 1];
    char state_dir[FMB_CFG_PATH_MAX];
    int log_level; /* LOG_ERR..LOG_DEBUG */
    unsigned reconcile_interval_s;
    unsigned retain_days; /* released jobs and events; 0: forever */
    bool reap_foreign;    /* reconciliation deletes ids it has no record of */

    /* [api] */
    char socket[FMB_UNIX_PATH_MAX];
    char tcp[256];
    char tls_cert[FMB_CFG_PATH_MAX];
    char tls_key[FMB_CFG_PATH_MAX];
    char tokens_file[FMB_CFG_PATH_MAX];
    char rm_users[FMB_CFG_LIST_MAX];
    char admin_users[FMB_CFG_LIST_MAX];
    char admin_groups[FMB_CFG_LIST_MAX];
    bool api_agent_run;         /* agent tokens may RUN jobs (node-side RUN) */
    unsigned api_node_max_jobs; /* a node's RUN: jobs it may be in, live */
    bool api_node_run;          /* a Slurm node: its prolog makes the job's RUN */
    unsigned api_max_connections;
    unsigned api_max_connections_per_user;
    unsigned api_reserved_connections; /* for rm and admin users */
    unsigned api_request_timeout_ms;   /* a request's headers and body */
    unsigned api_listen_backlog;
    unsigned api_step_cleanup_rate; /* per job and second */
    unsigned api_step_cleanup_burst;
    /* where clients on other hosts (compute nodes) reach the broker */
    char broker_url[FMB_CFG_PATH_MAX];
    char client_token_file[FMB_CFG_PATH_MAX];
    char client_ca_file[FMB_CFG_PATH_MAX];
    /* compute nodes on TCP: per-node tokens (HMAC of the node name under
     * the node key), revocation, the shared agent token's opt-in */
    char node_key_file[FMB_CFG_PATH_MAX]; /* "": STATE_DIR/node.key */
    unsigned node_key_grace_s;            /* the previous key after a rotation */
    char revoked_nodes[FMB_CFG_LIST_MAX];
    bool shared_agent_token;
    /* the TCP listener's bounds and TLS */
    unsigned tcp_max_connections;                 /* 0: what the file limit allows */
    unsigned tcp_max_unauthenticated;             /* 0: half of the TCP connections */
    unsigned tcp_max_unauthenticated_per_address; /* an IPv6 address's /64 */
    unsigned tcp_listen_backlog;                  /* 0: net.core.somaxconn */
    unsigned tcp_idle_timeout_s; /* authenticated, between requests; 0: kept */
    unsigned tls_threads;        /* the TLS front's; 0: one a CPU, at most 8 */
    char tls_priorities[512];
    char tls_client_ca[FMB_CFG_PATH_MAX];
    unsigned tls_client_cert; /* enum fmb_client_cert */

    /* [fabric_manager] */
    char fm_url[FMB_CFG_PATH_MAX];
    unsigned fm_auth; /* enum fmb_auth */
    char fm_auth_dir[FMB_CFG_PATH_MAX];
    char fm_ca_file[FMB_CFG_PATH_MAX];
    char fm_mtls_cert[FMB_CFG_PATH_MAX];
    char fm_mtls_key[FMB_CFG_PATH_MAX];
    bool fm_insecure;
    bool fm_allow_plain_http; /* credentials over an http:// url */
    unsigned fm_timeout_ms;
    unsigned fm_reserve_timeout_ms;
    unsigned fm_max_connections;

    /* [hwcoll] */
    unsigned hwcoll_mode; /* enum fmb_hwcoll_mode */
    unsigned hwcoll_min_nodes;
    unsigned hwcoll_addrs_per_job;
    unsigned hwcoll_total_addrs;
    unsigned hwcoll_system_nodes;
    unsigned hwcoll_jobs_per_node;

    /* [vni] */
    unsigned vni_min;
    unsigned vni_max;
    unsigned vni_per_job;
    unsigned vni_max_per_job;
    unsigned vni_quarantine_s;
    char vni_reserved[FMB_CFG_LIST_MAX]; /* "N,N-M": not in the pool, as 1 and 10 */

    /* [cxi] */
    unsigned cxi_tcs;         /* FMB_TC_* mask */
    unsigned cxi_allowed_tcs; /* what RUN's tcs may name (FMB_TC_* mask) */
    char cxi_limits_text[FMB_CFG_LIST_MAX];
    struct fmb_cxi_limit cxi_limits[FMB_CXI_NRSRC];
    char cxi_libcxi[FMB_CFG_PATH_MAX];
};

/* Names of the CXI resources in the order of cxi_limits[]. */
extern const char *const fmb_cxi_rsrc_names[FMB_CXI_NRSRC];

/* Fill 'cfg' with the built-in defaults (always succeeds). */
void fmb_config_defaults (struct fmb_config *cfg);

/* Read 'path' on top of the defaults.  On failure 'cfg' is untouched. */
int fmb_config_load (struct fmb_config *cfg, const char *path, struct fmb_error *error);

/* The same as a client reads it (the CLI, the node agent, the SPANK
 * plugin): only [api] socket, broker_url, client_token_file,
 * client_ca_file, [broker] log_level, [vni] pool and [cxi] tcs, limits,
 * libcxi are read and checked; every other line, even an unknown key or
 * section, is the broker's to judge and left at its default here. */
int fmb_config_load_client (struct fmb_config *cfg,
                            const char *path,
                            struct fmb_error *error);

/* The same for text held in memory; 'name' stands for the file in messages. */
int fmb_config_load_string (struct fmb_config *cfg,
                            const char *name,
                            const char *text,
                            struct fmb_error *error);

/* Apply one "section.key=value" override (command line) on top of 'cfg'
 * and validate the result; on failure 'cfg' is untouched. */
int fmb_config_set (struct fmb_config *cfg,
                    const char *assignment,
                    struct fmb_error *error);

/* Read 'path' (NULL: none, built-in defaults), apply the "section.key=value"
 * overrides in order, then validate the result once, so that rules which
 * involve several keys see every override whatever their order.  This is
 * what fmbrokerd does at start, on --check-config and on reload. */
int fmb_config_load_with_sets (struct fmb_config *cfg,
                               const char *path,
                               const char *const *sets,
                               int nsets,
                               struct fmb_error *error);

/* "FILE:LINE: [section] key = VALUE" for the key's setting ("FILE:
 * [section] key (default)" or "command line: ..." where it came from
 * there), for messages about a value that passed the parser but not
 * the world (a directory the service cannot create).  'value' may be
 * NULL (not shown). */
void fmb_config_where (const struct fmb_config *cfg,
                       const char *section,
                       const char *key,
                       const char *value,
                       char *buf,
                       size_t size);

/* One problem of a configuration that does not load. */
typedef void (*fmb_config_report_f) (const char *problem, void *arg);

/* fmb_config_load_with_sets, but every problem found (unknown keys, bad
 * values, keys set twice, then the rules between keys) goes to 'report'
 * before it fails, and 'error' says how many there were: what
 * --check-config and start print.  Without 'report', 'error' holds the
 * first and the count of the others. */
int fmb_config_load_all (struct fmb_config *cfg,
                         const char *path,
                         const char *const *sets,
                         int nsets,
                         fmb_config_report_f report,
                         void *arg,
                         struct fmb_error *error);

/* Print the effective configuration as an INI file. */
void fmb_config_dump (const struct fmb_config *cfg, FILE *f);

/* [fabric_manager] auth_dir, or when empty the directory Slurm uses for
 * the auth mode: /etc/wlm-client-auth (oauth) or /etc/fmsim (basic). */
const char *fmb_config_auth_dir (const struct fmb_config *cfg);

/* Multicast addresses a job may reserve (the FM's mcastLimit): addrs_per_job
 * if set, otherwise HPE's formula (total_addrs / (system_nodes / min_nodes))
 * / jobs_per_node.  0 when hardware collectives cannot be sized. */
unsigned fmb_config_mcast_limit (const struct fmb_config *cfg);

/* Parse a traffic-class list ("LOW_LATENCY,BEST_EFFORT") into a mask. */
int fmb_config_parse_tcs (const char *text, unsigned *mask, struct fmb_error *error);
/* The same, refusing classes outside 'allowed' ("this cluster allows
 * only ..."): what users may ask for at submission and in RUN. */
int fmb_config_parse_tcs_within (const char *text,
                                 unsigned allowed,
                                 unsigned *mask,
                                 struct fmb_error *error);
/* "LOW_LATENCY,BEST_EFFORT" for a mask; "none" for 0. */
void fmb_config_tcs_names (unsigned mask, char *out, size_t len);

/* Is 'name' in the comma-separated list 'list'? */
bool fmb_config_list_has (const char *list, const char *name);

#endif

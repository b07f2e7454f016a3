/* config_rules.c: the rules that involve several keys (config_rules.h),
 * and the values derived from several keys (config.h). */
#include "config_rules.h"

#include <string.h>
#include <strings.h>

#include "config_keys.h"
#include "config_values.h"

/* The rules between a client's own keys, all a client checks: the
 * others involve keys it leaves at their defaults (a small [vni] pool
 * against the default max_per_job would stop it for the broker's sake). */
int cfg_client_validate (struct parse_ctx *ctx)
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

/* VNIs 1 and 10 are the NICs' default CXI service's (the driver makes
 * it on every NIC): a job service given either fails to be made
 * (cxil_alloc_svc: EEXIST), so a pool holding one cannot work. */
static const unsigned default_service_vnis[] = {1, 10};

/* The pool holds none of the default service's VNIs nor [vni] reserved. */
static void validate_vni_pool (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
    for (size_t i = 0; i < sizeof (default_service_vnis) / sizeof (unsigned); i++) {
        unsigned v = default_service_vnis[i];
        if (v >= c->vni_min && v <= c->vni_max) {
            cfg_fail (ctx,
                      "vni",
                      "pool",
                      "%u-%u holds VNI %u, which belongs to the NICs' default CXI "
                      "service (VNIs 1 and 10): a job given it cannot get its CXI "
                      "services; start the pool above 10 (the default is 1024-65535)",
                      c->vni_min,
                      c->vni_max,
                      v);
            return;
        }
    }
    const char *cursor = c->vni_reserved;
    unsigned lo, hi;
    struct fmb_error e;
    while (cfg_vni_list_next (&cursor, &lo, &hi, &e) > 0) {
        if (hi < c->vni_min || lo > c->vni_max)
            continue;
        unsigned first = lo > c->vni_min ? lo : c->vni_min;
        cfg_fail (ctx,
                  "vni",
                  "pool",
                  "%u-%u holds VNI %u, which [vni] reserved (%s) keeps for the "
                  "site; choose a pool that leaves out every reserved VNI",
                  c->vni_min,
                  c->vni_max,
                  first,
                  c->vni_reserved);
        return;
    }
}

/* [vni]: a job's VNIs within its maximum, the pool large enough. */
static void validate_vni (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
    validate_vni_pool (ctx);
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
}

/* [fabric_manager]: timeouts, mTLS files, credentials never in clear. */
static void validate_fm (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
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
                  cfg_auth_values[c->fm_auth]);
    if (c->fm_insecure && c->fm_ca_file[0])
        cfg_fail (ctx,
                  "fabric_manager",
                  "insecure",
                  "contradicts ca_file: verify with a CA, or do not verify");
}

/* [api]: the TCP listener's TLS and tokens, client certificates, connections. */
static void validate_api (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
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
}

/* [hwcoll]: the HPE sizing formula gives every job addresses. */
static void validate_hwcoll (struct parse_ctx *ctx)
{
    const struct fmb_config *c = &ctx->cfg;
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
}

/* Every rule, in a fixed order (the problems are listed in it). */
int cfg_validate (struct parse_ctx *ctx)
{
    validate_vni (ctx);
    validate_fm (ctx);
    validate_api (ctx);
    cfg_client_validate (ctx);
    validate_hwcoll (ctx);
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

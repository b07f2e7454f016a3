/* lfclient_shim.c: libfabric 2.6.0's own FM client, driven without a NIC.
 *
 * Why this shape: the provider's FM calls (_create_mcast_addr and its curl
 * callback, _close_mc and _curl_delete_mc_obj behind fi_close) and the
 * join state they work on are static in prov/cxi/src/cxip_coll.c, and
 * fi_join_collective reaches them only through an enabled endpoint on a
 * real Cassini NIC (PtlTEs, command queues, the zbcoll packets between
 * members).  So this file compiles cxip_coll.c itself, unchanged, into
 * its own translation unit, and links everything else of the provider
 * from the cached libfabric.a: cxip_curl.c (libcurl multi, headers,
 * bearer token, 5 s timeout), cxip_info.c (the environment, read when
 * the provider loads), cxip_av.c and cxip_avset.c (addresses).  The
 * archive's own cxip_coll.o is then never pulled in, as every symbol it
 * defines is already defined here.  Compiled with the provider's flags
 * (the cache's cppflags), not the project's: it is upstream code.
 *
 * What stands in for the NIC, and nothing else:
 *   - the domain is a zeroed struct cxip_domain whose interface reports
 *     an ASIC (not NETSIM) platform; the AV is opened on it by the
 *     provider's own cxip_av_open, and addresses go in by fi_av_insert;
 *   - the endpoint is a zeroed struct cxip_ep_obj holding the job's VNI
 *     as its auth key's;
 *   - the steps of the join around the FM call (zbcoll getgroup and
 *     broadcast between members, PtlTE and RDMA set-up) do not run: member
 *     0's FM call runs as _start_bcast starts it, and the provider's
 *     progress (cxip_curl_progress, as cxip_coll_progress_join drives it)
 *     runs until its callback has decided;
 *   - the multicast object handed to fi_close is set up as _initialize_mc
 *     sets it up, without its PtlTE and command queue.
 * libcxi itself is the cache's stub: every cxil_* call answers -ENODEV,
 * which the provider's NIC discovery takes as "no NIC".
 */
#include "cxip_coll.c"

#include "lfclient_shim.h"

#include <errno.h>
#include <stdarg.h>
#include <time.h>

struct lfc_group {
    struct cxil_devinfo devinfo;
    struct cxip_if iface;
    struct cxip_domain *domain;
    struct cxip_ep_obj *ep_obj;
    struct fid_av *av;
    fi_addr_t *fi_addrs;
    size_t count;
};

struct lfc_mc {
    struct cxip_coll_mc *mc_obj;
};

static int shim_err (char *err, size_t errlen, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static int shim_err (char *err, size_t errlen, int errnum, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (err, errlen, fmt, ap);
        va_end (ap);
    }
    return -errnum;
}

int lfc_load (struct lfc_env *env, char *err, size_t errlen)
{
    struct fi_info *hints = fi_allocinfo ();
    struct fi_info *info = NULL;
    if (!hints)
        return shim_err (err, errlen, ENOMEM, "fi_allocinfo: out of memory");
    hints->fabric_attr->prov_name = strdup ("cxi");
    /* With no NIC the answer is -FI_ENODATA; the provider has loaded and
     * read its environment by then, which is all that is asked here. */
    int ret = fi_getinfo (FI_VERSION (2, 0), NULL, NULL, 0, hints, &info);
    fi_freeinfo (hints);
    if (info)
        fi_freeinfo (info);
    if (ret != 0 && ret != -FI_ENODATA)
        return shim_err (err, errlen, EIO, "fi_getinfo: %s", fi_strerror (-ret));
    env->job_id = cxip_env.coll_job_id;
    env->step_id = cxip_env.coll_job_step_id;
    env->url = cxip_env.coll_fabric_mgr_url;
    env->token_set = cxip_env.coll_mcast_token != NULL;
    env->collectives = cxip_collectives_supported;
    return 0;
}

int lfc_group_create (const uint32_t *nics,
                      size_t count,
                      unsigned vni,
                      struct lfc_group **ret,
                      char *err,
                      size_t errlen)
{
    struct lfc_group *g = calloc (1, sizeof (*g));
    struct cxip_addr *addrs = calloc (count, sizeof (*addrs));
    struct fi_av_attr attr = {.type = FI_AV_TABLE, .count = count};
    int rc;
    if (!g || !addrs || !(g->fi_addrs = calloc (count, sizeof (fi_addr_t))) ||
        !(g->domain = calloc (1, sizeof (*g->domain))) ||
        !(g->ep_obj = calloc (1, sizeof (*g->ep_obj)))) {
        rc = shim_err (err, errlen, ENOMEM, "out of memory");
        goto out;
    }
    g->devinfo.device_platform = CXI_PLATFORM_ASIC;
    g->iface.info = &g->devinfo;
    g->domain->iface = &g->iface;
    g->ep_obj->domain = g->domain;
    g->ep_obj->auth_key.vni = vni;
    g->count = count;
    rc = cxip_av_open (&g->domain->util_domain.domain_fid, &attr, &g->av, NULL);
    if (rc) {
        rc = shim_err (err, errlen, EIO, "cxip_av_open: %s", fi_strerror (-rc));
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        addrs[i].nic = nics[i];
    rc = fi_av_insert (g->av, addrs, count, g->fi_addrs, 0, NULL);
    if (rc != (int)count) {
        rc = shim_err (err, errlen, EIO, "fi_av_insert: %d of %zu", rc, count);
        goto out;
    }
    rc = 0;
    *ret = g;
    g = NULL;
out:
    free (addrs);
    if (g) {
        if (g->av)
            fi_close (&g->av->fid);
        free (g->fi_addrs);
        free (g->ep_obj);
        free (g->domain);
        free (g);
    }
    return rc;
}

/* An av_set of the group's addresses, in the AV's order (they were
 * inserted into an empty AV: fi_addr 0..count-1), with no comm_key
 * (COMM_KEY_NONE: the production model, where member 0 asks the FM for a
 * tree). */
static int group_av_set (struct lfc_group *g,
                         struct cxip_av_set **ret,
                         char *err,
                         size_t errlen)
{
    struct fi_av_set_attr attr = {
        .count = g->count,
        .start_addr = g->fi_addrs[0],
        .end_addr = g->fi_addrs[g->count - 1],
        .stride = 1,
    };
    struct fid_av_set *set;
    int rc = fi_av_set (g->av, &attr, &set, NULL);
    if (rc)
        return shim_err (err, errlen, EIO, "fi_av_set: %s", fi_strerror (-rc));
    struct cxip_av_set *s = container_of (set, struct cxip_av_set, av_set_fid);
    for (size_t i = 0; i < g->count; i++) {
        if (s->fi_addr_cnt != g->count || s->fi_addr_ary[i] != g->fi_addrs[i]) {
            fi_close (&set->fid);
            return shim_err (err, errlen, EIO, "fi_av_set: not the group's addresses");
        }
    }
    *ret = s;
    return 0;
}

static long now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The multicast object as _initialize_mc leaves it for member 0, less
 * what needs the NIC (its PtlTE, the command queue's traffic class). */
static struct cxip_coll_mc *mc_from_join (struct cxip_join_state *js)
{
    struct cxip_coll_mc *mc_obj = calloc (1, sizeof (*mc_obj));
    if (!mc_obj)
        return NULL;
    mc_obj->ep_obj = js->ep_obj;
    ofi_atomic_inc32 (&js->ep_obj->coll.num_mc);
    js->av_set_obj->mc_obj = mc_obj;
    mc_obj->av_set_obj = js->av_set_obj;
    mc_obj->is_multicast = true; /* COMM_KEY_NONE */
    mc_obj->mc_fid.fid.fclass = FI_CLASS_MC;
    mc_obj->mc_fid.fid.context = mc_obj;
    mc_obj->mc_fid.fid.ops = &mc_ops;
    mc_obj->mc_fid.fi_addr = (fi_addr_t)(uintptr_t)mc_obj;
    mc_obj->hwroot_idx = js->bcast_data.hwroot_idx;
    mc_obj->mcast_addr = js->bcast_data.mcast_addr;
    mc_obj->mynode_idx = js->mynode_idx;
    mc_obj->max_red_id = CXIP_COLL_MAX_CONCUR;
    for (int red_id = 0; red_id < CXIP_COLL_MAX_CONCUR; red_id++) {
        mc_obj->reduction[red_id].mc_obj = mc_obj;
        mc_obj->reduction[red_id].red_id = red_id;
        dlist_init (&mc_obj->reduction[red_id].tmout_link);
    }
    ofi_spin_init (&mc_obj->lock);
    if (ofi_idm_set (&js->ep_obj->coll.mcast_map, mc_obj->mcast_addr, mc_obj) < 0) {
        free (mc_obj);
        return NULL;
    }
    if (mc_obj->hwroot_idx == (uint32_t)mc_obj->mynode_idx)
        js->ep_obj->coll.is_hwroot = true;
    mc_obj->is_joined = true;
    mc_obj->close_state = FI_SUCCESS;
    return mc_obj;
}

int lfc_join (struct lfc_group *g,
              int timeout_ms,
              struct lfc_join_result *res,
              struct lfc_mc **ret_mc,
              char *err,
              size_t errlen)
{
    struct cxip_join_state *js = calloc (1, sizeof (*js));
    struct lfc_mc *mc = calloc (1, sizeof (*mc));
    int rc;
    if (!js || !mc) {
        rc = shim_err (err, errlen, ENOMEM, "out of memory");
        goto out;
    }
    rc = group_av_set (g, &js->av_set_obj, err, errlen);
    if (rc)
        goto out;
    js->ep_obj = g->ep_obj;
    js->mynode_idx = 0;
    js->mynode_fiaddr = (int)g->fi_addrs[0];
    js->create_mcast = true; /* COMM_KEY_NONE */
    js->creating_mcast = true;
    _create_mcast_addr (js);
    long deadline = now_ms () + timeout_ms;
    while (!js->finished_mcast) {
        if (now_ms () > deadline) {
            /* the request still refers to js: it stays allocated */
            js = NULL;
            rc = shim_err (err, errlen, ETIMEDOUT, "no FM answer in %d ms", timeout_ms);
            goto out;
        }
        if (cxip_curl_progress (NULL) == -FI_EAGAIN)
            usleep (1000);
    }
    /* The provider's verdict; with no tree to hold, the av_set goes. */
    res->prov_errno = js->prov_errno;
    res->mcast_id = js->bcast_data.valid ? (int)js->bcast_data.mcast_addr : -1;
    res->hwroot_idx = js->bcast_data.valid ? (int)js->bcast_data.hwroot_idx : -1;
    *ret_mc = NULL;
    if (js->bcast_data.valid) {
        mc->mc_obj = mc_from_join (js);
        if (!mc->mc_obj) {
            rc = shim_err (err, errlen, ENOMEM, "setting up the multicast object");
            goto out;
        }
        *ret_mc = mc;
        mc = NULL;
    } else {
        fi_close (&js->av_set_obj->av_set_fid.fid);
    }
    rc = 0;
out:
    free (js);
    free (mc);
    return rc;
}

int lfc_mc_close (struct lfc_mc *mc, int *close_ret)
{
    *close_ret = fi_close (&mc->mc_obj->mc_fid.fid);
    free (mc);
    return 0;
}

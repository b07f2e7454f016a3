/* svc.c: see svc.h. */
#include <string.h>

#include "svc.h"

const char *const svc_rsrc_names[CXI_RSRC_TYPE_MAX] = {
    "PTEs", "TXQs", "TGQs", "EQs", "CTs", "LEs", "TLEs", "ACs"};

/* [cxi] limits order (config.c) -> libcxi's enum. */
static const int cfg_to_rsrc[FMB_CXI_NRSRC] = {
    CXI_RSRC_TYPE_TXQ,
    CXI_RSRC_TYPE_TGQ,
    CXI_RSRC_TYPE_EQ,
    CXI_RSRC_TYPE_CT,
    CXI_RSRC_TYPE_TLE,
    CXI_RSRC_TYPE_PTE,
    CXI_RSRC_TYPE_LE,
    CXI_RSRC_TYPE_AC,
};

uint16_t svc_dev_max (const struct cxil_devinfo *dev, int t)
{
    switch (t) {
    case CXI_RSRC_TYPE_PTE:
        return dev->num_ptes;
    case CXI_RSRC_TYPE_TXQ:
        return dev->num_txqs;
    case CXI_RSRC_TYPE_TGQ:
        return dev->num_tgqs;
    case CXI_RSRC_TYPE_EQ:
        return dev->num_eqs;
    case CXI_RSRC_TYPE_CT:
        return dev->num_cts;
    case CXI_RSRC_TYPE_LE:
        return dev->num_les;
    case CXI_RSRC_TYPE_TLE:
        return dev->num_tles;
    case CXI_RSRC_TYPE_AC:
        return dev->num_acs;
    }
    return 0;
}

void svc_recipe (const struct fmb_config *cfg,
                 const struct cxil_devinfo *dev,
                 const struct job_facts *job,
                 struct cxi_svc_desc *d)
{
    unsigned cores = job->ncores ? job->ncores : 1;
    memset (d, 0, sizeof (*d));
    d->restricted_members = 1;
    d->members[0].type = CXI_SVC_MEMBER_UID;
    d->members[0].svc_member.uid = job->uid;
    d->members[1].type = CXI_SVC_MEMBER_IGNORE;
    d->restricted_vnis = 1;
    d->num_vld_vnis = (uint8_t)job->nvnis;
    for (unsigned i = 0; i < job->nvnis && i < CXI_SVC_MAX_VNIS; i++)
        d->vnis[i] = job->vnis[i];
    d->restricted_tcs = 1;
    unsigned tcs = job->tcs ? job->tcs : cfg->cxi_tcs;
    for (int tc = 0; tc < CXI_TC_ETH; tc++)
        d->tcs[tc] = (tcs >> tc) & 1; /* mask bit i is traffic class i */
    if (!(tcs & 0xf))
        d->tcs[CXI_TC_BEST_EFFORT] = true;
    d->resource_limits = 1;
    for (int i = 0; i < FMB_CXI_NRSRC; i++) {
        int t = cfg_to_rsrc[i];
        const struct fmb_cxi_limit *l = &cfg->cxi_limits[i];
        unsigned devmax = svc_dev_max (dev, t);
        unsigned max = l->max < devmax ? l->max : devmax;
        unsigned long res = l->res ? l->res : (unsigned long)l->def * cores;
        if (res > max)
            res = max;
        if (t == CXI_RSRC_TYPE_TLE)
            max = (unsigned)res; /* the driver insists on max = res for TLEs */
        d->limits.type[t].max = (uint16_t)max;
        d->limits.type[t].res = (uint16_t)res;
    }
    d->enable = 1;
}

static bool same_set (const uint16_t *a, unsigned na, const uint16_t *b, unsigned nb)
{
    if (na != nb)
        return false;
    for (unsigned i = 0; i < na; i++) {
        bool found = false;
        for (unsigned j = 0; j < nb; j++)
            found |= a[i] == b[j];
        if (!found)
            return false;
    }
    return true;
}

bool svc_is_job (const struct cxi_svc_desc *d,
                 uint32_t uid,
                 const uint16_t *vnis,
                 unsigned nvnis)
{
    if (d->is_system_svc || d->svc_id == CXI_DEFAULT_SVC_ID || !d->restricted_members ||
        !d->restricted_vnis)
        return false;
    bool member = false;
    for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++)
        if (d->members[i].type == CXI_SVC_MEMBER_UID &&
            d->members[i].svc_member.uid == uid)
            member = true;
    return member && same_set (d->vnis, d->num_vld_vnis, vnis, nvnis);
}

bool svc_scale_back (struct cxi_svc_desc *d,
                     const struct cxi_svc_fail_info *fi,
                     char *what,
                     size_t len)
{
    if (fi->no_tle_pools && d->limits.tles.res) {
        snprintf (
            what, len, "no TLE pool free: creating the service without reserved TLEs");
        d->limits.tles.res = d->limits.tles.max = 0;
        return true;
    }
    if (fi->no_le_pools && d->limits.les.res) {
        snprintf (
            what, len, "no LE pool free: creating the service without reserved LEs");
        d->limits.les.res = 0;
        return true;
    }
    /* The driver stops at the first short type; the ones before it fit. */
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++) {
        if (t == CXI_RSRC_TYPE_TLE)
            continue;
        if (d->limits.type[t].res > fi->rsrc_avail[t]) {
            snprintf (what,
                      len,
                      "only %u %s free of %u requested: reserving %u",
                      fi->rsrc_avail[t],
                      svc_rsrc_names[t],
                      d->limits.type[t].res,
                      fi->rsrc_avail[t]);
            d->limits.type[t].res = fi->rsrc_avail[t];
            return true;
        }
    }
    return false;
}

void svc_print (FILE *f, const char *devname, const struct cxi_svc_desc *d)
{
    fprintf (f, "%s: service%s", devname, d->svc_id ? "" : " (to create)");
    if (d->svc_id)
        fprintf (f, " %u", d->svc_id);
    fprintf (f, ": members uid=%u, vnis=", d->members[0].svc_member.uid);
    for (int i = 0; i < d->num_vld_vnis; i++)
        fprintf (f, "%s%u", i ? "," : "", d->vnis[i]);
    unsigned tcs = 0;
    for (int i = 0; i < CXI_TC_ETH; i++)
        tcs |= d->tcs[i] ? 1u << i : 0;
    fprintf (f, ", tcs=0x%x, limits", tcs);
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        fprintf (f,
                 " %s=%u/%u",
                 svc_rsrc_names[t],
                 d->limits.type[t].res,
                 d->limits.type[t].max);
    fprintf (f, " (reserved/max)\n");
}

/* mockcxi: a test double of HPE's libcxi (soname libcxi.so.1) for the
 * calls fmbroker-cxi makes, with the driver's answers as
 * shared/reference/libcxi-abi.md describes them.  Written from those
 * facts; the structs come from src/agent/cxi_abi.h.
 *
 * State lives in the JSON file named by MOCKCXI_STATE, locked with flock
 * around every call, so separate processes (prolog, epilog, list) see the
 * same NICs and services.  A missing or empty file is initialised from:
 *   MOCKCXI_DEVICES=N        NICs (default 1; 0 allowed)
 *   MOCKCXI_MAX=ptes=..,..   device maxima (default Cassini's)
 *   MOCKCXI_SYSTEM_SVC=1     one system service per NIC ("ethernet-svc")
 *   MOCKCXI_EXACT_VNI_SHARE=1  SHS 14.0.1: services may share an exact VNI
 * At every call:
 *   MOCKCXI_ALLOW_NONROOT=1  do not answer -EPERM to a non-root caller
 *   MOCKCXI_FORCE_EPERM=1    answer -EPERM to changes even for root
 * In the file (tests edit it with jq):
 *   .fail."cxil_alloc_svc" = {"errno": 28, "count": 1, "skip": 0}
 *                            fail N calls after letting 'skip' through
 *   .devices[i].services[j].busy = N   destroy answers -EBUSY N more times
 *   .hold."cxil_alloc_svc" = "PATH"   the next such call takes the hold
 *                            off, creates PATH.held and waits (60 s at
 *                            most) for PATH, outside the lock: a test
 *                            acts while the caller is inside the call
 * Built twice: the newer symbol set, and with MOCKCXI_OLD the SHS <= 13.0
 * one, which has no cxil_svc_enable.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <jansson.h>

#include "cxi_abi.h"

#define EXPORT __attribute__ ((visibility ("default")))

EXPORT cxil_get_device_list_fn cxil_get_device_list;
EXPORT cxil_free_device_list_fn cxil_free_device_list;
EXPORT cxil_open_device_fn cxil_open_device;
EXPORT cxil_close_device_fn cxil_close_device;
EXPORT cxil_alloc_svc_fn cxil_alloc_svc;
EXPORT cxil_destroy_svc_fn cxil_destroy_svc;
EXPORT cxil_get_svc_list_fn cxil_get_svc_list;
EXPORT cxil_free_svc_list_fn cxil_free_svc_list;
EXPORT cxil_get_svc_fn cxil_get_svc;
EXPORT cxil_update_svc_fn cxil_update_svc;
#ifndef MOCKCXI_OLD
EXPORT cxil_svc_enable_fn cxil_svc_enable;
#endif
#define MAX_DEVS           16
#define TLE_POOLS_FOR_JOBS 3 /* 4 per NIC, pool 0 is the default service's */
#define LE_POOLS_FOR_JOBS  15
#define MIN_TLE_RES        8
#ifdef MOCKCXI_OLD
#define MEMBER_MAX 3
#else
#define MEMBER_MAX 4
#endif

static const uint16_t cassini_max[CXI_RSRC_TYPE_MAX] = {
    2048, 1024, 512, 2047, 2047, 16384, 2048, 1022};
static const char *const rsrc_keys[CXI_RSRC_TYPE_MAX] = {
    "ptes", "txqs", "tgqs", "eqs", "cts", "les", "tles", "acs"};

struct mock {
    int fd;
    bool readonly; /* a user's TaskProlog may only read the NICs' state */
    bool dirty;    /* changed since loaded: write it back */
    json_t *root;
    char *text; /* the file as read */
    size_t len;
};

/* The state this process last read or wrote, with its text: a call that
 * reads the same text again takes the tree as it is rather than parsing
 * it (a call's state is small, but the service makes a dozen calls per
 * job, and the double must not cost more than the calls it stands in
 * for).  Used under the exclusive lock only, which every thread takes on
 * an open of its own; the calls that change the tree write it back. */
static struct {
    json_t *root;
    char *text;
    size_t len;
} cache;

static void cache_keep (json_t *root, char *text, size_t len)
{
    json_decref (cache.root);
    free (cache.text);
    cache.root = root ? json_incref (root) : NULL;
    cache.text = root ? text : NULL;
    cache.len = root ? len : 0;
    if (!root)
        free (text);
}

/* At dlclose and exit: the agent unloads the double, after which nothing
 * reaches the cache (LeakSanitizer would call it a leak). */
__attribute__ ((destructor)) static void cache_drop (void)
{
    cache_keep (NULL, NULL, 0);
}

/* ---- state --------------------------------------------------------- */

static void desc_to_json (const struct cxi_svc_desc *d, json_t *svc)
{
    char hex[sizeof (*d) * 2 + 1];
    const unsigned char *p = (const unsigned char *)d;
    for (size_t i = 0; i < sizeof (*d); i++)
        sprintf (hex + 2 * i, "%02x", p[i]);
    json_object_set_new (svc, "desc", json_string (hex));
    /* Decoded copies for people and tests; the hex is the truth. */
    json_t *vnis = json_array (), *lim = json_object ();
    for (int i = 0; i < d->num_vld_vnis && i < CXI_SVC_MAX_VNIS; i++)
        json_array_append_new (vnis, json_integer (d->vnis[i]));
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        json_object_set_new (lim,
                             rsrc_keys[t],
                             json_pack ("{s:i, s:i}",
                                        "max",
                                        d->limits.type[t].max,
                                        "res",
                                        d->limits.type[t].res));
    json_object_set_new (svc, "id", json_integer (d->svc_id));
    json_object_set_new (svc, "flags", json_integer (p[0]));
    json_object_set_new (svc, "vnis", vnis);
    json_object_set_new (svc, "limits", lim);
    json_object_set_new (svc,
                         "member0",
                         json_pack ("{s:i, s:i}",
                                    "type",
                                    d->members[0].type,
                                    "id",
                                    (int)d->members[0].svc_member.uid));
    int tcs = 0;
    for (int i = 0; i < CXI_TC_MAX; i++)
        tcs |= d->tcs[i] ? 1 << i : 0;
    json_object_set_new (svc, "tcs_bits", json_integer (tcs));
}

static int desc_from_json (json_t *svc, struct cxi_svc_desc *d)
{
    const char *hex = json_string_value (json_object_get (svc, "desc"));
    unsigned char *p = (unsigned char *)d;
    if (!hex || strlen (hex) != sizeof (*d) * 2)
        return -1;
    for (size_t i = 0; i < sizeof (*d); i++) {
        unsigned v;
        if (sscanf (hex + 2 * i, "%2x", &v) != 1)
            return -1;
        p[i] = (unsigned char)v;
    }
    return 0;
}

static json_t *make_service (const struct cxi_svc_desc *d)
{
    json_t *svc = json_pack ("{s:i}", "busy", 0);
    desc_to_json (d, svc);
    return svc;
}

static void init_state (json_t *root)
{
    const char *n = getenv ("MOCKCXI_DEVICES");
    int ndev = n ? atoi (n) : 1;
    uint16_t max[CXI_RSRC_TYPE_MAX];
    memcpy (max, cassini_max, sizeof (max));
    const char *m = getenv ("MOCKCXI_MAX");
    if (m) {
        char buf[512];
        char *save = NULL;
        snprintf (buf, sizeof (buf), "%s", m);
        for (char *tok = strtok_r (buf, ",", &save); tok;
             tok = strtok_r (NULL, ",", &save))
            for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
                if (strncmp (tok, rsrc_keys[t], strlen (rsrc_keys[t])) == 0 &&
                    tok[strlen (rsrc_keys[t])] == '=')
                    max[t] = (uint16_t)atoi (tok + strlen (rsrc_keys[t]) + 1);
    }
    json_t *devs = json_array ();
    for (int i = 0; i < ndev && i < MAX_DEVS; i++) {
        json_t *maxa = json_array ();
        for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
            json_array_append_new (maxa, json_integer (max[t]));
        json_t *svcs = json_array ();
        /* The default service: id 1, disabled, VNIs 1 and 10, 512 TLEs. */
        struct cxi_svc_desc d = {.restricted_vnis = 1,
                                 .resource_limits = 1,
                                 .num_vld_vnis = 2,
                                 .vnis = {1, 10},
                                 .svc_id = CXI_DEFAULT_SVC_ID};
        for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
            d.limits.type[t].max = max[t];
        d.limits.tles.res = 512;
        for (int tc = 0; tc < CXI_TC_ETH; tc++)
            d.tcs[tc] = true;
        json_array_append_new (svcs, make_service (&d));
        if (getenv ("MOCKCXI_SYSTEM_SVC")) {
            struct cxi_svc_desc s = {.restricted_members = 1,
                                     .resource_limits = 1,
                                     .enable = 1,
                                     .is_system_svc = 1,
                                     .svc_id = 2};
            s.members[0].type = CXI_SVC_MEMBER_UID;
            s.members[0].svc_member.uid = 0;
            s.limits.les.max = 64;
            s.limits.les.res = 64;
            json_array_append_new (svcs, make_service (&s));
        }
        char name[16], pci[32];
        snprintf (name, sizeof (name), "cxi%d", i);
        snprintf (pci, sizeof (pci), "0000:%02x:00.0", 0x1c + i);
        json_array_append_new (devs,
                               json_pack ("{s:i, s:s, s:i, s:s, s:o, s:o}",
                                          "dev_id",
                                          i,
                                          "name",
                                          name,
                                          "nid",
                                          0x1000 + i,
                                          "pci",
                                          pci,
                                          "max",
                                          maxa,
                                          "services",
                                          svcs));
    }
    json_object_set_new (root, "devices", devs);
    json_object_set_new (root, "fail", json_object ());
    json_object_set_new (root,
                         "exact_vni_share",
                         json_boolean (getenv ("MOCKCXI_EXACT_VNI_SHARE") != NULL));
}

/* Lock and load the state; fails with -EIO if there is no usable file. */
static int mock_open (struct mock *m)
{
    const char *path = getenv ("MOCKCXI_STATE");
    m->root = NULL;
    m->text = NULL;
    m->fd = -1;
    m->readonly = false;
    m->dirty = false;
    if (!path)
        return -ENODEV;
    m->fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m->fd < 0 && errno == EACCES) {
        m->fd = open (path, O_RDONLY | O_CLOEXEC);
        m->readonly = true;
    }
    if (m->fd >= 0 && flock (m->fd, m->readonly ? LOCK_SH : LOCK_EX) < 0) {
        close (m->fd); /* unlocked: mock_close must not touch the cache */
        m->fd = -1;
    }
    if (m->fd < 0)
        return -EIO;
    json_error_t jerr;
    off_t size = lseek (m->fd, 0, SEEK_END);
    lseek (m->fd, 0, SEEK_SET);
    if (size > 0) {
        /* One read, not json_loadfd's one read(2) per byte: the double
         * must not cost more than the calls it stands in for. */
        char *text = malloc ((size_t)size + 1);
        ssize_t got = text ? read (m->fd, text, (size_t)size) : -1;
        if (got != (ssize_t)size) {
            free (text);
            return -EIO;
        }
        m->text = text;
        m->len = (size_t)got;
        if (!m->readonly && cache.root && cache.len == m->len &&
            memcmp (cache.text, text, m->len) == 0)
            m->root = json_incref (cache.root);
        else
            m->root = json_loadb (text, m->len, 0, &jerr);
    } else {
        m->root = json_object ();
        init_state (m->root);
        m->dirty = true;
    }
    return m->root ? 0 : -EIO;
}

static void mock_close (struct mock *m, bool save)
{
    json_t *current = m->readonly ? NULL : m->root; /* the file's, as read */
    if ((save || m->dirty) && current) {
        char *s = json_dumps (m->root, JSON_COMPACT | JSON_SORT_KEYS);
        free (m->text);
        m->text = s;
        m->len = s ? strlen (s) : 0;
        if (!s || ftruncate (m->fd, 0) < 0 || lseek (m->fd, 0, SEEK_SET) < 0 ||
            write (m->fd, s, m->len) != (ssize_t)m->len)
            current = NULL; /* the file is not this tree: parse it next time */
    }
    if (!m->readonly && m->fd >= 0)
        cache_keep (current, m->text, m->len); /* takes the text */
    else
        free (m->text);
    json_decref (m->root);
    if (m->fd >= 0)
        close (m->fd); /* releases the lock */
}

static json_t *device (struct mock *m, unsigned dev_id)
{
    return json_array_get (json_object_get (m->root, "devices"), dev_id);
}

/* A failure the test asked for, consumed; 0 if none. */
static int forced (struct mock *m, const char *fn)
{
    json_t *f = json_object_get (json_object_get (m->root, "fail"), fn);
    json_int_t count = json_integer_value (json_object_get (f, "count"));
    json_int_t skip = json_integer_value (json_object_get (f, "skip"));
    if (!f || count <= 0)
        return 0;
    if (skip > 0) { /* let this many calls through first */
        json_object_set_new (f, "skip", json_integer (skip - 1));
        m->dirty = true;
        return 0;
    }
    json_object_set_new (f, "count", json_integer (count - 1));
    m->dirty = true;
    return -(int)json_integer_value (json_object_get (f, "errno"));
}

/* A hold the test asked for on 'fn', taken off the state (saved at
 * close): the path to wait for, or NULL. */
static char *hold_taken (struct mock *m, const char *fn)
{
    json_t *holds = json_object_get (m->root, "hold");
    const char *path = json_string_value (json_object_get (holds, fn));
    char *release = path ? strdup (path) : NULL;
    if (release) {
        json_object_del (holds, fn);
        m->dirty = true;
    }
    return release;
}

/* The hold waited out, unlocked (other processes see and change the
 * NICs meanwhile): PATH.held made, then PATH waited for.  Takes 'release'. */
static void hold_wait (char *release)
{
    char marker[4200];
    snprintf (marker, sizeof (marker), "%s.held", release);
    int fd = open (marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close (fd);
    for (int i = 0; i < 6000 && access (release, F_OK) < 0; i++)
        usleep (10000);
    free (release);
}

static bool may_change (void)
{
    if (getenv ("MOCKCXI_FORCE_EPERM"))
        return false;
    return geteuid () == 0 || getenv ("MOCKCXI_ALLOW_NONROOT");
}

static void fill_devinfo (json_t *dev, struct cxil_devinfo *info)
{
    memset (info, 0, sizeof (*info));
    info->dev_id = (unsigned)json_integer_value (json_object_get (dev, "dev_id"));
    info->nid = (unsigned)json_integer_value (json_object_get (dev, "nid"));
    snprintf (info->device_name,
              sizeof (info->device_name),
              "%s",
              json_string_value (json_object_get (dev, "name")));
    snprintf (info->driver_name, sizeof (info->driver_name), "cxi_ss1");
    info->vendor_id = 0x17db;
    info->device_id = 0x0501;
    json_t *max = json_object_get (dev, "max");
    uint16_t mx[CXI_RSRC_TYPE_MAX] = {0};
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        mx[t] = (uint16_t)json_integer_value (json_array_get (max, t));
    info->num_ptes = mx[CXI_RSRC_TYPE_PTE];
    info->num_txqs = mx[CXI_RSRC_TYPE_TXQ];
    info->num_tgqs = mx[CXI_RSRC_TYPE_TGQ];
    info->num_eqs = mx[CXI_RSRC_TYPE_EQ];
    info->num_cts = mx[CXI_RSRC_TYPE_CT];
    info->num_acs = mx[CXI_RSRC_TYPE_AC];
    info->num_tles = mx[CXI_RSRC_TYPE_TLE];
    info->num_les = mx[CXI_RSRC_TYPE_LE];
    unsigned dom, bus, slot, fn;
    if (sscanf (json_string_value (json_object_get (dev, "pci")),
                "%x:%x:%x.%x",
                &dom,
                &bus,
                &slot,
                &fn) == 4) {
        info->pci_domain = (uint16_t)dom;
        info->pci_bus = (uint8_t)bus;
        info->pci_device = (uint8_t)slot;
        info->pci_function = (uint8_t)fn;
    }
    info->link_mtu = 2112;
    info->link_speed = 200000;
    info->link_state = 1;
    snprintf (info->fru_description, sizeof (info->fru_description), "mock NIC");
}

/* ---- devices ------------------------------------------------------- */

EXPORT int cxil_get_device_list (struct cxil_device_list **out)
{
    struct mock m;
    int rc = mock_open (&m);
    if (rc == -ENODEV) { /* no state file configured: no NICs */
        *out = calloc (1, sizeof (**out));
        return *out ? 0 : -ENOMEM;
    }
    if (rc < 0 || (rc = forced (&m, "cxil_get_device_list")) < 0) {
        mock_close (&m, false);
        return rc;
    }
    json_t *devs = json_object_get (m.root, "devices");
    size_t n = json_array_size (devs);
    struct cxil_device_list *l = calloc (1, sizeof (*l) + n * sizeof (l->info[0]));
    if (!l) {
        mock_close (&m, false);
        return -ENOMEM;
    }
    l->count = (unsigned)n;
    for (size_t i = 0; i < n; i++)
        fill_devinfo (json_array_get (devs, i), &l->info[i]);
    mock_close (&m, false);
    *out = l;
    return 0;
}

EXPORT void cxil_free_device_list (struct cxil_device_list *l)
{
    free (l);
}

EXPORT int cxil_open_device (uint32_t dev_id, struct cxil_dev **out)
{
    struct mock m;
    if (!out)
        return -EINVAL;
    int rc = mock_open (&m);
    if (rc < 0) {
        mock_close (&m, false);
        return rc == -ENODEV ? -ENOENT : rc;
    }
    json_t *dev = device (&m, dev_id);
    if ((rc = forced (&m, "cxil_open_device")) < 0 || !dev) {
        mock_close (&m, false);
        return rc < 0 ? rc : -ENOENT;
    }
    struct cxil_dev *d = calloc (1, sizeof (*d));
    if (!d) {
        mock_close (&m, false);
        return -ENOMEM;
    }
    fill_devinfo (dev, &d->info);
    mock_close (&m, false);
    *out = d;
    return 0;
}

EXPORT void cxil_close_device (struct cxil_dev *d)
{
    free (d);
}

/* ---- services ------------------------------------------------------ */

static bool vnis_overlap (const struct cxi_svc_desc *a,
                          const struct cxi_svc_desc *b,
                          bool exact_share)
{
    if (!a->restricted_vnis || !b->restricted_vnis)
        return false;
    for (int i = 0; i < a->num_vld_vnis; i++)
        for (int j = 0; j < b->num_vld_vnis; j++)
            if (a->vnis[i] == b->vnis[j]) {
                if (!exact_share)
                    return true;
                /* 14.0.1: sharing is fine only for the exact same set */
                if (a->num_vld_vnis != b->num_vld_vnis ||
                    memcmp (a->vnis, b->vnis, a->num_vld_vnis * sizeof (a->vnis[0])) !=
                        0)
                    return true;
            }
    return false;
}

static int check_desc (const struct cxi_svc_desc *d, const uint16_t max[])
{
    if (d->restricted_vnis) {
        if (d->num_vld_vnis > CXI_SVC_MAX_VNIS)
            return -EINVAL;
        for (int i = 0; i < d->num_vld_vnis; i++)
            if (d->vnis[i] == 0)
                return -EINVAL;
    }
    if (d->restricted_members)
        for (int i = 0; i < CXI_SVC_MAX_MEMBERS; i++)
            if (d->members[i].type < 0 || d->members[i].type >= MEMBER_MAX)
                return -EINVAL;
    if (d->resource_limits)
        for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
            if (d->limits.type[t].max < d->limits.type[t].res ||
                d->limits.type[t].max > max[t])
                return -EINVAL;
    return 0;
}

EXPORT int cxil_alloc_svc (struct cxil_dev *dev,
                           const struct cxi_svc_desc *in,
                           struct cxi_svc_fail_info *fail)
{
    struct mock m;
    if (!dev || !in)
        return -EINVAL;
    int rc = mock_open (&m);
    /* (a reader, who cannot take the hold off, does not wait for it) */
    char *release = rc == 0 && !m.readonly ? hold_taken (&m, "cxil_alloc_svc") : NULL;
    if (release) {
        mock_close (&m, false);
        hold_wait (release);
        rc = mock_open (&m);
    }
    if (rc < 0) {
        mock_close (&m, false);
        return rc;
    }
    json_t *devj = device (&m, dev->info.dev_id);
    json_t *svcs = json_object_get (devj, "services");
    struct cxi_svc_desc d = *in;
    uint16_t max[CXI_RSRC_TYPE_MAX];
    bool share = json_is_true (json_object_get (m.root, "exact_vni_share"));
    struct cxi_svc_fail_info fi = {0};
    size_t i;
    json_t *s;
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        max[t] = (uint16_t)json_integer_value (
            json_array_get (json_object_get (devj, "max"), t));
    if (!may_change ())
        rc = -EPERM;
    else if ((rc = forced (&m, "cxil_alloc_svc")) < 0)
        ;
    else if (!devj)
        rc = -ENODEV;
    else
        rc = check_desc (&d, max);
    if (rc == 0) {
        /* TLEs: any non-zero limit becomes at least 8 reserved, max = res. */
        if (d.resource_limits && (d.limits.tles.res || d.limits.tles.max)) {
            if (d.limits.tles.res < MIN_TLE_RES)
                d.limits.tles.res = MIN_TLE_RES;
            d.limits.tles.max = d.limits.tles.res;
        }
        unsigned used[CXI_RSRC_TYPE_MAX] = {0}, tle_pools = 0, le_pools = 0;
        json_array_foreach (svcs, i, s)
        {
            struct cxi_svc_desc o;
            if (desc_from_json (s, &o) < 0)
                continue;
            if (vnis_overlap (&d, &o, share))
                rc = -EEXIST;
            for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
                used[t] += o.resource_limits ? o.limits.type[t].res : 0;
            if (o.svc_id != CXI_DEFAULT_SVC_ID && o.limits.tles.res)
                tle_pools++;
            if (o.limits.les.res)
                le_pools++;
        }
        if (rc == 0 && d.resource_limits) {
            for (int t = 0; t < CXI_RSRC_TYPE_MAX && rc == 0; t++) {
                if (!d.limits.type[t].res && !d.limits.type[t].max)
                    continue;
                if (t == CXI_RSRC_TYPE_TLE)
                    continue; /* shortage shows as no_tle_pools, never in rsrc_avail */
                unsigned avail = max[t] > used[t] ? max[t] - used[t] : 0;
                fi.rsrc_avail[t] = (uint16_t)avail;
                if (d.limits.type[t].res > avail)
                    rc = -ENOSPC; /* the kernel stops at the first short type */
            }
            if (rc == 0 && d.limits.tles.res && tle_pools >= TLE_POOLS_FOR_JOBS) {
                fi.no_tle_pools = true;
                rc = -ENOSPC;
            }
            if (rc == 0 && d.limits.les.res && le_pools >= LE_POOLS_FOR_JOBS) {
                fi.no_le_pools = true;
                rc = -ENOSPC;
            }
        }
    }
    if (rc == 0) {
        unsigned id = 1;
        for (bool taken = true; taken; id++) {
            taken = false;
            json_array_foreach (
                svcs, i, s) if (json_integer_value (json_object_get (s, "id")) == id)
                taken = true;
            if (!taken)
                break;
        }
        d.svc_id = id;
#ifdef MOCKCXI_OLD
        d.enable = 1; /* <= 13.0: always enabled */
#else
        d.enable = d.restricted_vnis ? 1 : 0;
#endif
        json_array_append_new (svcs, make_service (&d));
        rc = (int)id;
    } else if (fail)
        *fail = fi;
    mock_close (&m, true);
    return rc;
}

static json_t *find_service (json_t *devj, unsigned id, size_t *index)
{
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get (devj, "services"),
                        i,
                        s) if (json_integer_value (json_object_get (s, "id")) == id)
    {
        if (index)
            *index = i;
        return s;
    }
    return NULL;
}

EXPORT int cxil_destroy_svc (struct cxil_dev *dev, unsigned int svc_id)
{
    struct mock m;
    if (svc_id < 1)
        return -EINVAL;
    int rc = mock_open (&m);
    if (rc < 0) {
        mock_close (&m, false);
        return rc;
    }
    json_t *devj = device (&m, dev->info.dev_id);
    size_t idx;
    json_t *s = find_service (devj, svc_id, &idx);
    if (!may_change ())
        rc = -EPERM;
    else if ((rc = forced (&m, "cxil_destroy_svc")) < 0)
        ;
    else if (!s || svc_id == CXI_DEFAULT_SVC_ID)
        rc = -EINVAL;
    else if (json_integer_value (json_object_get (s, "busy")) > 0) {
        json_object_set_new (
            s,
            "busy",
            json_integer (json_integer_value (json_object_get (s, "busy")) - 1));
        rc = -EBUSY;
    } else
        json_array_remove (json_object_get (devj, "services"), idx);
    mock_close (&m, true);
    return rc;
}

EXPORT int cxil_get_svc_list (struct cxil_dev *dev, struct cxil_svc_list **out)
{
    struct mock m;
    int rc = mock_open (&m);
    if (rc < 0 || (rc = forced (&m, "cxil_get_svc_list")) < 0) {
        mock_close (&m, rc != -EIO);
        return rc;
    }
    json_t *svcs = json_object_get (device (&m, dev->info.dev_id), "services");
    size_t n = json_array_size (svcs), i;
    json_t *s;
    struct cxil_svc_list *l = calloc (1, sizeof (*l) + n * sizeof (l->descs[0]));
    if (!l) {
        mock_close (&m, false);
        return -ENOMEM;
    }
    json_array_foreach (svcs, i, s)
    {
        desc_from_json (s, &l->descs[l->count++]);
    }
    mock_close (&m, false);
    *out = l;
    return 0;
}

EXPORT void cxil_free_svc_list (struct cxil_svc_list *l)
{
    free (l);
}

EXPORT int cxil_get_svc (struct cxil_dev *dev,
                         unsigned int svc_id,
                         struct cxi_svc_desc *out)
{
    struct mock m;
    int rc = mock_open (&m);
    if (rc < 0) {
        mock_close (&m, false);
        return rc;
    }
    json_t *s = find_service (device (&m, dev->info.dev_id), svc_id, NULL);
    rc = s && desc_from_json (s, out) == 0 ? 0 : -EINVAL;
    mock_close (&m, false);
    return rc;
}

/* Set the stored enable bit (update and svc_enable share this). */
static int set_enable (struct cxil_dev *dev,
                       unsigned svc_id,
                       int enable,
                       const struct cxi_svc_desc *replace)
{
    struct mock m;
    int rc = mock_open (&m);
    if (rc < 0) {
        mock_close (&m, false);
        return rc;
    }
    json_t *s = find_service (device (&m, dev->info.dev_id), svc_id, NULL);
    struct cxi_svc_desc d;
    if (!may_change ())
        rc = -EPERM;
    else if (!s || desc_from_json (s, &d) < 0)
        rc = -EINVAL;
    else if (json_integer_value (json_object_get (s, "busy")) > 0)
        rc = -EBUSY;
    else if (replace && replace->resource_limits != d.resource_limits)
        rc = -EINVAL;
    else {
        if (replace) {
            struct cxi_rsrc_limits keep = d.limits;
            d = *replace;
            d.limits = keep;
        } else
            d.enable = enable ? 1 : 0;
        d.svc_id = svc_id;
        desc_to_json (&d, s);
    }
    mock_close (&m, rc == 0);
    return rc;
}

EXPORT int cxil_update_svc (struct cxil_dev *dev,
                            const struct cxi_svc_desc *desc,
                            struct cxi_svc_fail_info *fail)
{
    (void)fail;
    if (!dev || !desc)
        return -EINVAL;
    return set_enable (dev, desc->svc_id, desc->enable, desc);
}

#ifndef MOCKCXI_OLD
EXPORT int cxil_svc_enable (struct cxil_dev *dev, unsigned int svc_id, bool enable)
{
    if (svc_id < 1)
        return -EINVAL;
    return set_enable (dev, svc_id, enable, NULL);
}
#endif

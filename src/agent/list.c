/* list.c: every NIC and its services (list.h). */
#include "list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "svc.h"

static json_t *svc_json (const struct cxi_svc_desc *d)
{
    json_t *vnis = json_array (), *lim = json_object ();
    unsigned tcs = 0;
    for (int i = 0; i < d->num_vld_vnis; i++)
        json_array_append_new (vnis, json_integer (d->vnis[i]));
    for (int i = 0; i < CXI_TC_ETH; i++)
        tcs |= d->tcs[i] ? 1u << i : 0;
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        json_object_set_new (lim,
                             svc_rsrc_names[t],
                             json_pack ("{s:i, s:i}",
                                        "reserved",
                                        d->limits.type[t].res,
                                        "max",
                                        d->limits.type[t].max));
    char tc[8];
    snprintf (tc, sizeof (tc), "0x%x", tcs);
    json_t *o = json_pack ("{s:i, s:b, s:b, s:b, s:o, s:s, s:o}",
                           "svc_id",
                           d->svc_id,
                           "system",
                           d->is_system_svc,
                           "default",
                           d->svc_id == CXI_DEFAULT_SVC_ID,
                           "enabled",
                           d->enable,
                           "vnis",
                           vnis,
                           "tcs",
                           tc,
                           "limits",
                           lim);
    if (d->restricted_members && d->members[0].type == CXI_SVC_MEMBER_UID)
        json_object_set_new (o, "uid", json_integer (d->members[0].svc_member.uid));
    return o;
}

static void numa_of (const struct cxil_devinfo *i, char *pci, size_t plen, int *numa)
{
    char path[128];
    snprintf (pci,
              plen,
              "%04x:%02x:%02x.%x",
              i->pci_domain,
              i->pci_bus,
              i->pci_device,
              i->pci_function);
    snprintf (path, sizeof (path), "/sys/bus/pci/devices/%s/numa_node", pci);
    FILE *f = fopen (path, "r");
    *numa = -1;
    if (f) {
        if (fscanf (f, "%d", numa) != 1)
            *numa = -1;
        fclose (f);
    }
}

/* One table row for service 's', naming every NIC that has an identical
 * one; 'done' remembers the services printed already. */
static void print_service_once (json_t *nics, json_t *s, json_t *done)
{
    size_t k, m;
    char *key = json_dumps (s, JSON_COMPACT | JSON_SORT_KEYS);
    if (json_object_get (done, key)) {
        free (key);
        return;
    }
    json_object_set_new (done, key, json_true ());
    char devs[128] = "", vnis[64] = "", id[24];
    json_t *n2, *s2, *v;
    json_array_foreach (nics, k, n2)
    {
        json_array_foreach (json_object_get (n2, "services"), m, s2)
        {
            if (json_equal (s, s2))
                snprintf (devs + strlen (devs),
                          sizeof (devs) - strlen (devs),
                          "%s%s",
                          devs[0] ? "," : "",
                          json_string_value (json_object_get (n2, "device")));
        }
    }
    free (key);
    json_array_foreach (json_object_get (s, "vnis"), m, v)
    {
        snprintf (vnis + strlen (vnis),
                  sizeof (vnis) - strlen (vnis),
                  "%s%lld",
                  m ? "," : "",
                  (long long)json_integer_value (v));
    }
    snprintf (id,
              sizeof (id),
              "%lld%s%s",
              (long long)json_integer_value (json_object_get (s, "svc_id")),
              json_is_true (json_object_get (s, "system")) ? "/sys" : "",
              json_is_true (json_object_get (s, "enabled")) ? "" : "-");
    json_t *uid = json_object_get (s, "uid");
    char uidtext[16] = "-";
    if (uid)
        snprintf (
            uidtext, sizeof (uidtext), "%lld", (long long)json_integer_value (uid));
    printf ("%-10s %-8s %-6s %-16s %-5s",
            devs,
            id,
            uidtext,
            vnis[0] ? vnis : "-",
            json_string_value (json_object_get (s, "tcs")));
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        printf (" %5lld",
                (long long)json_integer_value (json_object_get (
                    json_object_get (json_object_get (s, "limits"), svc_rsrc_names[t]),
                    "reserved")));
    putchar ('\n');
}

/* The NICs, then their services (identical ones on several NICs on one
 * line), as tables. */
static void print_nics (json_t *nics)
{
    size_t i, j;
    json_t *nic, *s;
    printf ("%-6s %-8s %-12s %s\n", "NIC", "ADDRESS", "PCI", "NUMA");
    json_array_foreach (nics, i, nic)
    {
        json_t *numa = json_object_get (nic, "numa");
        char numa_text[16] = "-";
        if (json_is_integer (numa))
            snprintf (numa_text,
                      sizeof (numa_text),
                      "%lld",
                      (long long)json_integer_value (numa));
        printf ("%-6s %-8s %-12s %s\n",
                json_string_value (json_object_get (nic, "device")),
                json_string_value (json_object_get (nic, "nic_address")),
                json_string_value (json_object_get (nic, "pci")),
                numa_text);
    }
    /* Services, identical ones on several NICs on one line. */
    printf ("\n%-10s %-8s %-6s %-16s %-5s", "NICS", "SVC", "UID", "VNIS", "TCS");
    for (int t = 0; t < CXI_RSRC_TYPE_MAX; t++)
        printf (" %5s", svc_rsrc_names[t]);
    putchar ('\n');
    json_t *done = json_object ();
    json_array_foreach (nics, i, nic)
    {
        json_array_foreach (json_object_get (nic, "services"), j, s)
        {
            print_service_once (nics, s, done);
        }
    }
    json_decref (done);
}

int cmd_list (struct agent *ag)
{
    struct cxil_device_list *dl;
    if (devices_list (ag, &dl) < 0)
        return EXIT_FAIL;
    json_t *nics = json_array ();
    for (unsigned i = 0; dl && i < dl->count; i++) {
        struct cxil_dev *dev;
        struct cxil_svc_list *sl = NULL;
        char pci[32];
        int numa;
        numa_of (&dl->info[i], pci, sizeof (pci), &numa);
        json_t *svcs = json_array ();
        if (ag->lib.open_device (dl->info[i].dev_id, &dev) == 0) {
            if (ag->lib.get_svc_list (dev, &sl) == 0)
                for (unsigned s = 0; s < sl->count; s++)
                    json_array_append_new (svcs, svc_json (&sl->descs[s]));
            free (sl);
            ag->lib.close_device (dev);
        }
        char nid[16];
        snprintf (nid, sizeof (nid), "%#x", dl->info[i].nid);
        json_t *nic = json_pack ("{s:s, s:s, s:s, s:o}",
                                 "device",
                                 dl->info[i].device_name,
                                 "nic_address",
                                 nid,
                                 "pci",
                                 pci,
                                 "services",
                                 svcs);
        json_object_set_new (
            nic, "numa", numa >= 0 ? json_integer (numa) : json_null ());
        json_array_append_new (nics, nic);
    }
    if (dl)
        ag->lib.free_device_list (dl);
    if (ag->args.json) {
        json_dumpf (nics, stdout, JSON_COMPACT);
        putchar ('\n');
        json_decref (nics);
        return 0;
    }
    print_nics (nics);
    json_decref (nics);
    return 0;
}

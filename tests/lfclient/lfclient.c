/* lfclient: run libfabric's own FM client (lfclient_shim.c) as rank 0 of
 * a collective would, with the environment a task was given.
 *
 *   lfclient [--joins N] [--close] [--timeout-ms MS] NIC...
 *
 * NIC: the members' CXI NIC addresses in the form libfabric sends them
 * (H:HH:HH, e.g. 1:A2:B3), member 0 first.  The endpoint's VNI is the
 * first of SLINGSHOT_VNIS, as the provider takes it (cxip_nic.c: index 0
 * is the job step's VNI).  FI_CXI_COLL_* are read by the provider itself.
 * N joins (default 1) over the same members, each one line:
 *     join I prov_errno=E (NAME) mcast_id=M hwroot_idx=H
 * then with --close, fi_close on each joined object, one line each:
 *     close mcast_id=M ret=R
 * Without --close the objects stay open, as a task that ends without
 * closing them leaves them (their trees stay at the FM).  Exit 0 when
 * every step ran (whatever the FM answered), 1 when one could not, 2 on
 * bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lfclient_shim.h"

#define LFC_MAX_NICS  64
#define LFC_MAX_JOINS 64 /* more than any mcastLimit a test sets */

/* FI_CXI_ERRNO_JOIN_* of prov/cxi/include/fi_cxi_ext.h, from 2048 on */
static const char *const join_errnames[] = {
    "MCAST_INUSE",
    "HWROOT_INUSE",
    "MCAST_INVALID",
    "HWROOT_INVALID",
    "CURL_FAILED",
    "CURL_TIMEOUT",
    "SERVER_ERR",
    "FAIL_PTE",
    "OTHER",
    "FAIL_RDMA",
};

static const char *join_errname (int prov_errno)
{
    size_t n = sizeof (join_errnames) / sizeof (join_errnames[0]);
    if (prov_errno == 0)
        return "ok";
    if (prov_errno >= 2048 && (size_t)(prov_errno - 2048) < n)
        return join_errnames[prov_errno - 2048];
    return "unknown";
}

/* "H:HH:HH" -> the 20-bit NIC address, or -1 */
static long parse_nic (const char *s)
{
    unsigned a, b, c;
    char tail;
    if (sscanf (s, "%x:%x:%x%c", &a, &b, &c, &tail) != 3 || a > 0xf || b > 0xff ||
        c > 0xff)
        return -1;
    return (long)((a << 16) | (b << 8) | c);
}

static int job_vni (unsigned *vni)
{
    const char *s = getenv ("SLINGSHOT_VNIS");
    char *end;
    if (!s || !*s)
        return -1;
    unsigned long v = strtoul (s, &end, 10);
    if (end == s || (*end && *end != ',') || v == 0 || v > 65535)
        return -1;
    *vni = (unsigned)v;
    return 0;
}

static void usage (void)
{
    fprintf (stderr,
             "usage: lfclient [--joins N] [--close] [--timeout-ms MS] NIC...\n");
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        {"joins", required_argument, NULL, 'j'},
        {"close", no_argument, NULL, 'c'},
        {"timeout-ms", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    int joins = 1, timeout_ms = 20000, close_them = 0, o;
    while ((o = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'j':
            joins = atoi (optarg);
            break;
        case 'c':
            close_them = 1;
            break;
        case 't':
            timeout_ms = atoi (optarg);
            break;
        default:
            usage ();
            return 2;
        }
    }
    int count = argc - optind;
    if (count < 1 || count > LFC_MAX_NICS || joins < 1 || joins > LFC_MAX_JOINS ||
        timeout_ms < 1) {
        usage ();
        return 2;
    }
    uint32_t nics[LFC_MAX_NICS];
    for (int i = 0; i < count; i++) {
        long nic = parse_nic (argv[optind + i]);
        if (nic < 0) {
            fprintf (stderr,
                     "lfclient: %s: not a NIC address (H:HH:HH)\n",
                     argv[optind + i]);
            return 2;
        }
        nics[i] = (uint32_t)nic;
    }
    unsigned vni;
    if (job_vni (&vni) < 0) {
        fprintf (stderr, "lfclient: SLINGSHOT_VNIS is unset or malformed\n");
        return 2;
    }

    char err[256];
    struct lfc_env env;
    if (lfc_load (&env, err, sizeof (err)) < 0) {
        fprintf (stderr, "lfclient: loading the CXI provider: %s\n", err);
        return 1;
    }
    printf ("env job_id=%s step_id=%s url=%s token=%s collectives=%s vni=%u\n",
            env.job_id ? env.job_id : "(unset)",
            env.step_id ? env.step_id : "(unset)",
            env.url ? env.url : "(unset)",
            env.token_set ? "set" : "(unset)",
            env.collectives ? "yes" : "no",
            vni);
    struct lfc_group *g;
    if (lfc_group_create (nics, (size_t)count, vni, &g, err, sizeof (err)) < 0) {
        fprintf (stderr, "lfclient: %s\n", err);
        return 1;
    }
    struct lfc_mc *mcs[LFC_MAX_JOINS];
    int mc_ids[LFC_MAX_JOINS], nmc = 0;
    for (int i = 1; i <= joins; i++) {
        struct lfc_join_result r;
        struct lfc_mc *mc;
        if (lfc_join (g, timeout_ms, &r, &mc, err, sizeof (err)) < 0) {
            fprintf (stderr, "lfclient: join %d: %s\n", i, err);
            return 1;
        }
        printf ("join %d prov_errno=%d (%s) mcast_id=%d hwroot_idx=%d\n",
                i,
                r.prov_errno,
                join_errname (r.prov_errno),
                r.mcast_id,
                r.hwroot_idx);
        if (mc) {
            mc_ids[nmc] = r.mcast_id;
            mcs[nmc++] = mc;
        }
    }
    for (int i = 0; close_them && i < nmc; i++) {
        int ret;
        lfc_mc_close (mcs[i], &ret);
        printf ("close mcast_id=%d ret=%d\n", mc_ids[i], ret);
    }
    fflush (stdout);
    return 0;
}

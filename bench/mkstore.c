/* fmbench-mkstore DB KEY TOTAL ACTIVE: a store with TOTAL jobs, of which
 * ACTIVE are active with a reservation and a VNI, the rest released
 * (benchmark 5: start-up and reconciliation at scale).  One transaction. */
#include <stdio.h>
#include <stdlib.h>

#include "store.h"

int main (int argc, char **argv)
{
    struct store *st;
    struct fmb_error e;
    if (argc != 5) {
        fprintf (stderr, "usage: fmbench-mkstore DB KEY TOTAL ACTIVE\n");
        return 2;
    }
    long total = atol (argv[3]), active = atol (argv[4]);
    if (store_open (argv[1], argv[2], &st, &e) < 0 || store_begin (st, &e) < 0) {
        fprintf (stderr, "%s\n", e.text);
        return 1;
    }
    for (long i = 0; i < total; i++) {
        struct store_job j = {
            .node_count = 64,
            .request = "{}",
            .state = i < active ? STORE_JOB_ACTIVE : STORE_JOB_RELEASED,
            .hwcoll = i < active ? STORE_HWCOLL_RESERVED : STORE_HWCOLL_RELEASED,
            .mcast_limit = 4,
            .token = i < active ? "0123456789abcdef0123456789abcdef" : NULL,
            .uid = 1000,
        };
        uint16_t v[1];
        snprintf (j.id, sizeof (j.id), "%ld", i);
        snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-%ld", i);
        if (store_job_put (st, &j, &e) < 0 ||
            (i < active && store_vni_alloc (st, j.id, 1, 1024, 65535, v, &e) < 0)) {
            fprintf (stderr, "%s\n", e.text);
            return 1;
        }
    }
    if (store_commit (st, &e) < 0) {
        fprintf (stderr, "%s\n", e.text);
        return 1;
    }
    store_close (st);
    return 0;
}

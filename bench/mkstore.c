/* fmbench-mkstore DB KEY TOTAL ACTIVE [SPAN_DAYS]: a store with TOTAL jobs,
 * of which ACTIVE are active with a reservation and a VNI (ids 0..ACTIVE-1,
 * FM ids c1-N), the rest released (ids rN) at times spread evenly over the
 * last SPAN_DAYS days (default 40: with retain_days = 30 the oldest quarter
 * is due for retention, as after a broker was down or retention was
 * lowered), each with the nodes, steps and event a real one leaves
 * (store_fill_released says which).  One transaction.
 * With TOTAL 0 it only opens DB, bringing its schema up to date. */
#include <stdio.h>
#include <stdlib.h>

#include "monotime.h"
#include "store.h"

int main (int argc, char **argv)
{
    struct store *st;
    struct fmb_error e;
    if (argc != 5 && argc != 6) {
        fprintf (stderr, "usage: fmbench-mkstore DB KEY TOTAL ACTIVE [SPAN_DAYS]\n");
        return 2;
    }
    long total = atol (argv[3]), active = atol (argv[4]);
    long span_days = argc == 6 ? atol (argv[5]) : 40;
    int64_t now = fmb_realtime_ms ();
    if (active > total || span_days < 0) {
        fprintf (stderr, "fmbench-mkstore: ACTIVE <= TOTAL and SPAN_DAYS >= 0\n");
        return 2;
    }
    if (total == 0 && store_open (argv[1], argv[2], &st, &e) == 0) {
        store_close (st);
        return 0;
    }
    if (store_open (argv[1], argv[2], &st, &e) < 0 || store_begin (st, &e) < 0 ||
        store_fill_released (
            st, total - active, now - span_days * 86400000LL, now, &e) < 0) {
        fprintf (stderr, "%s\n", e.text);
        return 1;
    }
    for (long i = 0; i < active; i++) {
        struct store_job j = {
            .node_count = 64,
            .request = "{}",
            .state = STORE_JOB_ACTIVE,
            .hwcoll = STORE_HWCOLL_RESERVED,
            .mcast_limit = 4,
            .token = "0123456789abcdef0123456789abcdef",
            .uid = 1000,
        };
        uint16_t v[1];
        snprintf (j.id, sizeof (j.id), "%ld", i);
        snprintf (j.fm_job_id, sizeof (j.fm_job_id), "c1-%ld", i);
        if (store_job_put (st, &j, &e) < 0 ||
            store_vni_alloc (st, j.id, 1, 1024, 65535, v, &e) < 0) {
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

/* status.c: what /metrics and /v1/status say: the store's gauges, the FM
 * session, and the broker's counters (metrics.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "http.h"
#include "fmsession.h"
#include "store.h"
#include "log.h"
#include "metrics.h"
#include "status.h"

static int count_job_state (struct broker *b, enum store_job_state s, unsigned *n)
{
    struct fmb_error e;
    if (store_job_count (b->st, s, n, &e) < 0) {
        *n = 0;
        return -1;
    }
    return 0;
}

/* The store's gauges: jobs, outbox, VNIs, multicast reservations. */
static void store_gauges (struct broker *b, FILE *f)
{
    struct fmb_error e;
    fprintf (f,
             "# HELP fmbroker_jobs Jobs in the store by state.\n# TYPE fmbroker_jobs "
             "gauge\n");
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++) {
        unsigned n;
        count_job_state (b, s, &n);
        fprintf (f, "fmbroker_jobs{state=\"%s\"} %u\n", store_job_state_name (s), n);
    }
    unsigned depth = 0, held = 0, quarantined = 0;
    /* each read on its own: one count that cannot be read (logged) must
     * not blank the others */
    if (store_outbox_depth (b->st, &depth, &e) < 0)
        broker_log_store_error (b, "metrics", &e);
    if (store_vni_counts (b->st, &held, &quarantined, &e) < 0)
        broker_log_store_error (b, "metrics", &e);
    fprintf (f, "# HELP fmbroker_outbox_depth FM operations waiting in the outbox.\n");
    fprintf (
        f, "# TYPE fmbroker_outbox_depth gauge\nfmbroker_outbox_depth %u\n", depth);
    fprintf (
        f,
        "# HELP fmbroker_vnis VNIs by state; the pool has fmbroker_vni_pool_size.\n");
    fprintf (f, "# TYPE fmbroker_vnis gauge\n");
    fprintf (
        f,
        "fmbroker_vnis{state=\"held\"} %u\nfmbroker_vnis{state=\"quarantined\"} %u\n",
        held,
        quarantined);
    fprintf (f,
             "# HELP fmbroker_vni_pool_size VNIs in the configured pool.\n"
             "# TYPE fmbroker_vni_pool_size gauge\nfmbroker_vni_pool_size %u\n",
             b->cfg.vni_max - b->cfg.vni_min + 1);
    unsigned rjobs = 0, addrs = 0;
    if (store_hwcoll_usage (b->st, &rjobs, &addrs, &e) < 0)
        broker_log_store_error (b, "metrics", &e);
    fprintf (f,
             "# HELP fmbroker_mcast_addresses_reserved Multicast addresses reserved at "
             "the FM for live jobs.\n");
    fprintf (f,
             "# TYPE fmbroker_mcast_addresses_reserved "
             "gauge\nfmbroker_mcast_addresses_reserved %u\n",
             addrs);
    fprintf (
        f,
        "# HELP fmbroker_mcast_reservations Live jobs holding a multicast "
        "reservation at the FM.\n"
        "# TYPE fmbroker_mcast_reservations gauge\nfmbroker_mcast_reservations %u\n",
        rjobs);
}

char *broker_metrics_text (struct broker *b)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    if (!f)
        return NULL;
    store_gauges (b, f);
    fprintf (f, "# HELP fmbroker_fm_up 1 when the fabric manager session is up.\n");
    fprintf (f,
             "# TYPE fmbroker_fm_up gauge\nfmbroker_fm_up %d\n",
             fmsession_state (b->fms) == FM_UP);
    metrics_print_fm (b->metrics, f);
    metrics_print_counters (b->metrics, f);
    http_print_tls (b->http, f);
    fclose (f);
    return buf;
}

/* The status page's "fabric_manager", "state_lock" and "outbox". */
static json_t *fm_status (struct broker *b)
{
    json_t *fm = json_pack ("{s:b, s:s, s:I}",
                            "configured",
                            b->fmc != NULL,
                            "state",
                            fm_state_name (fmsession_state (b->fms)),
                            "since_ms",
                            (json_int_t)fmsession_since (b->fms));
    if (b->fmc)
        json_object_set_new (fm, "url", json_string (b->cfg.fm_url));
    if (fmsession_state (b->fms) == FM_DOWN)
        json_object_set_new (fm, "last_error", json_string (fmsession_error (b->fms)));
    return fm;
}

static json_t *lock_status (struct broker *b)
{
    return json_pack ("{s:s, s:s, s:I, s:I}",
                      "file",
                      b->lock.path,
                      "host",
                      b->lock.host,
                      "pid",
                      (json_int_t)b->lock.pid,
                      "since_ms",
                      (json_int_t)b->lock.since_ms);
}

static json_t *outbox_status (struct broker *b)
{
    struct fmb_error e;
    unsigned depth = 0;
    int64_t next = 0;
    if (store_outbox_depth (b->st, &depth, &e) < 0)
        broker_log_store_error (b, "status", &e);
    json_t *outbox = json_pack ("{s:i}", "depth", (int)depth);
    if (store_outbox_next_ms (b->st, &next, &e) == 0 && next != INT64_MAX)
        json_object_set_new (outbox, "next_due_ms", json_integer (next));
    return outbox;
}

/* The jobs by state, in the store's one list's order. */
static json_t *job_counts (const unsigned *counts)
{
    json_t *o = json_object ();
    for (int s = 0; o && s < STORE_JOB_STATE_COUNT; s++)
        json_object_set_new (o, store_job_state_name (s), json_integer (counts[s]));
    return o;
}

json_t *broker_status (struct broker *b)
{
    struct fmb_error e;
    unsigned counts[STORE_JOB_STATE_COUNT] = {0}, held = 0, quarantined = 0, cursor = 0,
             rjobs = 0, addrs = 0;
    int64_t last = 0, free_vnis = 0;
    for (int s = 0; s < STORE_JOB_STATE_COUNT; s++)
        count_job_state (b, s, &counts[s]);
    if (store_vni_counts (b->st, &held, &quarantined, &e) < 0 ||
        store_vni_left (
            b->st, b->cfg.vni_min, b->cfg.vni_max, held, quarantined, &free_vnis, &e) <
            0)
        broker_log_store_error (b, "status", &e);
    if (store_hwcoll_usage (b->st, &rjobs, &addrs, &e) < 0)
        broker_log_store_error (b, "status", &e);
    store_vni_cursor (b->st, &cursor, &e);
    store_event_last (b->st, &last, &e);
    return json_pack (
        "{s:s, s:s, s:I, s:o, s:o, s:o, s:o,"
        " s:{s:i, s:i, s:i, s:i, s:I, s:i}, s:{s:i, s:i, s:i, s:i}, s:{s:I}}",
        "version",
        FMB_VERSION,
        "cluster",
        b->cfg.cluster_name,
        "uptime_s",
        (json_int_t)((now_wall () - b->started_ms) / 1000),
        "fabric_manager",
        fm_status (b),
        "state_lock",
        lock_status (b),
        "outbox",
        outbox_status (b),
        "jobs",
        job_counts (counts),
        "vnis",
        "pool_min",
        (int)b->cfg.vni_min,
        "pool_max",
        (int)b->cfg.vni_max,
        "held",
        (int)held,
        "quarantined",
        (int)quarantined,
        "free",
        (json_int_t)(free_vnis > 0 ? free_vnis : 0),
        "cursor",
        (int)cursor,
        "hwcoll",
        "reservations",
        (int)rjobs,
        "addresses_reserved",
        (int)addrs,
        "addrs_per_job",
        (int)fmb_config_mcast_limit (&b->cfg),
        "min_nodes",
        (int)b->cfg.hwcoll_min_nodes,
        "events",
        "last_seq",
        (json_int_t)last);
}

/* metrics.c: the broker's metrics (Prometheus text) and status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "log.h"

static const unsigned pass_bounds_ms[PASS_BUCKETS] = {
    1, 2, 5, 10, 20, 50, 100, 250, 1000};

/* The bucket of 'ms' among 'n' upper bounds (n: over the last). */
static int bucket_of (double ms, const unsigned *bounds, int n)
{
    int k;
    for (k = 0; k < n; k++)
        if (ms <= bounds[k])
            break;
    return k;
}

void broker_note_stall (struct broker *b, int64_t us, int64_t commit_us)
{
    struct metrics *m = &b->metrics;
    m->pass_busy[bucket_of ((double)us / 1000, pass_bounds_ms, PASS_BUCKETS)]++;
    m->pass_busy_sum += (double)us / 1e6;
    int64_t now = now_mono ();
    if (now - m->stall_window >= STALL_WINDOW_MS) {
        /* a window with no pass at all leaves nothing to remember */
        bool last = now - m->stall_window < 2 * STALL_WINDOW_MS;
        m->stall_us[1] = last ? m->stall_us[0] : 0;
        m->stall_commit_us[1] = last ? m->stall_commit_us[0] : 0;
        m->stall_us[0] = m->stall_commit_us[0] = 0;
        m->stall_window = now;
    }
    if (us > m->stall_us[0]) {
        m->stall_us[0] = us;
        m->stall_commit_us[0] = commit_us;
    }
}

static const unsigned lat_bounds_ms[LAT_BUCKETS] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

void broker_observe_fm (const struct fmc_result *res, void *arg)
{
    struct broker *b = arg;
    unsigned op = res->op;
    if (b->fms)
        fmsession_heard (b->fms, res);
    if (op >= FM_OPS)
        return;
    if ((unsigned)res->status < FM_RESULTS)
        b->metrics.fm_calls[op][res->status]++;
    b->metrics
        .fm_latency[op][bucket_of (res->elapsed_ms, lat_bounds_ms, LAT_BUCKETS)]++;
    b->metrics.fm_latency_sum[op] += res->elapsed_ms / 1000.0;
}

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

/* One histogram's series: 'counts' per bucket of 'bounds' (ms) and one
 * over the last; 'label' is empty or ends with a comma. */
static void histogram (FILE *f,
                       const char *name,
                       const char *label,
                       const unsigned *bounds,
                       int n,
                       const unsigned long *counts,
                       double sum)
{
    unsigned long cum = 0;
    for (int k = 0; k <= n; k++) {
        cum += counts[k];
        if (k < n)
            fprintf (f,
                     "%s_bucket{%sle=\"%g\"} %lu\n",
                     name,
                     label,
                     bounds[k] / 1000.0,
                     cum);
        else
            fprintf (f, "%s_bucket{%sle=\"+Inf\"} %lu\n", name, label, cum);
    }
    /* 9 digits: a sum of seconds that grows for months keeps its ms */
    if (!label[0]) /* no "{}" */
        fprintf (f, "%s_sum %.9g\n%s_count %lu\n", name, sum, name, cum);
    else {
        int len = (int)strlen (label) - 1; /* without its comma */
        fprintf (f, "%s_sum{%.*s} %.9g\n", name, len, label, sum);
        fprintf (f, "%s_count{%.*s} %lu\n", name, len, label, cum);
    }
}

/* The FM session and its calls: counts and latency histograms. */
static void fm_metrics (struct broker *b, FILE *f)
{
    fprintf (f, "# HELP fmbroker_fm_up 1 when the fabric manager session is up.\n");
    fprintf (f,
             "# TYPE fmbroker_fm_up gauge\nfmbroker_fm_up %d\n",
             fmsession_state (b->fms) == FM_UP);
    fprintf (f,
             "# HELP fmbroker_fm_requests_total FM HTTP calls by call and result (each "
             "call of a reservation counts).\n");
    fprintf (f, "# TYPE fmbroker_fm_requests_total counter\n");
    for (int op = 0; op < FM_OPS; op++)
        for (int r = 0; r < FM_RESULTS; r++)
            if (b->metrics.fm_calls[op][r])
                fprintf (f,
                         "fmbroker_fm_requests_total{call=\"%s\",result=\"%s\"} %lu\n",
                         fmc_op_name (op),
                         fmc_status_name ((enum fmc_status)r),
                         b->metrics.fm_calls[op][r]);
    fprintf (f,
             "# HELP fmbroker_fm_request_duration_seconds FM call latency, from the "
             "call leaving to its answer.\n");
    fprintf (f, "# TYPE fmbroker_fm_request_duration_seconds histogram\n");
    for (int op = 0; op < FM_OPS; op++) {
        char label[32];
        snprintf (label, sizeof (label), "call=\"%s\",", fmc_op_name (op));
        histogram (f,
                   "fmbroker_fm_request_duration_seconds",
                   label,
                   lat_bounds_ms,
                   LAT_BUCKETS,
                   b->metrics.fm_latency[op],
                   b->metrics.fm_latency_sum[op]);
    }
}

/* The broker's own counters: answers, reconciliation, retention, stalls. */
static void broker_counters (struct broker *b, FILE *f)
{
    fprintf (f,
             "# HELP fmbroker_http_responses_total API responses by status class.\n"
             "# TYPE fmbroker_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        fprintf (f,
                 "fmbroker_http_responses_total{code=\"%dxx\"} %lu\n",
                 c,
                 b->metrics.http_by_class[c]);
    fprintf (f,
             "# HELP fmbroker_reconcile_runs_total Reconciliations with the FM's "
             "job list.\n"
             "# TYPE fmbroker_reconcile_runs_total "
             "counter\nfmbroker_reconcile_runs_total %lu\n",
             b->metrics.reconcile_runs);
    fprintf (f,
             "# HELP fmbroker_orphans_released_total FM reservations of this cluster "
             "released because no live job owned them.\n"
             "# TYPE fmbroker_orphans_released_total "
             "counter\nfmbroker_orphans_released_total %lu\n",
             b->metrics.orphans_released);
    fprintf (f,
             "# HELP fmbroker_foreign_reservations FM reservations with this "
             "cluster's prefix that the broker has no record of creating.\n"
             "# TYPE fmbroker_foreign_reservations gauge\n"
             "fmbroker_foreign_reservations %lu\n"
             "# HELP fmbroker_foreign_reaped_total Foreign reservations deleted.\n"
             "# TYPE fmbroker_foreign_reaped_total counter\n"
             "fmbroker_foreign_reaped_total %lu\n",
             b->metrics.foreign_reservations,
             b->metrics.foreign_reaped);
    fprintf (f,
             "# HELP fmbroker_api_auth_failures_total TCP requests whose bearer "
             "token or node token was refused.\n"
             "# TYPE fmbroker_api_auth_failures_total counter\n"
             "fmbroker_api_auth_failures_total %lu\n"
             "# HELP fmbroker_api_auth_delayed_total Refused authentications "
             "answered late (repeated failures from one address).\n"
             "# TYPE fmbroker_api_auth_delayed_total counter\n"
             "fmbroker_api_auth_delayed_total %lu\n"
             "# HELP fmbroker_api_tcp_refused_total TCP connections closed at "
             "accept (tcp_max_connections, tcp_max_unauthenticated, per address).\n"
             "# TYPE fmbroker_api_tcp_refused_total counter\n"
             "fmbroker_api_tcp_refused_total %lu\n",
             b->metrics.auth_failures,
             b->metrics.auth_delayed,
             b->metrics.tcp_refused);
    fprintf (f,
             "# HELP fmbroker_reservations_lost_total Active jobs whose FM "
             "reservation vanished.\n"
             "# TYPE fmbroker_reservations_lost_total "
             "counter\nfmbroker_reservations_lost_total %lu\n",
             b->metrics.reservations_lost);
    fprintf (f,
             "# HELP fmbroker_pruned_total History deleted by [broker] retain_days.\n"
             "# TYPE fmbroker_pruned_total counter\n"
             "fmbroker_pruned_total{what=\"jobs\"} %lu\n"
             "fmbroker_pruned_total{what=\"events\"} %lu\n",
             b->metrics.pruned_jobs,
             b->metrics.pruned_events);
    int longest = b->metrics.stall_us[0] > b->metrics.stall_us[1] ? 0 : 1;
    fprintf (f,
             "# HELP fmbroker_prune_slices_total Retention slices that deleted "
             "something.\n"
             "# TYPE fmbroker_prune_slices_total counter\n"
             "fmbroker_prune_slices_total %lu\n"
             "# HELP fmbroker_reconcile_slices_total Slices of reconciliation "
             "(reading the active and lost jobs, matching the FM's listing).\n"
             "# TYPE fmbroker_reconcile_slices_total counter\n"
             "fmbroker_reconcile_slices_total %lu\n"
             "# HELP fmbroker_loop_stall_seconds Longest single pass of the broker's "
             "loop over the last one to two minutes.\n"
             "# TYPE fmbroker_loop_stall_seconds gauge\n"
             "fmbroker_loop_stall_seconds %.6f\n"
             "# HELP fmbroker_loop_stall_commit_seconds Of that longest pass, the "
             "time the store's commits and WAL copies took (waiting for the disk, "
             "mostly).\n"
             "# TYPE fmbroker_loop_stall_commit_seconds gauge\n"
             "fmbroker_loop_stall_commit_seconds %.6f\n",
             b->metrics.prune_slices,
             b->metrics.reconcile_slices,
             (double)b->metrics.stall_us[longest] / 1e6,
             (double)b->metrics.stall_commit_us[longest] / 1e6);
    fprintf (f,
             "# HELP fmbroker_loop_pass_seconds Every turn of the broker's loop "
             "since start (what it did after one wait for input: a pass, and "
             "the one that sends its answers): the time it held the loop.\n"
             "# TYPE fmbroker_loop_pass_seconds histogram\n");
    histogram (f,
               "fmbroker_loop_pass_seconds",
               "",
               pass_bounds_ms,
               PASS_BUCKETS,
               b->metrics.pass_busy,
               b->metrics.pass_busy_sum);
    fprintf (f,
             "# HELP fmbroker_build_info The running fmbrokerd's version (always 1).\n"
             "# TYPE fmbroker_build_info gauge\n"
             "fmbroker_build_info{version=\"%s\"} 1\n",
             FMB_VERSION);
}

char *broker_metrics_text (struct broker *b)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    if (!f)
        return NULL;
    store_gauges (b, f);
    fm_metrics (b, f);
    broker_counters (b, f);
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

/* {"active": n, ...}: each job state, in the store's order. */
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

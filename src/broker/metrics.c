/* metrics.c: the broker's counters and their Prometheus text (metrics.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define STALL_WINDOW_MS 60000 /* the stall metric covers 1-2 windows */

#define FM_OPS       FMC_OP_COUNT           /* fmclient.h: FMC_OPS, the one list */
#define FM_RESULTS   (FMC_UNAUTHORIZED + 1) /* the statuses an FM answer has */
#define LAT_BUCKETS  12
#define PASS_BUCKETS 9 /* the loop pass histogram's bounds */

struct metrics {
    unsigned long fm_calls[FM_OPS][FM_RESULTS];
    unsigned long fm_latency[FM_OPS][LAT_BUCKETS + 1]; /* cumulative-ready counts */
    double fm_latency_sum[FM_OPS];
    unsigned long http_by_class[6]; /* 1xx..5xx */
    unsigned long named[METRIC_COUNT];
    /* The longest loop pass (time spent not waiting for input), in this
     * window and the one before, and the time its commits took. */
    int64_t stall_us[2];
    int64_t stall_commit_us[2];
    int64_t stall_window; /* monotonic ms when the current window began */
    /* every pass's time (since start): how often the loop is held, not
     * only its longest hold */
    unsigned long pass_busy[PASS_BUCKETS + 1];
    double pass_busy_sum;
};

static const unsigned pass_bounds_ms[PASS_BUCKETS] = {
    1, 2, 5, 10, 20, 50, 100, 250, 1000};

struct metrics *metrics_create (void)
{
    return calloc (1, sizeof (struct metrics));
}

void metrics_destroy (struct metrics *m)
{
    free (m);
}

/* The bucket of 'ms' among 'n' upper bounds (n: over the last). */
static int bucket_of (double ms, const unsigned *bounds, int n)
{
    int k;
    for (k = 0; k < n; k++)
        if (ms <= bounds[k])
            break;
    return k;
}

void metrics_pass (struct metrics *m, int64_t us, int64_t commit_us, int64_t now)
{
    m->pass_busy[bucket_of ((double)us / 1000, pass_bounds_ms, PASS_BUCKETS)]++;
    m->pass_busy_sum += (double)us / 1e6;
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

void metrics_count_status (struct metrics *m, int status)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        m->http_by_class[cls]++;
}

void metrics_add (struct metrics *m, enum metric which, unsigned long n)
{
    m->named[which] += n;
}

void metrics_set (struct metrics *m, enum metric which, unsigned long value)
{
    m->named[which] = value;
}

static const unsigned lat_bounds_ms[LAT_BUCKETS] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

void metrics_fm_call (struct metrics *m, const struct fmc_result *res)
{
    unsigned op = res->op;
    if (op >= FM_OPS) /* FMC_OP_RESERVE: never observed */
        return;
    if ((unsigned)res->status < FM_RESULTS)
        m->fm_calls[op][res->status]++;
    m->fm_latency[op][bucket_of (res->elapsed_ms, lat_bounds_ms, LAT_BUCKETS)]++;
    m->fm_latency_sum[op] += res->elapsed_ms / 1000.0;
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

void metrics_print_fm (const struct metrics *m, FILE *f)
{
    fprintf (f,
             "# HELP fmbroker_fm_requests_total FM HTTP calls by call and result (each "
             "call of a reservation counts).\n");
    fprintf (f, "# TYPE fmbroker_fm_requests_total counter\n");
    for (int op = 0; op < FM_OPS; op++)
        for (int r = 0; r < FM_RESULTS; r++)
            if (m->fm_calls[op][r])
                fprintf (f,
                         "fmbroker_fm_requests_total{call=\"%s\",result=\"%s\"} %lu\n",
                         fmc_op_name (op),
                         fmc_status_name ((enum fmc_status)r),
                         m->fm_calls[op][r]);
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
                   m->fm_latency[op],
                   m->fm_latency_sum[op]);
    }
}

/* The named counters' series, in enum metric's order: each with its HELP
 * and TYPE lines, but for a second series of the same name (head NULL). */
static const struct {
    const char *head;
    const char *series;
} named_series[METRIC_COUNT] = {
    [METRIC_RECONCILE_RUNS] =
        {"# HELP fmbroker_reconcile_runs_total Reconciliations with "
         "the FM's job list.\n"
         "# TYPE fmbroker_reconcile_runs_total counter\n",
         "fmbroker_reconcile_runs_total"},
    [METRIC_ORPHANS_RELEASED] =
        {"# HELP fmbroker_orphans_released_total FM reservations "
         "of this cluster released because no live job owned "
         "them.\n"
         "# TYPE fmbroker_orphans_released_total counter\n",
         "fmbroker_orphans_released_total"},
    [METRIC_FOREIGN_RESERVATIONS] = {"# HELP fmbroker_foreign_reservations FM "
                                     "reservations with this cluster's prefix that the "
                                     "broker has no record of creating.\n"
                                     "# TYPE fmbroker_foreign_reservations gauge\n",
                                     "fmbroker_foreign_reservations"},
    [METRIC_FOREIGN_REAPED] = {"# HELP fmbroker_foreign_reaped_total Foreign "
                               "reservations deleted.\n"
                               "# TYPE fmbroker_foreign_reaped_total counter\n",
                               "fmbroker_foreign_reaped_total"},
    [METRIC_AUTH_FAILURES] = {"# HELP fmbroker_api_auth_failures_total TCP requests "
                              "whose bearer token or node token was refused.\n"
                              "# TYPE fmbroker_api_auth_failures_total counter\n",
                              "fmbroker_api_auth_failures_total"},
    [METRIC_AUTH_DELAYED] = {"# HELP fmbroker_api_auth_delayed_total Refused "
                             "authentications answered late (repeated failures from "
                             "one address).\n"
                             "# TYPE fmbroker_api_auth_delayed_total counter\n",
                             "fmbroker_api_auth_delayed_total"},
    [METRIC_TCP_REFUSED] = {"# HELP fmbroker_api_tcp_refused_total TCP connections "
                            "closed at accept (tcp_max_connections, "
                            "tcp_max_unauthenticated, per address).\n"
                            "# TYPE fmbroker_api_tcp_refused_total counter\n",
                            "fmbroker_api_tcp_refused_total"},
    [METRIC_TCP_EVICTED] = {"# HELP fmbroker_api_tcp_evicted_total TCP connections "
                            "that had shown no credential, cut to make room for a "
                            "new one (tcp_max_connections, tcp_max_unauthenticated).\n"
                            "# TYPE fmbroker_api_tcp_evicted_total counter\n",
                            "fmbroker_api_tcp_evicted_total"},
    [METRIC_RESERVATIONS_LOST] = {"# HELP fmbroker_reservations_lost_total Active jobs "
                                  "whose FM reservation vanished.\n"
                                  "# TYPE fmbroker_reservations_lost_total counter\n",
                                  "fmbroker_reservations_lost_total"},
    [METRIC_PRUNED_JOBS] = {"# HELP fmbroker_pruned_total History deleted by [broker] "
                            "retain_days.\n"
                            "# TYPE fmbroker_pruned_total counter\n",
                            "fmbroker_pruned_total{what=\"jobs\"}"},
    [METRIC_PRUNED_EVENTS] = {NULL, "fmbroker_pruned_total{what=\"events\"}"},
    [METRIC_PRUNE_SLICES] = {"# HELP fmbroker_prune_slices_total Retention slices that "
                             "deleted something.\n"
                             "# TYPE fmbroker_prune_slices_total counter\n",
                             "fmbroker_prune_slices_total"},
    [METRIC_RECONCILE_SLICES] = {"# HELP fmbroker_reconcile_slices_total Slices of "
                                 "reconciliation (reading the active and lost jobs, "
                                 "matching the FM's listing).\n"
                                 "# TYPE fmbroker_reconcile_slices_total counter\n",
                                 "fmbroker_reconcile_slices_total"},
};

void metrics_print_counters (const struct metrics *m, FILE *f)
{
    fprintf (f,
             "# HELP fmbroker_http_responses_total API responses by status class.\n"
             "# TYPE fmbroker_http_responses_total counter\n");
    for (int c = 1; c <= 5; c++)
        fprintf (f,
                 "fmbroker_http_responses_total{code=\"%dxx\"} %lu\n",
                 c,
                 m->http_by_class[c]);
    for (int i = 0; i < METRIC_COUNT; i++)
        fprintf (f,
                 "%s%s %lu\n",
                 named_series[i].head ? named_series[i].head : "",
                 named_series[i].series,
                 m->named[i]);
    int longest = m->stall_us[0] > m->stall_us[1] ? 0 : 1;
    fprintf (f,
             "# HELP fmbroker_loop_stall_seconds Longest single pass of the broker's "
             "loop over the last one to two minutes.\n"
             "# TYPE fmbroker_loop_stall_seconds gauge\n"
             "fmbroker_loop_stall_seconds %.6f\n"
             "# HELP fmbroker_loop_stall_commit_seconds Of that longest pass, the "
             "time the store's commits and WAL copies took (waiting for the disk, "
             "mostly).\n"
             "# TYPE fmbroker_loop_stall_commit_seconds gauge\n"
             "fmbroker_loop_stall_commit_seconds %.6f\n",
             (double)m->stall_us[longest] / 1e6,
             (double)m->stall_commit_us[longest] / 1e6);
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
               m->pass_busy,
               m->pass_busy_sum);
    fprintf (f,
             "# HELP fmbroker_build_info The running fmbrokerd's version (always 1).\n"
             "# TYPE fmbroker_build_info gauge\n"
             "fmbroker_build_info{version=\"%s\"} 1\n",
             FMB_VERSION);
}

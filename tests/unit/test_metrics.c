/* test_metrics.c: the counters context and its Prometheus text. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "testutil.h"

/* What metrics_print_* write, malloc'd. */
static char *text_of (const struct metrics *m, bool fm)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&buf, &len);
    assert_non_null (f);
    if (fm)
        metrics_print_fm (m, f);
    else
        metrics_print_counters (m, f);
    fclose (f);
    return buf;
}

static void assert_has (const char *text, const char *line)
{
    if (!strstr (text, line))
        fail_msg ("missing: %s", line);
}

static void answers_are_counted_by_class (void **state)
{
    (void)state;
    struct metrics *m = metrics_create ();
    assert_non_null (m);
    metrics_count_status (m, 200);
    metrics_count_status (m, 202);
    metrics_count_status (m, 404);
    metrics_count_status (m, 503);
    metrics_count_status (m, 99);  /* no class: not counted */
    metrics_count_status (m, 600); /* nor this */
    char *t = text_of (m, false);
    assert_has (t, "fmbroker_http_responses_total{code=\"1xx\"} 0\n");
    assert_has (t, "fmbroker_http_responses_total{code=\"2xx\"} 2\n");
    assert_has (t, "fmbroker_http_responses_total{code=\"4xx\"} 1\n");
    assert_has (t, "fmbroker_http_responses_total{code=\"5xx\"} 1\n");
    free (t);
    metrics_destroy (m);
}

static void named_counters_add_and_gauges_set (void **state)
{
    (void)state;
    struct metrics *m = metrics_create ();
    metrics_add (m, METRIC_PRUNED_JOBS, 3);
    metrics_add (m, METRIC_PRUNED_JOBS, 4);
    metrics_add (m, METRIC_PRUNED_EVENTS, 5);
    metrics_set (m, METRIC_FOREIGN_RESERVATIONS, 9);
    metrics_set (m, METRIC_FOREIGN_RESERVATIONS, 2);
    metrics_add (m, METRIC_TCP_REFUSED, 1);
    char *t = text_of (m, false);
    /* one HELP/TYPE for both series of a name, each series once */
    assert_has (t,
                "# TYPE fmbroker_pruned_total counter\n"
                "fmbroker_pruned_total{what=\"jobs\"} 7\n"
                "fmbroker_pruned_total{what=\"events\"} 5\n");
    assert_has (t,
                "# TYPE fmbroker_foreign_reservations gauge\n"
                "fmbroker_foreign_reservations 2\n");
    assert_has (t, "\nfmbroker_api_tcp_refused_total 1\n");
    assert_has (t, "\nfmbroker_reconcile_runs_total 0\n");
    assert_has (t, "fmbroker_build_info{version=\"" FMB_VERSION "\"} 1\n");
    free (t);
    metrics_destroy (m);
}

static void fm_calls_by_call_result_and_latency (void **state)
{
    (void)state;
    struct metrics *m = metrics_create ();
    struct fmc_result ok = {.status = FMC_OK, .op = FMC_OP_CREATE, .elapsed_ms = 3};
    struct fmc_result odd = {.status = FMC_OK, .op = FMC_OP_RESERVE, .elapsed_ms = 3};
    metrics_fm_call (m, &ok);
    metrics_fm_call (m, &ok);
    metrics_fm_call (m, &odd); /* the reserve result is never observed: not counted */
    char *t = text_of (m, true);
    char line[200];
    snprintf (line,
              sizeof (line),
              "fmbroker_fm_requests_total{call=\"create\",result=\"%s\"} 2\n",
              fmc_status_name (FMC_OK));
    assert_has (t, line);
    /* 3 ms: over the 2 ms bound, within 5 ms */
    assert_has (t,
                "fmbroker_fm_request_duration_seconds_bucket{call=\"create\",le=\"0."
                "002\"} 0\n");
    assert_has (t,
                "fmbroker_fm_request_duration_seconds_bucket{call=\"create\",le=\"0."
                "005\"} 2\n");
    assert_has (t, "fmbroker_fm_request_duration_seconds_count{call=\"create\"} 2\n");
    assert_has (t, "fmbroker_fm_request_duration_seconds_count{call=\"get\"} 0\n");
    assert_null (strstr (t, "no such call"));
    free (t);
    metrics_destroy (m);
}

static void the_stall_covers_one_to_two_windows (void **state)
{
    (void)state;
    struct metrics *m = metrics_create ();
    metrics_pass (m, 1500, 500, 1000); /* a new window begins */
    metrics_pass (m, 700, 0, 2000);
    char *t = text_of (m, false);
    assert_has (t, "fmbroker_loop_stall_seconds 0.001500\n");
    assert_has (t, "fmbroker_loop_stall_commit_seconds 0.000500\n");
    assert_has (t, "fmbroker_loop_pass_seconds_count 2\n");
    free (t);
    /* the next window still shows the last one's longest... */
    metrics_pass (m, 100, 0, 61000);
    t = text_of (m, false);
    assert_has (t, "fmbroker_loop_stall_seconds 0.001500\n");
    free (t);
    /* ...but a window after an empty one forgets it */
    metrics_pass (m, 200, 0, 181000);
    t = text_of (m, false);
    assert_has (t, "fmbroker_loop_stall_seconds 0.000200\n");
    free (t);
    metrics_destroy (m);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (answers_are_counted_by_class),
        cmocka_unit_test (named_counters_add_and_gauges_set),
        cmocka_unit_test (fm_calls_by_call_result_and_latency),
        cmocka_unit_test (the_stall_covers_one_to_two_windows),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}

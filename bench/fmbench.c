/* fmbench: load generator for bench/run.sh.  Bounded: every run sends a
 * fixed number of requests and stops.
 *
 *   fmbench run     --socket S --count N --concurrency C [--nodes K] [--lifecycle]
 * [--prefix P] PUT /v1/jobs/P-i (and with --lifecycle DELETE it right after) fmbench
 * cleanup --socket S --count N --concurrency C [--prefix P] DELETE /v1/jobs/P-i fmbench
 * fm      --url U --count N --concurrency C [--fresh] [--post-only] [--prefix P]
 * straight to the FM: GET /fabric/collectives/jobs/P-i then POST it, as Slurm's plugin
 * does (24.11 and later); --post-only: the POST alone, the one call the broker makes
 * for a new job; --fresh: a new connection per request, as Slurm's plugin does (run it
 * with --concurrency 1 for that pattern)
 *
 * Paced runs (with --concurrency 1): --interval-ms M waits M ms between one
 * request's answer and the next request; --stop-file F ends the run early once F
 * exists, so that a run can cover exactly a window another process watches.
 * --latency-log F writes one line per operation, "START_MS LATENCY_MS OK" (the
 * wall clock in ms when it started; OK 1 or 0), for the caller to cut into
 * windows.
 *
 * Prints one line: "requests N errors E seconds S rate R median_ms M p99_ms P",
 * latencies per operation (a job start is GET+POST, or the POST, for fm; PUT for run).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "benchutil.h"

enum mode { MODE_RUN, MODE_CLEANUP, MODE_FM };

static struct {
    enum mode mode;
    const char *socket;
    const char *url;
    const char *prefix;
    long count;
    long concurrency;
    long nodes;
    int lifecycle;
    int fresh;
    int post_only;
    long interval_ms;
    const char *stop_file;
    const char *latency_log;
} o = {.prefix = "bench", .count = 1000, .concurrency = 16, .nodes = 2};

struct op {
    long i;
    int stage; /* fm: 0 GET, 1 POST; run --lifecycle: 0 PUT, 1 DELETE */
    double start;
    double start_wall_ms;
    CURL *e;
    char url[256];
    char body[256];
};

/* fm --post-only starts where the GET would have answered 404. */
static int first_stage (void)
{
    return o.mode == MODE_FM && o.post_only ? 1 : 0;
}

static void setup (struct op *op)
{
    CURL *e = curl_easy_init ();
    const char *method = "GET";
    op->body[0] = '\0';
    if (o.mode == MODE_FM) {
        if (op->stage == 0)
            snprintf (op->url,
                      sizeof (op->url),
                      "%s/fabric/collectives/jobs/%s-%ld",
                      o.url,
                      o.prefix,
                      op->i);
        else {
            snprintf (op->url, sizeof (op->url), "%s/fabric/collectives/jobs", o.url);
            snprintf (op->body,
                      sizeof (op->body),
                      "{\"jobID\":\"%s-%ld\",\"mcastLimit\":4}",
                      o.prefix,
                      op->i);
            method = "POST";
        }
        if (o.fresh) {
            curl_easy_setopt (e, CURLOPT_FRESH_CONNECT, 1L);
            curl_easy_setopt (e, CURLOPT_FORBID_REUSE, 1L);
        }
    } else {
        snprintf (op->url,
                  sizeof (op->url),
                  "http://fmbroker/v1/jobs/%s-%ld",
                  o.prefix,
                  op->i);
        curl_easy_setopt (e, CURLOPT_UNIX_SOCKET_PATH, o.socket);
        if (o.mode == MODE_CLEANUP || op->stage == 1)
            method = "DELETE";
        else {
            method = "PUT";
            snprintf (op->body,
                      sizeof (op->body),
                      "{\"uid\":1000,\"node_count\":%ld,\"hwcoll\":\"on\"}",
                      o.nodes);
        }
    }
    curl_easy_setopt (e, CURLOPT_URL, op->url);
    curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
    if (op->body[0])
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, op->body);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt (e, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt (e, CURLOPT_PRIVATE, op);
    op->e = e;
}

/* The command line into 'o'; 0, or the exit status for a bad one. */
static int parse_options (int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", 1, 0, 's'},
        {"url", 1, 0, 'u'},
        {"count", 1, 0, 'n'},
        {"concurrency", 1, 0, 'c'},
        {"nodes", 1, 0, 'k'},
        {"prefix", 1, 0, 'p'},
        {"lifecycle", 0, 0, 'l'},
        {"fresh", 0, 0, 'f'},
        {"post-only", 0, 0, 'P'},
        {"interval-ms", 1, 0, 'i'},
        {"stop-file", 1, 0, 'S'},
        {"latency-log", 1, 0, 'L'},
        {0},
    };
    if (argc < 2) {
        fprintf (stderr, "usage: fmbench run|cleanup|fm [options] (see the source)\n");
        return 2;
    }
    o.mode = strcmp (argv[1], "fm") == 0        ? MODE_FM
             : strcmp (argv[1], "cleanup") == 0 ? MODE_CLEANUP
                                                : MODE_RUN;
    int c;
    optind = 2;
    while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            o.socket = optarg;
            break;
        case 'u':
            o.url = optarg;
            break;
        case 'n':
            o.count = atol (optarg);
            break;
        case 'c':
            o.concurrency = atol (optarg);
            break;
        case 'k':
            o.nodes = atol (optarg);
            break;
        case 'p':
            o.prefix = optarg;
            break;
        case 'l':
            o.lifecycle = 1;
            break;
        case 'f':
            o.fresh = 1;
            break;
        case 'P':
            o.post_only = 1;
            break;
        case 'i':
            o.interval_ms = atol (optarg);
            break;
        case 'S':
            o.stop_file = optarg;
            break;
        case 'L':
            o.latency_log = optarg;
            break;
        default:
            return 2;
        }
    }
    if ((o.interval_ms > 0 || o.stop_file) && o.concurrency != 1) {
        fprintf (stderr,
                 "fmbench: --interval-ms and --stop-file pace --concurrency 1\n");
        return 2;
    }
    return 0;
}

int main (int argc, char **argv)
{
    int rc = parse_options (argc, argv);
    if (rc)
        return rc;
    FILE *latency_log = NULL;
    if (o.latency_log && !(latency_log = fopen (o.latency_log, "w"))) {
        perror (o.latency_log);
        return 2;
    }
    curl_global_init (CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init ();
    curl_multi_setopt (m, CURLMOPT_MAX_TOTAL_CONNECTIONS, o.concurrency);
    double *lat = calloc ((size_t)o.count, sizeof (double));
    struct op *ops = calloc ((size_t)o.concurrency, sizeof (*ops));
    long next = 0, done = 0, errors = 0, running_ops = 0;
    double t0 = bench_now ();
    for (long k = 0; k < o.concurrency && next < o.count; k++, next++) {
        ops[k].i = next;
        ops[k].stage = first_stage ();
        ops[k].start = bench_now ();
        ops[k].start_wall_ms = bench_wall_ms ();
        setup (&ops[k]);
        curl_multi_add_handle (m, ops[k].e);
        running_ops++;
    }
    while (running_ops > 0) {
        int still;
        curl_multi_perform (m, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read (m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct op *op;
            long code = 0;
            curl_easy_getinfo (msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
            curl_easy_getinfo (msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            bool ok = msg->data.result == CURLE_OK &&
                      (o.mode == MODE_FM && op->stage == 0 ? code == 404 || code == 200
                                                           : code / 100 == 2);
            curl_multi_remove_handle (m, op->e);
            curl_easy_cleanup (op->e);
            bool two_stage = o.mode == MODE_FM || o.lifecycle;
            if (ok && two_stage && op->stage == 0) {
                op->stage = 1; /* the second call of the same operation */
                setup (op);
                curl_multi_add_handle (m, op->e);
                continue;
            }
            if (!ok)
                errors++;
            lat[done] = (bench_now () - op->start) * 1000.0;
            if (latency_log)
                fprintf (
                    latency_log, "%.0f %.3f %d\n", op->start_wall_ms, lat[done], ok);
            done++;
            running_ops--;
            if (o.stop_file && access (o.stop_file, F_OK) == 0)
                next = o.count; /* the watched window is over */
            if (next < o.count && o.interval_ms > 0)
                nanosleep (&(struct timespec){o.interval_ms / 1000,
                                              (o.interval_ms % 1000) * 1000000L},
                           NULL);
            if (next < o.count) {
                op->i = next++;
                op->stage = first_stage ();
                op->start = bench_now ();
                op->start_wall_ms = bench_wall_ms ();
                setup (op);
                curl_multi_add_handle (m, op->e);
                running_ops++;
            }
        }
        if (running_ops > 0)
            curl_multi_poll (m, NULL, 0, 100, NULL);
    }
    double secs = bench_now () - t0;
    qsort (lat, (size_t)done, sizeof (double), bench_cmp_double);
    printf (
        "requests %ld errors %ld seconds %.3f rate %.1f median_ms %.3f p99_ms %.3f\n",
        done,
        errors,
        secs,
        done / secs,
        done ? lat[done / 2] : 0,
        done ? lat[(long)(done * 0.99)] : 0);
    if (latency_log)
        fclose (latency_log);
    curl_multi_cleanup (m);
    curl_global_cleanup ();
    free (lat);
    free (ops);
    return errors ? 1 : 0;
}

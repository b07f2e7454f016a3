/* fmbench-slurm: benchmark 2's two patterns of job starts, each job with
 * its own step manager running in parallel with the other jobs'.
 *
 *   fmbench-slurm slurm  --url FM     --jobs N --parallel P --steps S [--prefix X]
 *   fmbench-slurm broker --socket API --jobs N --parallel P --steps S [--prefix X]
 *
 * slurm: what Slurm's switch/hpe_slingshot plugin does from the step
 * manager (the slurmstepd on each job's batch host), a fresh connection
 * for every call: at every step launch GET /fabric/collectives/jobs/ID,
 * and when that is 404 (the job's first step) POST it; at every step's
 * end PATCH {"jobSteps":{"N":null}}; at the job's end DELETE.
 * broker: RUN (PUT /v1/jobs/ID) at the job's start and CLEANUP (DELETE)
 * at its end, through fmbrokerd; a step launch makes no call.
 *
 * P threads stand for P step managers on P batch hosts; each takes the
 * next job until N are done.  Prints one line:
 *   "jobs N errors E seconds T start_median_ms A start_p99_ms B
 *    step_median_ms C step_p99_ms D"
 * job start: from the job's start to its first step's launch being
 * possible (slurm: GET+POST; broker: RUN); step: the time the FM calls
 * add to each later step's launch (slurm: the GET; broker: none, 0).
 */
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "benchutil.h"

static struct {
    bool slurm;
    const char *url;
    const char *socket;
    const char *prefix;
    long jobs, parallel, steps;
} o = {.prefix = "e", .jobs = 64, .parallel = 64, .steps = 4};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long next_job, errors, nstarts, nsteps;
static double *starts, *steps;

/* One request on a connection of its own (Slurm makes none persist);
 * returns the HTTP status, 0 on a transport error. */
static long call (const char *method, const char *url, const char *body)
{
    CURL *e = curl_easy_init ();
    struct curl_slist *h = curl_slist_append (NULL, "Content-Type: application/json");
    long code = 0;
    if (!e)
        return 0;
    curl_easy_setopt (e, CURLOPT_URL, url);
    curl_easy_setopt (e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (e, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt (e, CURLOPT_POSTFIELDS, body);
    if (o.socket)
        curl_easy_setopt (e, CURLOPT_UNIX_SOCKET_PATH, o.socket);
    curl_easy_setopt (e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt (e, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt (e, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt (e, CURLOPT_TIMEOUT, 10L); /* as the plugin */
    if (curl_easy_perform (e) == CURLE_OK)
        curl_easy_getinfo (e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup (e);
    curl_slist_free_all (h);
    return code;
}

/* Launch step 'step' of job 'id' as the plugin does; returns false on a
 * failed step creation. */
static bool slurm_step_launch (const char *id, long step)
{
    char url[512], body[256];
    snprintf (url, sizeof (url), "%s/fabric/collectives/jobs/%s", o.url, id);
    long code = call ("GET", url, NULL);
    if (code == 404) {
        snprintf (url, sizeof (url), "%s/fabric/collectives/jobs", o.url);
        snprintf (body, sizeof (body), "{\"jobID\":\"%s\",\"mcastLimit\":4}", id);
        code = call ("POST", url, body);
    }
    (void)step;
    return code / 100 == 2;
}

static bool slurm_step_end (const char *id, long step)
{
    char url[512], body[64];
    snprintf (url, sizeof (url), "%s/fabric/collectives/jobs/%s", o.url, id);
    snprintf (body, sizeof (body), "{\"jobSteps\":{\"%ld\":null}}", step);
    long code = call ("PATCH", url, body);
    return code / 100 == 2 || code == 404;
}

static bool job_end (const char *id)
{
    char url[512];
    if (o.slurm)
        snprintf (url, sizeof (url), "%s/fabric/collectives/jobs/%s", o.url, id);
    else
        snprintf (url, sizeof (url), "http://fmbroker/v1/jobs/%s", id);
    return call ("DELETE", url, NULL) / 100 == 2;
}

static bool broker_run (const char *id)
{
    char url[512];
    snprintf (url, sizeof (url), "http://fmbroker/v1/jobs/%s", id);
    return call ("PUT", url, "{\"uid\":1000,\"node_count\":2,\"hwcoll\":\"on\"}") /
               100 ==
           2;
}

static void record (double *arr, long *n, double ms)
{
    pthread_mutex_lock (&mu);
    arr[(*n)++] = ms;
    pthread_mutex_unlock (&mu);
}

/* One job: its start, its steps (launched one after another, each
 * running no time), its end. */
static bool one_job (long j)
{
    char id[128];
    bool ok = true;
    snprintf (id, sizeof (id), "c1-%s%ld", o.prefix, j);
    for (long s = 0; s < o.steps && ok; s++) {
        double t = bench_now ();
        if (o.slurm)
            ok = slurm_step_launch (id, s);
        else if (s == 0)
            ok = broker_run (id);
        double ms = (bench_now () - t) * 1000.0;
        if (ok)
            record (s == 0 ? starts : steps, s == 0 ? &nstarts : &nsteps, ms);
        if (ok && o.slurm)
            ok = slurm_step_end (id, s);
    }
    return job_end (id) && ok;
}

static void *step_manager (void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock (&mu);
        long j = next_job < o.jobs ? next_job++ : -1;
        pthread_mutex_unlock (&mu);
        if (j < 0)
            return NULL;
        if (!one_job (j)) {
            pthread_mutex_lock (&mu);
            errors++;
            pthread_mutex_unlock (&mu);
        }
    }
}

static double pct (double *a, long n, double p)
{
    if (n == 0)
        return 0;
    qsort (a, (size_t)n, sizeof (*a), bench_cmp_double);
    return a[(long)((n - 1) * p)];
}

int main (int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", 1, 0, 'u'},
        {"socket", 1, 0, 's'},
        {"jobs", 1, 0, 'n'},
        {"parallel", 1, 0, 'P'},
        {"steps", 1, 0, 'S'},
        {"prefix", 1, 0, 'p'},
        {0},
    };
    if (argc < 2 || (strcmp (argv[1], "slurm") && strcmp (argv[1], "broker"))) {
        fprintf (stderr,
                 "usage: fmbench-slurm slurm|broker [options] (see the source)\n");
        return 2;
    }
    o.slurm = strcmp (argv[1], "slurm") == 0;
    int c;
    optind = 2;
    while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            o.url = optarg;
            break;
        case 's':
            o.socket = optarg;
            break;
        case 'n':
            o.jobs = atol (optarg);
            break;
        case 'P':
            o.parallel = atol (optarg);
            break;
        case 'S':
            o.steps = atol (optarg);
            break;
        case 'p':
            o.prefix = optarg;
            break;
        default:
            return 2;
        }
    }
    if (o.jobs < 1 || o.parallel < 1 || o.parallel > 1024 || o.steps < 1 ||
        (o.slurm ? !o.url : !o.socket)) {
        fprintf (stderr, "fmbench-slurm: bad options\n");
        return 2;
    }
    curl_global_init (CURL_GLOBAL_DEFAULT);
    starts = calloc ((size_t)o.jobs, sizeof (double));
    steps = calloc ((size_t)(o.jobs * o.steps), sizeof (double));
    pthread_t *t = calloc ((size_t)o.parallel, sizeof (*t));
    if (!starts || !steps || !t)
        return 1;
    double t0 = bench_now ();
    for (long i = 0; i < o.parallel; i++)
        pthread_create (&t[i], NULL, step_manager, NULL);
    for (long i = 0; i < o.parallel; i++)
        pthread_join (t[i], NULL);
    double secs = bench_now () - t0;
    /* broker: later steps add nothing (no call), recorded as 0 */
    if (!o.slurm)
        nsteps = 0;
    printf (
        "jobs %ld errors %ld seconds %.3f start_median_ms %.3f start_p99_ms %.3f "
        "step_median_ms %.3f step_p99_ms %.3f\n",
        o.jobs,
        errors,
        secs,
        pct (starts, nstarts, 0.5),
        pct (starts, nstarts, 0.99),
        pct (steps, nsteps, 0.5),
        pct (steps, nsteps, 0.99));
    free (starts);
    free (steps);
    free (t);
    curl_global_cleanup ();
    return errors ? 1 : 0;
}

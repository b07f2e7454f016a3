/* fmbroker: the admin and hook CLI.  Talks to fmbrokerd over its Unix
 * socket; tables for people, --json for programs.
 *
 * Exit status: 0 success; 1 the broker refused (its problem detail is
 * printed); 2 usage; 3 the broker could not be reached.  `status` is a
 * monitoring check instead: 0 all well, 1 degraded, 2 cannot reach the
 * broker.  Hooks (run-job, end-job, step-clean) use a short timeout and
 * are meant to be called so that a failure never holds a job (the
 * deploy/ hooks ignore it).
 *
 * "--help" anywhere in a subcommand's arguments prints its usage and
 * exits 0 before anything is parsed or sent.  Numbers are parsed whole
 * (no "12abc", no "1e3", no empty string) and job ids checked, so a bad
 * argument is refused before any request.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <libsmartcols.h>

#include "apiclient.h"
#include "config.h"
#include "hostlist.h"
#include "validate.h"

#define EXIT_REFUSED     1
#define EXIT_USAGE       2
#define EXIT_UNREACHABLE 3

/* `fmbroker status` as a monitoring check (Nagios-style). */
/* `status` is a monitoring check, with the Nagios plugin codes:
 * OK, WARNING, CRITICAL, and UNKNOWN for a check that could not run as
 * asked (a usage or configuration error), never read as CRITICAL. */
#define STATUS_OK          0
#define STATUS_DEGRADED    1
#define STATUS_UNREACHABLE 2
#define STATUS_USAGE       3

static struct {
    const char *config;
    const char *socket;
    const char *broker_url; /* --broker-url: replaces [api] broker_url */
    bool json;
    long long timeout;
} g = {.timeout = 10};

static struct fmb_config cfg;
static struct api_target target;

/* ---- talking to the broker ----------------------------------------- */

/* Call the broker; returns an exit status, *ret gets the JSON body.
 * Problems are printed here, once. */
static int call (const char *method,
                 const char *path,
                 const char *body,
                 const char *token,
                 json_t **ret)
{
    struct api_reply r;
    struct fmb_error e;
    if (api_client_call (&target, g.timeout, method, path, body, token, &r, &e) < 0) {
        fprintf (stderr, "fmbroker: %s\n", e.text);
        return EXIT_UNREACHABLE;
    }
    if (r.status < 200 || r.status > 299) {
        const char *detail = json_string_value (json_object_get (r.body, "detail"));
        fprintf (stderr,
                 "fmbroker: %s %s: %ld %s\n",
                 method,
                 path,
                 r.status,
                 detail ? detail : "");
        json_decref (r.body);
        return EXIT_REFUSED;
    }
    if (ret)
        *ret = r.body;
    else
        json_decref (r.body);
    return 0;
}

static void print_json (json_t *o)
{
    json_dumpf (o, stdout, JSON_INDENT (2) | JSON_SORT_KEYS);
    putchar ('\n');
}

static char *escape (const char *s)
{
    char *e = curl_easy_escape (NULL, s, 0);
    char *copy = strdup (e ? e : "");
    curl_free (e);
    return copy;
}

static const char *str (json_t *o, const char *k)
{
    const char *s = json_string_value (json_object_get (o, k));
    return s ? s : "-";
}

static long long num (json_t *o, const char *k)
{
    return (long long)json_integer_value (json_object_get (o, k));
}

static void join_ints (json_t *a, char *out, size_t len)
{
    size_t i;
    json_t *v;
    out[0] = '\0';
    json_array_foreach (a, i, v)
    {
        snprintf (out + strlen (out),
                  len - strlen (out),
                  "%s%lld",
                  i ? "," : "",
                  (long long)json_integer_value (v));
    }
    if (!out[0])
        snprintf (out, len, "-");
}

/* A whole decimal number in [min, max]: no sign unless min < 0, no
 * leading or trailing junk, not empty.  Prints what is wrong. */
static bool parse_number (
    const char *what, const char *text, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll (text, &end, 10);
    if (text[0] == '\0' || *end || errno || (text[0] == '-' && min >= 0) ||
        text[0] == '+' || text[0] == ' ' || v < min || v > max) {
        fprintf (stderr,
                 "fmbroker: %s '%s': expected a whole number %lld..%lld\n",
                 what,
                 text,
                 min,
                 max);
        return false;
    }
    *out = v;
    return true;
}

/* A job id the broker could accept, and that cannot be taken for an
 * option. */
static bool check_job_id (const char *cmd, const char *job)
{
    if (job && job[0] != '-' && valid_job_id (job))
        return true;
    fprintf (stderr,
             "fmbroker: %s: '%s' is not a job id ([A-Za-z0-9._-], 1-%d characters, "
             "not starting with '-')\n",
             cmd,
             job ? job : "",
             JOB_ID_MAX);
    return false;
}

/* ISO 8601 local time with its offset, e.g. 2026-11-23T10:15:00+01:00. */
static void iso_time (long long ms, char *out, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char zone[8];
    if (!localtime_r (&t, &tm) || strftime (out, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0 ||
        strftime (zone, sizeof (zone), "%z", &tm) != 5) {
        snprintf (out, len, "-");
        return;
    }
    size_t n = strlen (out);
    snprintf (out + n, len - n, "%.3s:%.2s", zone, zone + 3);
}

/* ---- subcommands --------------------------------------------------- */

/* GET /metrics: Prometheus text, as it came (the client hands a text
 * answer over as a JSON string). */
static int cmd_metrics (int argc, char **argv)
{
    json_t *o;
    if (argc > 1) {
        fprintf (stderr, "fmbroker: metrics: unexpected argument '%s'\n", argv[1]);
        return EXIT_USAGE;
    }
    int rc = call ("GET", "/metrics", NULL, NULL, &o);
    if (rc)
        return rc;
    const char *text = json_string_value (o);
    if (!text) {
        fprintf (stderr, "fmbroker: metrics: the broker's answer is not text\n");
        json_decref (o);
        return EXIT_REFUSED;
    }
    fputs (text, stdout);
    json_decref (o);
    return 0;
}

/* The broker's own verdict (GET /v1/health: the FM session, commits,
 * the VNI pool) as "reasons" lines; NULL when all is well.  A health
 * check that fails is a reason too (the status answered). */
static json_t *health_reasons (void)
{
    json_t *h;
    if (call ("GET", "/v1/health", NULL, NULL, &h))
        return json_pack ("[s]", "the broker's health check failed (see above)");
    json_t *reasons = json_incref (json_object_get (h, "reasons"));
    const char *verdict = json_string_value (json_object_get (h, "status"));
    if (!reasons && verdict && strcmp (verdict, "ok") != 0)
        reasons = json_pack ("[s]", verdict);
    json_decref (h);
    return reasons;
}

static int cmd_status (int argc, char **argv)
{
    json_t *o;
    if (argc > 1) {
        fprintf (stderr, "fmbroker: status: unexpected argument '%s'\n", argv[1]);
        return STATUS_USAGE;
    }
    if (call ("GET", "/v1/status", NULL, NULL, &o))
        return STATUS_UNREACHABLE;
    json_t *reasons = health_reasons ();
    int rc = reasons ? STATUS_DEGRADED : STATUS_OK;
    if (reasons)
        json_object_set (o, "degraded", reasons);
    if (g.json)
        print_json (o);
    else {
        json_t *fm = json_object_get (o, "fabric_manager"),
               *j = json_object_get (o, "jobs");
        json_t *v = json_object_get (o, "vnis"), *h = json_object_get (o, "hwcoll");
        printf ("fmbrokerd %s, cluster %s, up %llds\n",
                str (o, "version"),
                str (o, "cluster"),
                num (o, "uptime_s"));
        bool url = json_object_get (fm, "url") != NULL;
        printf ("fabric manager: %s%s%s%s\n",
                str (fm, "state"),
                url ? " (" : "",
                url ? str (fm, "url") : "",
                url ? ")" : "");
        if (json_object_get (fm, "last_error"))
            printf ("  last error: %s\n", str (fm, "last_error"));
        json_t *lk = json_object_get (o, "state_lock");
        if (lk)
            printf ("state lock: %s held by host %s, pid %lld\n",
                    str (lk, "file"),
                    str (lk, "host"),
                    num (lk, "pid"));
        printf ("jobs: %lld active, %lld releasing, %lld released, %lld lost\n",
                num (j, "active"),
                num (j, "releasing"),
                num (j, "released"),
                num (j, "lost"));
        char free_vnis[40] = ""; /* an older broker does not count them */
        if (json_object_get (v, "free"))
            snprintf (free_vnis, sizeof (free_vnis), ", %lld free", num (v, "free"));
        printf ("vnis: %lld held, %lld quarantined%s (pool %lld-%lld)\n",
                num (v, "held"),
                num (v, "quarantined"),
                free_vnis,
                num (v, "pool_min"),
                num (v, "pool_max"));
        printf (
            "hwcoll: %lld reservations, %lld addresses (%lld per job, min %lld "
            "nodes)\n",
            num (h, "reservations"),
            num (h, "addresses_reserved"),
            num (h, "addrs_per_job"),
            num (h, "min_nodes"));
        printf ("outbox: %lld pending FM operations\n",
                num (json_object_get (o, "outbox"), "depth"));
        printf ("events: last %lld\n", num (json_object_get (o, "events"), "last_seq"));
        size_t i;
        json_t *why;
        json_array_foreach (reasons, i, why)
        {
            printf ("degraded: %s\n", json_string_value (why));
        }
    }
    json_decref (reasons);
    json_decref (o);
    return rc;
}

/* Job ids in a natural order: numeric ids by value (before the others),
 * the others as text. */
static int job_id_cmp (const void *a, const void *b)
{
    const char *x = str (*(json_t *const *)a, "id");
    const char *y = str (*(json_t *const *)b, "id");
    bool nx = x[strspn (x, "0123456789")] == '\0';
    bool ny = y[strspn (y, "0123456789")] == '\0';
    if (nx != ny)
        return nx ? -1 : 1;
    if (nx) {
        x += strspn (x, "0");
        y += strspn (y, "0");
        size_t lx = strlen (x), ly = strlen (y);
        if (lx != ly)
            return lx < ly ? -1 : 1;
    }
    return strcmp (x, y);
}

/* The columns of `fmbroker jobs`; -o picks and orders them. */
enum job_col {
    JC_JOB,
    JC_STATE,
    JC_UID,
    JC_USER,
    JC_NODES,
    JC_VNIS,
    JC_HWCOLL,
    JC_REASON
};
static const char *const job_cols[] = {
    "JOB", "STATE", "UID", "USER", "NODES", "VNIS", "HWCOLL", "REASON", NULL};
#define JOBS_DEFAULT_COLS "JOB,STATE,UID,USER,NODES,VNIS,HWCOLL,REASON"

static void job_cell (json_t *j, enum job_col c, char *out, size_t len)
{
    json_t *hw = json_object_get (j, "hwcoll");
    switch (c) {
    case JC_JOB:
        snprintf (out, len, "%s", str (j, "id"));
        break;
    case JC_STATE:
        snprintf (out, len, "%s", str (j, "state"));
        break;
    case JC_UID:
        snprintf (out, len, "%lld", num (j, "uid"));
        break;
    case JC_USER:
        snprintf (out, len, "%s", str (j, "user"));
        break;
    case JC_NODES:
        snprintf (out, len, "%lld", num (j, "node_count"));
        break;
    case JC_VNIS:
        join_ints (json_object_get (j, "vnis"), out, len);
        break;
    case JC_HWCOLL:
        snprintf (out, len, "%s", str (hw, "state"));
        break;
    case JC_REASON:
        snprintf (
            out, len, "%s", json_object_get (hw, "reason") ? str (hw, "reason") : "");
        break;
    }
}

/* "JOB,STATE" -> column indexes; prints what is wrong. */
static int parse_job_cols (const char *list, int *cols, int max)
{
    char buf[256];
    char *save = NULL;
    int n = 0;
    snprintf (buf, sizeof (buf), "%s", list);
    for (char *name = strtok_r (buf, ",", &save); name;
         name = strtok_r (NULL, ",", &save)) {
        int k = 0;
        while (job_cols[k] && strcasecmp (job_cols[k], name) != 0)
            k++;
        if (!job_cols[k] || n == max) {
            fprintf (stderr,
                     "fmbroker: jobs: -o: unknown column '%s' (columns: %s)\n",
                     name,
                     JOBS_DEFAULT_COLS);
            return -1;
        }
        cols[n++] = k;
    }
    if (n == 0)
        fprintf (stderr, "fmbroker: jobs: -o: no column given\n");
    return n ? n : -1;
}

static int print_jobs_table (json_t *jobs, const int *cols, int ncols, bool noheader)
{
    struct libscols_table *tb = scols_new_table ();
    if (!tb)
        return -1;
    scols_table_enable_noheadings (tb, noheader);
    for (int c = 0; c < ncols; c++) {
        int flags = cols[c] == JC_REASON ? SCOLS_FL_TRUNC : 0;
        if (cols[c] == JC_UID || cols[c] == JC_NODES)
            flags |= SCOLS_FL_RIGHT;
        if (!scols_table_new_column (tb, job_cols[cols[c]], 0, flags)) {
            scols_unref_table (tb);
            return -1;
        }
    }
    size_t n = json_array_size (jobs);
    json_t **rows = calloc (n ? n : 1, sizeof (*rows));
    if (!rows) {
        scols_unref_table (tb);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        rows[i] = json_array_get (jobs, i);
    qsort (rows, n, sizeof (*rows), job_id_cmp);
    for (size_t i = 0; i < n; i++) {
        struct libscols_line *ln = scols_table_new_line (tb, NULL);
        for (int c = 0; ln && c < ncols; c++) {
            char cell[512];
            job_cell (rows[i], (enum job_col)cols[c], cell, sizeof (cell));
            scols_line_set_data (ln, (size_t)c, cell);
        }
    }
    free (rows);
    scols_print_table (tb);
    scols_unref_table (tb);
    return 0;
}

/* Up to 'limit' jobs of the listing /v1/jobs?QUERY ('query' starts with
 * '&' or is empty), page after page: a page holds at most 1,000 jobs, and
 * fewer, even none, when the broker stopped reading for the page (its
 * 10,000 jobs) before finding them.  *ret: {"jobs": [...]} with the
 * cursor "next_after" when more are left. */
static int list_jobs (const char *query, long long limit, json_t **ret)
{
    json_t *all = json_array ();
    char next[512] = ""; /* the broker's cursor; ids are shorter */
    int rc = 0;
    if (!all)
        return EXIT_REFUSED;
    do {
        long long want = limit - (long long)json_array_size (all);
        char *after = next[0] ? escape (next) : NULL;
        char path[1400];
        json_t *page;
        snprintf (path,
                  sizeof (path),
                  "/v1/jobs?limit=%lld%s%s%s",
                  want < 1000 ? want : 1000,
                  query,
                  after ? "&after=" : "",
                  after ? after : "");
        free (after);
        if ((rc = call ("GET", path, NULL, NULL, &page))) {
            json_decref (all);
            return rc;
        }
        json_array_extend (all, json_object_get (page, "jobs"));
        const char *cursor = json_string_value (json_object_get (page, "next_after"));
        if (cursor && strcmp (cursor, next) <= 0) { /* pages only go forward */
            fprintf (stderr, "fmbroker: the broker's job list did not go forward\n");
            json_decref (page);
            json_decref (all);
            return EXIT_REFUSED;
        }
        snprintf (next, sizeof (next), "%s", cursor ? cursor : "");
        json_decref (page);
    } while (next[0] && (long long)json_array_size (all) < limit);
    *ret = json_pack ("{s:o}", "jobs", all);
    if (next[0])
        json_object_set_new (*ret, "next_after", json_string (next));
    return 0;
}

static int cmd_jobs (int argc, char **argv)
{
    static const struct option o[] = {{"state", 1, 0, 's'},
                                      {"user", 1, 0, 'u'},
                                      {"limit", 1, 0, 'l'},
                                      {"output", 1, 0, 'o'},
                                      {"noheader", 0, 0, 'n'},
                                      {0}};
    char q[512] = "";
    int c, cols[16], ncols = 0;
    bool noheader = false;
    long long limit = 100;
    const char *colspec = JOBS_DEFAULT_COLS;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "s:u:l:o:n", o, NULL)) != -1) {
        char *v = optarg ? escape (optarg) : NULL;
        switch (c) {
        case 's':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&state=%s", v);
            break;
        case 'u':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&user=%s", v);
            break;
        case 'l':
            if (!parse_number ("jobs --limit", optarg, 1, 100000, &limit)) {
                free (v);
                return EXIT_USAGE;
            }
            break;
        case 'o':
            colspec = optarg;
            break;
        case 'n':
            noheader = true;
            break;
        default:
            free (v);
            return EXIT_USAGE;
        }
        free (v);
    }
    if (optind < argc) {
        fprintf (stderr, "fmbroker: jobs: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if ((ncols = parse_job_cols (colspec, cols, 16)) < 0)
        return EXIT_USAGE;
    json_t *r = NULL;
    int rc = list_jobs (q, limit, &r);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else {
        if (print_jobs_table (json_object_get (r, "jobs"), cols, ncols, noheader) < 0)
            fprintf (stderr, "fmbroker: out of memory\n");
        if (json_object_get (r, "next_after"))
            fprintf (stderr,
                     "(more: a larger --limit, or the API's after=%s)\n",
                     str (r, "next_after"));
    }
    json_decref (r);
    return 0;
}

static int cmd_job (int argc, char **argv)
{
    if (argc < 3) {
        fprintf (stderr,
                 "fmbroker: job: usage: fmbroker job show JOB | fmbroker job "
                 "release JOB [--force]\n");
        return EXIT_USAGE;
    }
    if (!check_job_id ("job", argv[2]))
        return EXIT_USAGE;
    bool force = false;
    for (int i = 3; i < argc; i++) {
        if (strcmp (argv[1], "release") == 0 && strcmp (argv[i], "--force") == 0)
            force = true;
        else {
            fprintf (stderr,
                     "fmbroker: job %s: unexpected argument '%s'\n",
                     argv[1],
                     argv[i]);
            return EXIT_USAGE;
        }
    }
    char path[256];
    json_t *r;
    int rc;
    if (strcmp (argv[1], "show") == 0) {
        snprintf (path, sizeof (path), "/v1/jobs/%s", argv[2]);
        if ((rc = call ("GET", path, NULL, NULL, &r)))
            return rc;
        if (g.json)
            print_json (r);
        else {
            json_t *hw = json_object_get (r, "hwcoll");
            char vnis[64];
            join_ints (json_object_get (r, "vnis"), vnis, sizeof (vnis));
            printf ("job %s: %s, uid %lld, %lld nodes, VNIs %s, TCs %s\n",
                    str (r, "id"),
                    str (r, "state"),
                    num (r, "uid"),
                    num (r, "node_count"),
                    vnis,
                    str (r, "tcs"));
            printf ("hwcoll: %s (FM job %s, %lld addresses)%s%s\n",
                    str (hw, "state"),
                    str (hw, "fm_job_id"),
                    num (hw, "mcast_limit"),
                    json_object_get (hw, "reason") ? ": " : "",
                    json_object_get (hw, "reason") ? str (hw, "reason") : "");
            const char *k;
            json_t *v;
            /* The session token is a secret: a table gets pasted into
             * tickets; --json is what a script that needs it reads. */
            json_object_foreach (json_object_get (r, "env"), k, v)
            {
                printf ("  %s=%s\n",
                        k,
                        strcmp (k, "FI_CXI_COLL_MCAST_TOKEN") == 0
                            ? "(hidden; --json shows it)"
                            : json_string_value (v));
            }
            size_t i;
            json_t *n;
            json_array_foreach (json_object_get (r, "node_reports"), i, n)
            {
                printf ("node %s: CXI services %s%s%s\n",
                        str (n, "node"),
                        str (n, "cxi"),
                        json_object_get (n, "detail") ? ": " : "",
                        json_object_get (n, "detail") ? str (n, "detail") : "");
            }
        }
        json_decref (r);
        return 0;
    }
    if (strcmp (argv[1], "release") == 0) {
        snprintf (
            path, sizeof (path), "/v1/jobs/%s%s", argv[2], force ? "?force=1" : "");
        if ((rc = call ("DELETE", path, NULL, NULL, &r)))
            return rc;
        if (g.json)
            print_json (r);
        else
            printf ("job %s: %s%s\n",
                    argv[2],
                    str (r, "state"),
                    force ? " (VNIs released by force)" : "");
        json_decref (r);
        return 0;
    }
    fprintf (stderr, "fmbroker: job: unknown action '%s'\n", argv[1]);
    return EXIT_USAGE;
}

static int cmd_step_clean (int argc, char **argv)
{
    /* Default to the job's own environment, so a job's epilog can run it
     * unprivileged with the job's token. */
    const char *fmid = getenv ("FI_CXI_COLL_JOB_ID");
    const char *job = argc > 1 ? argv[1] : NULL;
    const char *step = argc > 2 ? argv[2] : getenv ("FI_CXI_COLL_JOB_STEP_ID");
    const char *token = getenv ("FI_CXI_COLL_MCAST_TOKEN");
    char jobbuf[256];
    if (argc == 2 || argc > 3) {
        fprintf (stderr, "fmbroker: step-clean: give JOB and STEP, or neither\n");
        return EXIT_USAGE;
    }
    if (!job && fmid) {
        /* FI_CXI_COLL_JOB_ID is "cluster-job"; cluster names have no '-' */
        const char *dash = strchr (fmid, '-');
        snprintf (jobbuf, sizeof (jobbuf), "%s", dash ? dash + 1 : fmid);
        job = jobbuf;
    }
    if (job && !check_job_id ("step-clean", job))
        return EXIT_USAGE;
    if (step && !valid_step_id (step, strlen (step))) {
        fprintf (stderr,
                 "fmbroker: step-clean: the step id is not 1-%d bytes of UTF-8 "
                 "without control characters\n",
                 STEP_ID_MAX);
        return EXIT_USAGE;
    }
    if (!job || !step) {
        fprintf (stderr,
                 "fmbroker: step-clean: give JOB STEP, or run inside the job "
                 "(FI_CXI_COLL_JOB_ID, "
                 "FI_CXI_COLL_JOB_STEP_ID)\n");
        return EXIT_USAGE;
    }
    char path[1024];
    char *estep = escape (step);
    snprintf (path, sizeof (path), "/v1/jobs/%s/steps/%s?wait=10", job, estep);
    free (estep);
    json_t *r;
    int rc = call ("DELETE", path, NULL, token, &r);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else
        printf ("job %s step %s: %s\n", job, step, str (r, "state"));
    json_decref (r);
    return 0;
}

static void print_event (json_t *ev)
{
    char when[40], *detail = json_dumps (json_object_get (ev, "detail"),
                                         JSON_COMPACT | JSON_SORT_KEYS);
    iso_time (num (ev, "time_ms"), when, sizeof (when));
    printf ("%-6lld %s %-22s %-12s %s\n",
            num (ev, "seq"),
            when,
            str (ev, "type"),
            str (ev, "job"),
            detail);
    free (detail);
}

static int cmd_events (int argc, char **argv)
{
    static const struct option o[] = {
        {"follow", 0, 0, 'f'}, {"after", 1, 0, 'a'}, {"count", 1, 0, 'n'}, {0}};
    bool follow = false;
    long long after = 0, count = -1, seen = 0;
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "fa:n:", o, NULL)) != -1) {
        switch (c) {
        case 'f':
            follow = true;
            break;
        case 'a':
            if (!parse_number ("events --after", optarg, 0, INT64_MAX, &after))
                return EXIT_USAGE;
            break;
        case 'n':
            if (!parse_number ("events --count", optarg, 1, INT64_MAX, &count))
                return EXIT_USAGE;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "fmbroker: events: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (follow && g.timeout < 40)
        g.timeout = 40; /* the long poll below waits 30 s */
    for (;;) {
        char path[128];
        json_t *r;
        snprintf (path,
                  sizeof (path),
                  "/v1/events?after=%lld%s",
                  after,
                  follow ? "&wait=30" : "");
        int rc = call ("GET", path, NULL, NULL, &r);
        if (rc)
            return rc;
        long long first = num (r, "first_seq");
        if (first > after + 1)
            fprintf (
                stderr,
                "fmbroker: events %lld to %lld were deleted ([broker] retain_days)\n",
                after + 1,
                first - 1);
        size_t i;
        json_t *ev;
        json_array_foreach (json_object_get (r, "events"), i, ev)
        {
            if (g.json) {
                json_dumpf (ev, stdout, JSON_COMPACT | JSON_SORT_KEYS);
                putchar ('\n');
            } else
                print_event (ev);
            if (count >= 0 && ++seen >= count) {
                json_decref (r);
                return 0;
            }
        }
        fflush (stdout);
        after = num (r, "last_seq");
        json_decref (r);
        if (!follow)
            return 0;
    }
}

static int cmd_reconcile (int argc, char **argv)
{
    static const struct option o[] = {{"reap-foreign", 0, 0, 'r'}, {0}};
    bool reap = false;
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "r", o, NULL)) != -1) {
        if (c != 'r')
            return EXIT_USAGE;
        reap = true;
    }
    if (optind < argc) {
        fprintf (
            stderr, "fmbroker reconcile: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    json_t *r;
    int rc = call ("POST",
                   reap ? "/v1/reconcile?reap_foreign=1" : "/v1/reconcile",
                   NULL,
                   NULL,
                   &r);
    if (rc == 0) {
        if (g.json)
            print_json (r);
        else
            printf ("reconciliation scheduled (fabric manager %s)%s\n",
                    str (r, "fabric_manager"),
                    json_is_true (json_object_get (r, "reap_foreign"))
                        ? "; it deletes foreign reservations too"
                        : "");
        json_decref (r);
    }
    return rc;
}

/* Every page of /v1/vnis (1,000 VNIs a page) in one answer:
 * {"vnis": [...], "pool_min", "pool_max"} as the last page gave them. */
static int list_vnis (json_t **ret)
{
    json_t *all = json_array (), *page = NULL;
    long long after = 0;
    for (;;) {
        char path[64];
        snprintf (path, sizeof (path), "/v1/vnis?after=%lld", after);
        int rc = call ("GET", path, NULL, NULL, &page);
        if (rc) {
            json_decref (all);
            return rc;
        }
        json_array_extend (all, json_object_get (page, "vnis"));
        json_t *next = json_object_get (page, "next_after");
        if (!next)
            break;
        if (json_integer_value (next) <= after) { /* pages only go forward */
            fprintf (stderr, "fmbroker: the broker's VNI list did not go forward\n");
            json_decref (page);
            json_decref (all);
            return EXIT_REFUSED;
        }
        after = json_integer_value (next);
        json_decref (page);
    }
    json_object_set_new (page, "vnis", all);
    *ret = page;
    return 0;
}

static int cmd_vni (int argc, char **argv)
{
    if (argc != 2 || strcmp (argv[1], "list") != 0) {
        fprintf (stderr, "fmbroker: vni: usage: fmbroker vni list\n");
        return EXIT_USAGE;
    }
    json_t *r;
    int rc = list_vnis (&r);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else {
        size_t i;
        json_t *v;
        printf ("%-6s %-16s %-12s %-25s %s\n",
                "VNI",
                "JOB",
                "STATE",
                "UNTIL",
                "WAITING FOR");
        json_array_foreach (json_object_get (r, "vnis"), i, v)
        {
            char until[40] = "";
            if (json_object_get (v, "until_ms")) {
                if (num (v, "until_ms") / 1000)
                    iso_time (num (v, "until_ms"), until, sizeof (until));
                else
                    snprintf (until, sizeof (until), "all nodes report");
            }
            /* A table cell, not the list: the nodes that fit, then how
             * many more (--json has them all). */
            char nodes[256] = "";
            json_t *wait = json_object_get (v, "waiting_for");
            size_t k, total = json_array_size (wait);
            json_t *n;
            json_array_foreach (wait, k, n)
            {
                size_t used = strlen (nodes);
                const char *name = json_string_value (n);
                if (used + strlen (name) + 1 + 32 >= sizeof (nodes)) {
                    snprintf (nodes + used,
                              sizeof (nodes) - used,
                              " (+%zu more; --json lists all)",
                              total - k);
                    break;
                }
                snprintf (
                    nodes + used, sizeof (nodes) - used, "%s%s", k ? "," : "", name);
            }
            printf ("%-6lld %-16s %-12s %-25s %s\n",
                    num (v, "vni"),
                    str (v, "job"),
                    str (v, "state"),
                    until,
                    nodes[0] ? nodes : "-");
        }
    }
    json_decref (r);
    return 0;
}

/* run-job JOB --uid U [--user NAME] (--nodes HOSTLIST | --node-count N)
 * [--ncores N] [--hwcoll M] [--vni-count N] [--tcs LIST]: RUN with plain arguments,
 * printing the job environment as export lines. */
static int cmd_run_job (int argc, char **argv)
{
    static const struct option o[] = {{"uid", 1, 0, 'u'},
                                      {"user", 1, 0, 'U'},
                                      {"nodes", 1, 0, 'N'},
                                      {"node-count", 1, 0, 'c'},
                                      {"ncores", 1, 0, 'C'},
                                      {"hwcoll", 1, 0, 'H'},
                                      {"vni-count", 1, 0, 'v'},
                                      {"tcs", 1, 0, 'T'},
                                      {"quiet", 0, 0, 'q'},
                                      {0}};
    json_t *body = json_object ();
    struct fmb_error e;
    bool quiet = false;
    int c;
    long long v;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "u:U:N:c:C:H:v:T:q", o, NULL)) != -1) {
        switch (c) {
        case 'u':
            if (!parse_number ("run-job --uid", optarg, 0, UID_MAX_VALID, &v))
                goto usage;
            json_object_set_new (body, "uid", json_integer (v));
            break;
        case 'U':
            json_object_set_new (body, "user", json_string (optarg));
            break;
        case 'N': {
            json_t *nodes = json_array ();
            if (hostlist_expand (optarg, nodes, &e) < 0) {
                fprintf (stderr, "fmbroker: run-job: --nodes: %s\n", e.text);
                json_decref (nodes);
                json_decref (body);
                return EXIT_USAGE;
            }
            json_object_set_new (body, "nodes", nodes);
            break;
        }
        case 'c':
            if (!parse_number ("run-job --node-count", optarg, 1, NODES_MAX, &v))
                goto usage;
            json_object_set_new (body, "node_count", json_integer (v));
            break;
        case 'C':
            if (!parse_number ("run-job --ncores", optarg, 1, 1 << 20, &v))
                goto usage;
            json_object_set_new (body, "ncores", json_integer (v));
            break;
        case 'H':
            if (strcmp (optarg, "on") && strcmp (optarg, "off") &&
                strcmp (optarg, "auto")) {
                fprintf (stderr,
                         "fmbroker: run-job: --hwcoll %s: on, off or auto\n",
                         optarg);
                goto usage;
            }
            json_object_set_new (body, "hwcoll", json_string (optarg));
            break;
        case 'v':
            if (!parse_number ("run-job --vni-count", optarg, 0, 4, &v))
                goto usage;
            json_object_set_new (body, "vni_count", json_integer (v));
            break;
        case 'T': /* the broker checks it against [cxi] allowed_tcs */
            json_object_set_new (body, "tcs", json_string (optarg));
            break;
        case 'q':
            quiet = true;
            break;
        default:
            goto usage;
        }
    }
    if (optind >= argc || !json_object_get (body, "uid")) {
        fprintf (stderr, "fmbroker: run-job: JOB and --uid are required\n");
        goto usage;
    }
    if (!json_object_get (body, "nodes") == !json_object_get (body, "node_count")) {
        fprintf (stderr, "fmbroker: run-job: --nodes or --node-count, one of them\n");
        goto usage;
    }
    if (optind + 1 < argc) {
        fprintf (
            stderr, "fmbroker: run-job: unexpected argument '%s'\n", argv[optind + 1]);
        goto usage;
    }
    if (!check_job_id ("run-job", argv[optind]))
        goto usage;
    char path[256], *text = json_dumps (body, JSON_COMPACT);
    snprintf (path, sizeof (path), "/v1/jobs/%s", argv[optind]);
    json_decref (body);
    json_t *r;
    int rc = call ("PUT", path, text, NULL, &r);
    free (text);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else if (!quiet) {
        const char *k;
        json_t *val;
        json_object_foreach (json_object_get (r, "env"), k, val)
        {
            printf ("export %s=%s\n", k, json_string_value (val));
        }
    }
    json_decref (r);
    return 0;
usage:
    json_decref (body);
    return EXIT_USAGE;
}

static int cmd_end_job (int argc, char **argv)
{
    if (argc != 2) {
        fprintf (stderr, "fmbroker: end-job: usage: fmbroker end-job JOB\n");
        return EXIT_USAGE;
    }
    if (!check_job_id ("end-job", argv[1]))
        return EXIT_USAGE;
    char path[256];
    json_t *r;
    snprintf (path, sizeof (path), "/v1/jobs/%s", argv[1]);
    int rc = call ("DELETE", path, NULL, NULL, &r);
    if (rc == 0) {
        if (g.json)
            print_json (r);
        json_decref (r);
    }
    return rc;
}

static const struct {
    const char *name;
    int (*fn) (int, char **);
    const char *help;
    const char *usage; /* printed by "fmbroker NAME --help" */
} cmds[] = {
    {"status",
     cmd_status,
     "the broker's state (a monitoring check: exit 0, 1, 2, 3)",
     "Usage: fmbroker status [--json]\n"
     "The broker's state: FM session, jobs, VNIs, hwcoll, outbox, events.\n"
     "Exit status (for monitoring, as Nagios plugins): 0 all well; 1 degraded\n"
     "(each reason on a 'degraded:' line: the fabric-manager session not up,\n"
     "the VNI pool full, ...); 2 cannot reach the broker (or it refused);\n"
     "3 the check could not run as asked (usage or configuration error).\n"},
    {"metrics",
     cmd_metrics,
     "the broker's metrics (Prometheus text)",
     "Usage: fmbroker metrics\n"
     "Print GET /metrics: every metric family with its HELP and TYPE.\n"},
    {"jobs",
     cmd_jobs,
     "list jobs [--state S] [--user U] [--limit N] [-o COLS] [--noheader]",
     "Usage: fmbroker jobs [--state S] [--user U] [--limit N] [-o COLS] [--noheader]\n"
     "List jobs (numeric ids by value, then the others by name).\n"
     "  -s, --state S     active, releasing, released or lost\n"
     "  -u, --user U      only this user's jobs (name or uid)\n"
     "  -l, --limit N     at most N jobs (1-100000; 100), page after page\n"
     "  -o, --output COLS the columns, comma-separated, from\n"
     "                    " JOBS_DEFAULT_COLS "\n"
     "  -n, --noheader    no header line\n"},
    {"job",
     cmd_job,
     "job show JOB | job release JOB [--force]",
     "Usage: fmbroker job show JOB\n"
     "       fmbroker job release JOB [--force]\n"
     "Show one job (VNIs, hwcoll, environment, node reports), or release it\n"
     "(CLEANUP); --force frees its VNIs without waiting for node reports.\n"},
    {"step-clean",
     cmd_step_clean,
     "release a step's multicast trees [JOB STEP]",
     "Usage: fmbroker step-clean [JOB STEP]\n"
     "Release a step's multicast trees.  Without arguments: the job and step of\n"
     "FI_CXI_COLL_JOB_ID / FI_CXI_COLL_JOB_STEP_ID, authorised by\n"
     "FI_CXI_COLL_MCAST_TOKEN.\n"},
    {"events",
     cmd_events,
     "the event log [--after SEQ] [--follow] [--count N]",
     "Usage: fmbroker events [--after SEQ] [--follow] [--count N]\n"
     "Print events after SEQ (times in ISO 8601 with the offset); --follow waits\n"
     "for more (stop after N with --count).\n"},
    {"reconcile",
     cmd_reconcile,
     "reconcile with the fabric manager now [--reap-foreign] (admin)",
     "Usage: fmbroker reconcile [--reap-foreign]\n"
     "Ask the broker to reconcile with the fabric manager now (admin).  FM\n"
     "reservations with this cluster's prefix that the broker has no record of\n"
     "are only reported (foreign_reservation events); --reap-foreign deletes\n"
     "them in this pass.\n"},
    {"vni",
     cmd_vni,
     "vni list: VNIs held or quarantined",
     "Usage: fmbroker vni list\n"
     "VNIs held or quarantined, with the nodes a quarantine waits for.\n"},
    {"run-job",
     cmd_run_job,
     "RUN hook: run-job JOB --uid U (--nodes L | --node-count N)",
     "Usage: fmbroker run-job JOB --uid UID [--user NAME] (--nodes HOSTLIST | "
     "--node-count N)\n"
     "                        [--ncores N] [--hwcoll auto|on|off] [--vni-count N] "
     "[--tcs LIST] [--quiet]\n"
     "RUN a job (resource-manager hook); prints its environment as export lines.\n"
     "--tcs: the job's traffic classes (names or a mask such as 0x6), within the\n"
     "broker's [cxi] allowed_tcs; default [cxi] tcs.\n"
     "HOSTLIST may be compressed: nid[001-004],login1.\n"},
    {"end-job",
     cmd_end_job,
     "CLEANUP hook: end-job JOB",
     "Usage: fmbroker end-job JOB\n"
     "CLEANUP a job (resource-manager hook); 404 is fine.\n"},
};

/* "--json" among a subcommand's arguments (before "--") is the global
 * option: taken out, so `fmbroker status --json` is `fmbroker --json
 * status`.  Returns the new argc. */
static int take_json (int argc, char **argv)
{
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--") == 0) {
            while (i < argc)
                argv[n++] = argv[i++];
            break;
        }
        if (strcmp (argv[i], "--json") == 0)
            g.json = true;
        else
            argv[n++] = argv[i];
    }
    argv[n] = NULL;
    return n;
}

/* A usage or configuration error: for `status`, a monitoring check,
 * UNKNOWN (3) rather than CRITICAL (2). */
static int usage_error (int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp (argv[i], "status") == 0)
            return STATUS_USAGE;
    return EXIT_USAGE;
}

/* "--help" or "-h" among a subcommand's arguments (before "--"). */
static bool wants_help (int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
        if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0)
            return true;
    return false;
}

static void usage (FILE *f)
{
    fprintf (
        f,
        "Usage: fmbroker [-c CONFIG] [--socket PATH | --broker-url URL[,URL...]]\n"
        "                [--json] [--timeout S] COMMAND [ARGS]\n"
        "Administer fmbrokerd and call it from resource-manager hooks.\n"
        "--broker-url (or [api] broker_url): the broker's TLS listener, or an ordered\n"
        "list of brokers (active, standby) tried in turn within the "
        "timeout.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof (cmds) / sizeof (cmds[0]); i++)
        fprintf (f, "  %-11s %s\n", cmds[i].name, cmds[i].help);
    fprintf (f,
             "\n'fmbroker COMMAND --help' for a command's options.\n"
             "--json may also follow the command (fmbroker status --json).\n"
             "Exit status: 0 ok, 1 the broker refused, 2 usage, 3 broker unreachable;\n"
             "'status' instead: 0 all well, 1 degraded, 2 cannot reach the broker,\n"
             "3 usage or configuration error (Nagios: OK, WARNING, CRITICAL, "
             "UNKNOWN).\n");
}

/* The configuration (as a client reads it) and the broker to call. */
static int load_target (void)
{
    struct fmb_error e;
    fmb_config_defaults (&cfg);
    const char *path =
        g.config ? g.config
                 : (access (FMB_CONFIG_PATH, R_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if ((path && fmb_config_load_client (&cfg, path, &e) < 0) ||
        (g.broker_url && api_config_broker_url (&cfg, g.broker_url, &e) < 0)) {
        fprintf (stderr, "fmbroker: %s\n", e.text);
        return -1;
    }
    api_target_init (&target, &cfg, g.socket);
    return 0;
}

int main (int argc, char **argv)
{
    static const struct option o[] = {{"config", 1, 0, 'c'},
                                      {"socket", 1, 0, 's'},
                                      {"broker-url", 1, 0, 'b'},
                                      {"json", 0, 0, 'j'},
                                      {"timeout", 1, 0, 't'},
                                      {"help", 0, 0, 'h'},
                                      {"version", 0, 0, 'V'},
                                      {0}};
    int c;
    while ((c = getopt_long (argc, argv, "+c:s:b:jt:hV", o, NULL)) != -1) {
        switch (c) {
        case 'c':
            g.config = optarg;
            break;
        case 'b':
            g.broker_url = optarg;
            break;
        case 's':
            g.socket = optarg;
            break;
        case 'j':
            g.json = true;
            break;
        case 't':
            if (!parse_number ("--timeout", optarg, 1, 3600, &g.timeout))
                return usage_error (argc, argv);
            break;
        case 'h':
            usage (stdout);
            return 0;
        case 'V':
            printf ("fmbroker %s\n", FMB_VERSION);
            return 0;
        default:
            usage (stderr);
            return usage_error (argc, argv);
        }
    }
    if (optind >= argc) {
        usage (stderr);
        return EXIT_USAGE;
    }
    size_t which = 0, ncmds = sizeof (cmds) / sizeof (cmds[0]);
    while (which < ncmds && strcmp (argv[optind], cmds[which].name) != 0)
        which++;
    if (which == ncmds) {
        fprintf (stderr, "fmbroker: unknown command '%s'\n", argv[optind]);
        usage (stderr);
        return EXIT_USAGE;
    }
    if (wants_help (argc - optind, argv + optind)) {
        fputs (cmds[which].usage, stdout);
        return 0;
    }
    if (load_target () < 0)
        return usage_error (argc, argv);
    curl_global_init (CURL_GLOBAL_DEFAULT);
    int rc = cmds[which].fn (take_json (argc - optind, argv + optind), argv + optind);
    curl_global_cleanup ();
    api_target_clear (&target);
    return rc;
}

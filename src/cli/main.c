/* fmbroker: the admin and hook CLI.  Talks to fmbrokerd over its Unix
 * socket; tables for people, --json for programs.
 *
 * Exit status: 0 success; 1 the broker refused (its problem detail is
 * printed); 2 usage; 3 the broker could not be reached.  Hooks (run-job,
 * end-job, step-clean) use a short timeout and are meant to be called so
 * that a failure never holds a job (the deploy/ hooks ignore it).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "apiclient.h"
#include "config.h"
#include "hostlist.h"
#include "validate.h"

#define EXIT_REFUSED     1
#define EXIT_USAGE       2
#define EXIT_UNREACHABLE 3

static struct {
    const char *config;
    const char *socket;
    bool json;
    long timeout;
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

/* ---- subcommands --------------------------------------------------- */

static int cmd_status (int argc, char **argv)
{
    (void)argc;
    (void)argv;
    json_t *o;
    int rc = call ("GET", "/v1/status", NULL, NULL, &o);
    if (rc)
        return rc;
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
        printf ("vnis: %lld held, %lld quarantined (pool %lld-%lld)\n",
                num (v, "held"),
                num (v, "quarantined"),
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
    }
    json_decref (o);
    return 0;
}

static void print_job_row (json_t *j)
{
    char vnis[64];
    join_ints (json_object_get (j, "vnis"), vnis, sizeof (vnis));
    json_t *hw = json_object_get (j, "hwcoll");
    printf ("%-16s %-9s %-8lld %-6lld %-12s %-12s %s\n",
            str (j, "id"),
            str (j, "state"),
            num (j, "uid"),
            num (j, "node_count"),
            vnis,
            str (hw, "state"),
            json_object_get (hw, "reason") ? str (hw, "reason") : "");
}

static int cmd_jobs (int argc, char **argv)
{
    static const struct option o[] = {{"state", 1, 0, 's'},
                                      {"user", 1, 0, 'u'},
                                      {"limit", 1, 0, 'l'},
                                      {"help", 0, 0, 'h'},
                                      {0}};
    char q[512] = "";
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "s:u:l:h", o, NULL)) != -1) {
        char *v = optarg ? escape (optarg) : NULL;
        switch (c) {
        case 's':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&state=%s", v);
            break;
        case 'u':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&user=%s", v);
            break;
        case 'l':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&limit=%s", v);
            break;
        case 'h':
            puts (
                "Usage: fmbroker jobs [--state S] [--user U] [--limit N]\nList jobs, "
                "oldest id first.");
            free (v);
            return 0;
        default:
            free (v);
            return EXIT_USAGE;
        }
        free (v);
    }
    char path[600];
    snprintf (path, sizeof (path), "/v1/jobs%s%s", q[0] ? "?" : "", q[0] ? q + 1 : "");
    json_t *r;
    int rc = call ("GET", path, NULL, NULL, &r);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else {
        size_t i;
        json_t *j;
        printf ("%-16s %-9s %-8s %-6s %-12s %-12s %s\n",
                "JOB",
                "STATE",
                "UID",
                "NODES",
                "VNIS",
                "HWCOLL",
                "REASON");
        json_array_foreach (json_object_get (r, "jobs"), i, j)
        {
            print_job_row (j);
        }
        if (json_object_get (r, "next_after"))
            printf ("(more: --limit, or the API's after=%s)\n", str (r, "next_after"));
    }
    json_decref (r);
    return 0;
}

static int cmd_job (int argc, char **argv)
{
    if (argc < 3 || strcmp (argv[1], "--help") == 0 || !valid_job_id (argv[2])) {
        fprintf (argc >= 2 && strcmp (argv[1], "--help") == 0 ? stdout : stderr,
                 "Usage: fmbroker job show JOB\n       fmbroker job release JOB "
                 "[--force]\n");
        return argc >= 2 && strcmp (argv[1], "--help") == 0 ? 0 : EXIT_USAGE;
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
            json_object_foreach (json_object_get (r, "env"), k, v)
            {
                printf ("  %s=%s\n", k, json_string_value (v));
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
        bool force = argc > 3 && strcmp (argv[3], "--force") == 0;
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
    fprintf (stderr, "fmbroker job: unknown action '%s'\n", argv[1]);
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
    if (argc > 1 && strcmp (argv[1], "--help") == 0) {
        puts (
            "Usage: fmbroker step-clean [JOB STEP]\n"
            "Release a step's multicast trees.  Without arguments: the job and step "
            "of\n"
            "FI_CXI_COLL_JOB_ID / FI_CXI_COLL_JOB_STEP_ID, authorised by "
            "FI_CXI_COLL_MCAST_TOKEN.");
        return 0;
    }
    if (!job && fmid) {
        /* FI_CXI_COLL_JOB_ID is "cluster-job"; cluster names have no '-' */
        const char *dash = strchr (fmid, '-');
        snprintf (jobbuf, sizeof (jobbuf), "%s", dash ? dash + 1 : fmid);
        job = jobbuf;
    }
    if (!job || !step || !valid_job_id (job)) {
        fprintf (stderr,
                 "fmbroker step-clean: give JOB STEP, or run inside the job "
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
    time_t t = (time_t)(num (ev, "time_ms") / 1000);
    struct tm tm;
    char when[32], *detail = json_dumps (json_object_get (ev, "detail"),
                                         JSON_COMPACT | JSON_SORT_KEYS);
    strftime (when, sizeof (when), "%Y-%m-%dT%H:%M:%S", localtime_r (&t, &tm));
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
    static const struct option o[] = {{"follow", 0, 0, 'f'},
                                      {"after", 1, 0, 'a'},
                                      {"count", 1, 0, 'n'},
                                      {"help", 0, 0, 'h'},
                                      {0}};
    bool follow = false;
    long long after = 0, count = -1, seen = 0;
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "fa:n:h", o, NULL)) != -1) {
        switch (c) {
        case 'f':
            follow = true;
            break;
        case 'a':
            after = atoll (optarg);
            break;
        case 'n':
            count = atoll (optarg);
            break;
        case 'h':
            puts (
                "Usage: fmbroker events [--after SEQ] [--follow] [--count N]\n"
                "Print events after SEQ; --follow waits for more (stop after N with "
                "--count).");
            return 0;
        default:
            return EXIT_USAGE;
        }
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
    (void)argc;
    (void)argv;
    json_t *r;
    int rc = call ("POST", "/v1/reconcile", NULL, NULL, &r);
    if (rc == 0) {
        if (g.json)
            print_json (r);
        else
            printf ("reconciliation scheduled (fabric manager %s)\n",
                    str (r, "fabric_manager"));
        json_decref (r);
    }
    return rc;
}

static int cmd_vni (int argc, char **argv)
{
    if (argc < 2 || strcmp (argv[1], "list") != 0) {
        fprintf (stderr, "Usage: fmbroker vni list\n");
        return EXIT_USAGE;
    }
    json_t *r;
    int rc = call ("GET", "/v1/vnis", NULL, NULL, &r);
    if (rc)
        return rc;
    if (g.json)
        print_json (r);
    else {
        size_t i;
        json_t *v;
        printf ("%-6s %-16s %-12s %-20s %s\n", "VNI", "JOB", "STATE", "UNTIL", "WAITING FOR");
        json_array_foreach (json_object_get (r, "vnis"), i, v)
        {
            char until[32] = "";
            if (json_object_get (v, "until_ms")) {
                time_t t = (time_t)(num (v, "until_ms") / 1000);
                struct tm tm;
                if (t)
                    strftime (until,
                              sizeof (until),
                              "%Y-%m-%dT%H:%M:%S",
                              localtime_r (&t, &tm));
                else
                    snprintf (until, sizeof (until), "all nodes report");
            }
            char nodes[256] = "";
            size_t k;
            json_t *n;
            json_array_foreach (json_object_get (v, "waiting_for"), k, n)
            {
                size_t used = strlen (nodes);
                snprintf (nodes + used,
                          sizeof (nodes) - used,
                          "%s%s",
                          k ? "," : "",
                          json_string_value (n));
            }
            printf ("%-6lld %-16s %-12s %-20s %s\n",
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
 * [--ncores N] [--hwcoll M] [--vni-count N]: RUN with plain arguments,
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
                                      {"quiet", 0, 0, 'q'},
                                      {"help", 0, 0, 'h'},
                                      {0}};
    json_t *body = json_object ();
    struct fmb_error e;
    bool quiet = false;
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "u:U:N:c:C:H:v:qh", o, NULL)) != -1) {
        switch (c) {
        case 'u':
            json_object_set_new (body, "uid", json_integer (atoll (optarg)));
            break;
        case 'U':
            json_object_set_new (body, "user", json_string (optarg));
            break;
        case 'N': {
            json_t *nodes = json_array ();
            if (hostlist_expand (optarg, nodes, &e) < 0) {
                fprintf (stderr, "fmbroker run-job: --nodes: %s\n", e.text);
                json_decref (nodes);
                json_decref (body);
                return EXIT_USAGE;
            }
            json_object_set_new (body, "nodes", nodes);
            break;
        }
        case 'c':
            json_object_set_new (body, "node_count", json_integer (atoll (optarg)));
            break;
        case 'C':
            json_object_set_new (body, "ncores", json_integer (atoll (optarg)));
            break;
        case 'H':
            json_object_set_new (body, "hwcoll", json_string (optarg));
            break;
        case 'v':
            json_object_set_new (body, "vni_count", json_integer (atoll (optarg)));
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            puts (
                "Usage: fmbroker run-job JOB --uid UID [--user NAME] (--nodes HOSTLIST "
                "| --node-count N)\n"
                "                        [--ncores N] [--hwcoll auto|on|off] "
                "[--vni-count N] [--quiet]\n"
                "RUN a job (resource-manager hook); prints its environment as export "
                "lines.\n"
                "HOSTLIST may be compressed: nid[001-004],login1.");
            json_decref (body);
            return 0;
        default:
            json_decref (body);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc || !valid_job_id (argv[optind]) ||
        !json_object_get (body, "uid")) {
        fprintf (stderr, "fmbroker run-job: JOB and --uid are required\n");
        json_decref (body);
        return EXIT_USAGE;
    }
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
        json_t *v;
        json_object_foreach (json_object_get (r, "env"), k, v)
        {
            printf ("export %s=%s\n", k, json_string_value (v));
        }
    }
    json_decref (r);
    return 0;
}

static int cmd_end_job (int argc, char **argv)
{
    if (argc < 2 || !valid_job_id (argv[1])) {
        fprintf (stderr,
                 "Usage: fmbroker end-job JOB\nCLEANUP a job (resource-manager hook); "
                 "404 is fine.\n");
        return argc >= 2 && strcmp (argv[1], "--help") == 0 ? 0 : EXIT_USAGE;
    }
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
} cmds[] = {
    {"status", cmd_status, "the broker's state"},
    {"jobs", cmd_jobs, "list jobs [--state S] [--user U] [--limit N]"},
    {"job", cmd_job, "job show JOB | job release JOB [--force]"},
    {"step-clean", cmd_step_clean, "release a step's multicast trees [JOB STEP]"},
    {"events", cmd_events, "the event log [--after SEQ] [--follow] [--count N]"},
    {"reconcile", cmd_reconcile, "reconcile with the fabric manager now (admin)"},
    {"vni", cmd_vni, "vni list: VNIs held or quarantined"},
    {"run-job",
     cmd_run_job,
     "RUN hook: run-job JOB --uid U (--nodes L | --node-count N)"},
    {"end-job", cmd_end_job, "CLEANUP hook: end-job JOB"},
};

static void usage (FILE *f)
{
    fprintf (
        f,
        "Usage: fmbroker [-c CONFIG] [--socket PATH] [--json] [--timeout S] COMMAND "
        "[ARGS]\n"
        "Administer fmbrokerd and call it from resource-manager hooks.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof (cmds) / sizeof (cmds[0]); i++)
        fprintf (f, "  %-11s %s\n", cmds[i].name, cmds[i].help);
    fprintf (
        f,
        "\n'fmbroker COMMAND --help' for a command's options.\n"
        "Exit status: 0 ok, 1 the broker refused, 2 usage, 3 broker unreachable.\n");
}

int main (int argc, char **argv)
{
    static const struct option o[] = {{"config", 1, 0, 'c'},
                                      {"socket", 1, 0, 's'},
                                      {"json", 0, 0, 'j'},
                                      {"timeout", 1, 0, 't'},
                                      {"help", 0, 0, 'h'},
                                      {"version", 0, 0, 'V'},
                                      {0}};
    struct fmb_error e;
    int c;
    while ((c = getopt_long (argc, argv, "+c:s:jt:hV", o, NULL)) != -1) {
        switch (c) {
        case 'c':
            g.config = optarg;
            break;
        case 's':
            g.socket = optarg;
            break;
        case 'j':
            g.json = true;
            break;
        case 't':
            g.timeout = atol (optarg);
            break;
        case 'h':
            usage (stdout);
            return 0;
        case 'V':
            printf ("fmbroker %s\n", FMB_VERSION);
            return 0;
        default:
            usage (stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage (stderr);
        return EXIT_USAGE;
    }
    fmb_config_defaults (&cfg);
    const char *path =
        g.config ? g.config
                 : (access (FMB_CONFIG_PATH, R_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if (path && fmb_config_load (&cfg, path, &e) < 0) {
        fprintf (stderr, "fmbroker: %s\n", e.text);
        return EXIT_USAGE;
    }
    if (api_target_init (&target, &cfg, g.socket, &e) < 0) {
        fprintf (stderr, "fmbroker: %s\n", e.text);
        return EXIT_USAGE;
    }
    curl_global_init (CURL_GLOBAL_DEFAULT);
    int rc = -1;
    for (size_t i = 0; i < sizeof (cmds) / sizeof (cmds[0]); i++)
        if (strcmp (argv[optind], cmds[i].name) == 0)
            rc = cmds[i].fn (argc - optind, argv + optind);
    if (rc < 0) {
        fprintf (stderr, "fmbroker: unknown command '%s'\n", argv[optind]);
        usage (stderr);
        rc = EXIT_USAGE;
    }
    curl_global_cleanup ();
    api_target_clear (&target);
    return rc;
}

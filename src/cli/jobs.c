/* jobs.c: fmbroker jobs and job (jobs.h). */
#include "jobs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libsmartcols.h>

#include "argcheck.h"
#include "fields.h"

/* Job ids in a natural order: numeric ids by value (before the others),
 * the others as text. */
static int job_id_cmp (const void *a, const void *b)
{
    const char *x = cli_str (*(json_t *const *)a, "id");
    const char *y = cli_str (*(json_t *const *)b, "id");
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

static void job_cell (json_t *j, enum job_col c, char *out, size_t len)
{
    json_t *hw = json_object_get (j, "hwcoll");
    switch (c) {
    case JC_JOB:
        snprintf (out, len, "%s", cli_str (j, "id"));
        break;
    case JC_STATE:
        snprintf (out, len, "%s", cli_str (j, "state"));
        break;
    case JC_UID:
        snprintf (out, len, "%lld", cli_num (j, "uid"));
        break;
    case JC_USER:
        snprintf (out, len, "%s", cli_str (j, "user"));
        break;
    case JC_NODES:
        snprintf (out, len, "%lld", cli_num (j, "node_count"));
        break;
    case JC_VNIS:
        cli_join_ints (json_object_get (j, "vnis"), out, len);
        break;
    case JC_HWCOLL:
        snprintf (out, len, "%s", cli_str (hw, "state"));
        break;
    case JC_REASON:
        snprintf (out,
                  len,
                  "%s",
                  json_object_get (hw, "reason") ? cli_str (hw, "reason") : "");
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
static int list_jobs (struct cli *cli, const char *query, long long limit, json_t **ret)
{
    json_t *all = json_array ();
    char next[512] = ""; /* the broker's cursor; ids are shorter */
    int rc = 0;
    if (!all)
        return EXIT_REFUSED;
    do {
        long long want = limit - (long long)json_array_size (all);
        char *after = next[0] ? cli_escape (next) : NULL;
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
        if ((rc = cli_call (cli, "GET", path, NULL, NULL, &page))) {
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

int cmd_jobs (struct cli *cli, int argc, char **argv)
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
        char *v = optarg ? cli_escape (optarg) : NULL;
        switch (c) {
        case 's':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&state=%s", v);
            break;
        case 'u':
            snprintf (q + strlen (q), sizeof (q) - strlen (q), "&user=%s", v);
            break;
        case 'l':
            if (!cli_parse_number ("jobs --limit", optarg, 1, 100000, &limit)) {
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
    int rc = list_jobs (cli, q, limit, &r);
    if (rc)
        return rc;
    if (cli->json)
        cli_print_json (r);
    else {
        if (print_jobs_table (json_object_get (r, "jobs"), cols, ncols, noheader) < 0)
            fprintf (stderr, "fmbroker: out of memory\n");
        if (json_object_get (r, "next_after"))
            fprintf (stderr,
                     "fmbroker: jobs: more jobs than --limit: a larger --limit, "
                     "or the API's after=%s\n",
                     cli_str (r, "next_after"));
    }
    json_decref (r);
    return 0;
}

/* job show, as a table. */
static void print_job (json_t *r)
{
    json_t *hw = json_object_get (r, "hwcoll");
    char vnis[64];
    cli_join_ints (json_object_get (r, "vnis"), vnis, sizeof (vnis));
    printf ("job %s: %s, uid %lld, %lld nodes, VNIs %s, TCs %s\n",
            cli_str (r, "id"),
            cli_str (r, "state"),
            cli_num (r, "uid"),
            cli_num (r, "node_count"),
            vnis,
            cli_str (r, "tcs"));
    /* A job found not eligible was never asked of the FM: the FM job id
     * the broker would have used names nothing there. */
    if (strcmp (cli_str (hw, "state"), "not_eligible") == 0)
        printf ("hwcoll: not_eligible (no FM job)");
    else
        printf ("hwcoll: %s (FM job %s, %lld addresses)",
                cli_str (hw, "state"),
                cli_str (hw, "fm_job_id"),
                cli_num (hw, "mcast_limit"));
    printf ("%s%s\n",
            json_object_get (hw, "reason") ? ": " : "",
            json_object_get (hw, "reason") ? cli_str (hw, "reason") : "");
    const char *k;
    json_t *v;
    /* The session token is a secret: a table gets pasted into
     * tickets; --json is what a script that needs it reads. */
    json_object_foreach (json_object_get (r, "env"), k, v)
    {
        printf ("  %s=%s\n",
                k,
                strcmp (k, "FI_CXI_COLL_MCAST_TOKEN") == 0 ? "(hidden; --json shows it)"
                                                           : json_string_value (v));
    }
    size_t i;
    json_t *n;
    json_array_foreach (json_object_get (r, "node_reports"), i, n)
    {
        printf ("node %s: CXI services %s%s%s\n",
                cli_str (n, "node"),
                cli_str (n, "cxi"),
                json_object_get (n, "detail") ? ": " : "",
                json_object_get (n, "detail") ? cli_str (n, "detail") : "");
    }
}

int cmd_job (struct cli *cli, int argc, char **argv)
{
    if (argc < 3) {
        fprintf (stderr,
                 "fmbroker: job: usage: fmbroker job show JOB | fmbroker job "
                 "release JOB [--force]\n");
        return EXIT_USAGE;
    }
    if (!cli_check_job_id ("job", argv[2]))
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
        if ((rc = cli_call (cli, "GET", path, NULL, NULL, &r)))
            return rc;
        if (cli->json)
            cli_print_json (r);
        else
            print_job (r);
        json_decref (r);
        return 0;
    }
    if (strcmp (argv[1], "release") == 0) {
        snprintf (
            path, sizeof (path), "/v1/jobs/%s%s", argv[2], force ? "?force=1" : "");
        if ((rc = cli_call (cli, "DELETE", path, NULL, NULL, &r)))
            return rc;
        if (cli->json)
            cli_print_json (r);
        else
            printf ("job %s: %s%s\n",
                    argv[2],
                    cli_str (r, "state"),
                    force ? " (VNIs released by force)" : "");
        json_decref (r);
        return 0;
    }
    fprintf (stderr, "fmbroker: job: unknown action '%s'\n", argv[1]);
    return EXIT_USAGE;
}

/* hooks.c: run-job, end-job and step-clean (hooks.h). */
#include "hooks.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argcheck.h"
#include "fields.h"
#include "runopts.h"
#include "validate.h"

/* One of RUN's user options (runopts.h checks it: the SPANK plugin, the
 * node's prolog and the Flux plugin check theirs there too). */
static bool set_option (struct run_options *opts,
                        enum run_opt which,
                        const char *name,
                        const char *value)
{
    struct fmb_error e;
    if (run_option_parse (opts, which, value, name, &e) < 0) {
        fprintf (stderr, "fmbroker: run-job: %s\n", e.text);
        return false;
    }
    return true;
}

/* What run-job needs once its options are read: JOB (alone), --uid,
 * --nodes or --node-count.  The options go into the body. */
static bool run_job_complete (int argc,
                              char **argv,
                              const struct run_options *opts,
                              json_t *body)
{
    struct fmb_error e;
    if (run_options_to_json (opts, body, &e) < 0) {
        fprintf (stderr, "fmbroker: run-job: %s\n", e.text);
        return false;
    }
    if (optind >= argc || !json_object_get (body, "uid")) {
        fprintf (stderr, "fmbroker: run-job: JOB and --uid are required\n");
        return false;
    }
    if (!json_object_get (body, "nodes") == !json_object_get (body, "node_count")) {
        fprintf (stderr, "fmbroker: run-job: --nodes or --node-count, one of them\n");
        return false;
    }
    if (optind + 1 < argc) {
        fprintf (
            stderr, "fmbroker: run-job: unexpected argument '%s'\n", argv[optind + 1]);
        return false;
    }
    return cli_check_job_id ("run-job", argv[optind]);
}

/* run-job's options into the RUN body; false (printed) on a usage error. */
static bool run_job_options (int argc, char **argv, json_t *body, bool *quiet)
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
    int c;
    long long v;
    struct run_options opts;
    /* the broker checks vni_count against [vni] max_per_job, tcs
     * against [cxi] allowed_tcs: this host need not know them */
    run_options_init (&opts, RUN_VNI_COUNT_MAX, RUN_TCS_ALL);
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "u:U:N:c:C:H:v:T:q", o, NULL)) != -1) {
        switch (c) {
        case 'u':
            if (!cli_parse_number ("run-job --uid", optarg, 0, UID_MAX_VALID, &v))
                return false;
            json_object_set_new (body, "uid", json_integer (v));
            break;
        case 'U':
            json_object_set_new (body, "user", json_string (optarg));
            break;
        case 'N': /* sent compressed, as given: the broker expands it */
            if (!set_option (&opts, RUN_OPT_NODES, "--nodes ", optarg))
                return false;
            break;
        case 'c':
            if (!cli_parse_number ("run-job --node-count", optarg, 1, NODES_MAX, &v))
                return false;
            json_object_set_new (body, "node_count", json_integer (v));
            break;
        case 'C':
            if (!set_option (&opts, RUN_OPT_NCORES, "--ncores ", optarg))
                return false;
            break;
        case 'H':
            if (!set_option (&opts, RUN_OPT_HWCOLL, "--hwcoll ", optarg))
                return false;
            break;
        case 'v':
            if (!set_option (&opts, RUN_OPT_VNI_COUNT, "--vni-count ", optarg))
                return false;
            break;
        case 'T':
            if (!set_option (&opts, RUN_OPT_TCS, "--tcs ", optarg))
                return false;
            break;
        case 'q':
            *quiet = true;
            break;
        default:
            return false;
        }
    }
    return run_job_complete (argc, argv, &opts, body);
}

/* run-job JOB --uid U [--user NAME] (--nodes HOSTLIST | --node-count N)
 * [--ncores N] [--hwcoll M] [--vni-count N] [--tcs LIST]: RUN with plain arguments,
 * printing the job environment as export lines. */
int cmd_run_job (struct cli *cli, int argc, char **argv)
{
    json_t *body = json_object ();
    bool quiet = false;
    if (!run_job_options (argc, argv, body, &quiet)) {
        json_decref (body);
        return EXIT_USAGE;
    }
    char path[256], *text = json_dumps (body, JSON_COMPACT);
    snprintf (path, sizeof (path), "/v1/jobs/%s", argv[optind]);
    json_decref (body);
    json_t *r;
    int rc = cli_call (cli, "PUT", path, text, NULL, &r);
    free (text);
    if (rc)
        return rc;
    if (cli->json)
        cli_print_json (r);
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
}

int cmd_end_job (struct cli *cli, int argc, char **argv)
{
    if (argc != 2) {
        fprintf (stderr, "fmbroker: end-job: usage: fmbroker end-job JOB\n");
        return EXIT_USAGE;
    }
    if (!cli_check_job_id ("end-job", argv[1]))
        return EXIT_USAGE;
    char path[256];
    json_t *r;
    snprintf (path, sizeof (path), "/v1/jobs/%s", argv[1]);
    int rc = cli_call (cli, "DELETE", path, NULL, NULL, &r);
    if (rc == 0) {
        if (cli->json)
            cli_print_json (r);
        json_decref (r);
    }
    return rc;
}

int cmd_step_clean (struct cli *cli, int argc, char **argv)
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
    if (job && !cli_check_job_id ("step-clean", job))
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
    /* The broker holds its answer while the FM deletes the trees, up to
     * 'wait' seconds, then says "cleaning" (the outbox finishes it): 2 s
     * less than the call's timeout, so that a slow FM gets that answer
     * and not a timeout (exit 75, a retry for nothing). */
    char path[1024];
    char *estep = cli_escape (step);
    long long wait = cli->timeout - 2 < 10 ? cli->timeout - 2 : 10;
    snprintf (path,
              sizeof (path),
              "/v1/jobs/%s/steps/%s?wait=%lld",
              job,
              estep,
              wait > 0 ? wait : 0);
    free (estep);
    json_t *r;
    int rc = cli_call (cli, "DELETE", path, NULL, token, &r);
    if (rc)
        return rc;
    if (cli->json)
        cli_print_json (r);
    else
        printf ("job %s step %s: %s\n", job, step, cli_str (r, "state"));
    json_decref (r);
    return 0;
}

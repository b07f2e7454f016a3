/* status.c: fmbroker status and metrics (status.h). */
#include "status.h"

#include <stdio.h>
#include <string.h>

#include "fields.h"

/* GET /metrics: Prometheus text, as it came (the client hands a text
 * answer over as a JSON string). */
int cmd_metrics (struct cli *cli, int argc, char **argv)
{
    json_t *o;
    if (argc > 1) {
        fprintf (stderr, "fmbroker: metrics: unexpected argument '%s'\n", argv[1]);
        return EXIT_USAGE;
    }
    int rc = cli_call (cli, "GET", "/metrics", NULL, NULL, &o);
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
 * check that fails is a reason too (the status answered).  The FM
 * session's state in 'status' becomes the verdict's: the status was
 * read a moment before, and a session that came up (or went down)
 * between the two must not print "down" beside an OK (or "up" beside
 * its own reason). */
static json_t *health_reasons (struct cli *cli, json_t *status)
{
    json_t *h;
    if (cli_call (cli, "GET", "/v1/health", NULL, NULL, &h))
        return json_pack ("[s]", "the broker's health check failed (see above)");
    json_t *reasons = json_incref (json_object_get (h, "reasons"));
    const char *verdict = json_string_value (json_object_get (h, "status"));
    if (!reasons && verdict && strcmp (verdict, "ok") != 0)
        reasons = json_pack ("[s]", verdict);
    json_t *fm_state = json_object_get (h, "fabric_manager");
    json_t *fm = json_object_get (status, "fabric_manager");
    if (json_is_string (fm_state) && json_is_object (fm) &&
        !json_equal (fm_state, json_object_get (fm, "state"))) {
        json_object_set (fm, "state", fm_state);
        json_object_del (fm, "last_error"); /* the reasons say it now */
    }
    json_decref (h);
    return reasons;
}

/* status as lines for people; each reason on a "degraded:" line. */
static void print_status (json_t *o, json_t *reasons)
{
    json_t *fm = json_object_get (o, "fabric_manager"),
           *j = json_object_get (o, "jobs");
    json_t *v = json_object_get (o, "vnis"), *h = json_object_get (o, "hwcoll");
    printf ("fmbrokerd %s, cluster %s, up %llds\n",
            cli_str (o, "version"),
            cli_str (o, "cluster"),
            cli_num (o, "uptime_s"));
    bool url = json_object_get (fm, "url") != NULL;
    printf ("fabric manager: %s%s%s%s\n",
            cli_str (fm, "state"),
            url ? " (" : "",
            url ? cli_str (fm, "url") : "",
            url ? ")" : "");
    if (json_object_get (fm, "last_error"))
        printf ("  last error: %s\n", cli_str (fm, "last_error"));
    json_t *lk = json_object_get (o, "state_lock");
    if (lk)
        printf ("state lock: %s held by host %s, pid %lld\n",
                cli_str (lk, "file"),
                cli_str (lk, "host"),
                cli_num (lk, "pid"));
    printf ("jobs: %lld active, %lld releasing, %lld released, %lld lost\n",
            cli_num (j, "active"),
            cli_num (j, "releasing"),
            cli_num (j, "released"),
            cli_num (j, "lost"));
    char free_vnis[40] = ""; /* an older broker does not count them */
    if (json_object_get (v, "free"))
        snprintf (free_vnis, sizeof (free_vnis), ", %lld free", cli_num (v, "free"));
    printf ("vnis: %lld held, %lld quarantined%s (pool %lld-%lld)\n",
            cli_num (v, "held"),
            cli_num (v, "quarantined"),
            free_vnis,
            cli_num (v, "pool_min"),
            cli_num (v, "pool_max"));
    printf (
        "hwcoll: %lld reservations, %lld addresses (%lld per job, min %lld "
        "nodes)\n",
        cli_num (h, "reservations"),
        cli_num (h, "addresses_reserved"),
        cli_num (h, "addrs_per_job"),
        cli_num (h, "min_nodes"));
    printf ("outbox: %lld pending FM operations\n",
            cli_num (json_object_get (o, "outbox"), "depth"));
    printf ("events: last %lld\n", cli_num (json_object_get (o, "events"), "last_seq"));
    size_t i;
    json_t *why;
    json_array_foreach (reasons, i, why)
    {
        printf ("degraded: %s\n", json_string_value (why));
    }
}

int cmd_status (struct cli *cli, int argc, char **argv)
{
    json_t *o;
    if (argc > 1) {
        fprintf (stderr, "fmbroker: status: unexpected argument '%s'\n", argv[1]);
        return EXIT_USAGE;
    }
    int rc = cli_call (cli, "GET", "/v1/status", NULL, NULL, &o);
    if (rc) /* a monitoring check: no broker, or "not now", is CRITICAL */
        return rc == EXIT_TEMPFAIL ? EXIT_CRITICAL : rc;
    json_t *reasons = health_reasons (cli, o);
    rc = reasons ? EXIT_DEGRADED : EXIT_OK;
    if (reasons)
        json_object_set (o, "degraded", reasons);
    if (cli->json)
        cli_print_json (o);
    else
        print_status (o, reasons);
    json_decref (reasons);
    json_decref (o);
    return rc;
}

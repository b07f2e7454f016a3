/* admin.c: fmbroker reconcile and vni (admin.h). */
#include "admin.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fields.h"

int cmd_reconcile (struct cli *cli, int argc, char **argv)
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
            stderr, "fmbroker: reconcile: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    json_t *r;
    int rc = cli_call (cli,
                       "POST",
                       reap ? "/v1/reconcile?reap_foreign=1" : "/v1/reconcile",
                       NULL,
                       NULL,
                       &r);
    if (rc == 0) {
        if (cli->json)
            cli_print_json (r);
        else
            printf ("reconciliation scheduled (fabric manager %s)%s\n",
                    cli_str (r, "fabric_manager"),
                    json_is_true (json_object_get (r, "reap_foreign"))
                        ? "; it deletes foreign reservations too"
                        : "");
        json_decref (r);
    }
    return rc;
}

/* Every page of /v1/vnis (1,000 VNIs a page) in one answer:
 * {"vnis": [...], "pool_min", "pool_max"} as the last page gave them. */
static int list_vnis (struct cli *cli, json_t **ret)
{
    json_t *all = json_array (), *page = NULL;
    long long after = 0;
    for (;;) {
        char path[64];
        snprintf (path, sizeof (path), "/v1/vnis?after=%lld", after);
        int rc = cli_call (cli, "GET", path, NULL, NULL, &page);
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

int cmd_vni (struct cli *cli, int argc, char **argv)
{
    if (argc != 2 || strcmp (argv[1], "list") != 0) {
        fprintf (stderr, "fmbroker: vni: usage: fmbroker vni list\n");
        return EXIT_USAGE;
    }
    json_t *r;
    int rc = list_vnis (cli, &r);
    if (rc)
        return rc;
    if (cli->json)
        cli_print_json (r);
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
                if (cli_num (v, "until_ms") / 1000)
                    cli_iso_time (cli_num (v, "until_ms"), until, sizeof (until));
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
                    cli_num (v, "vni"),
                    cli_str (v, "job"),
                    cli_str (v, "state"),
                    until,
                    nodes[0] ? nodes : "-");
        }
    }
    json_decref (r);
    return 0;
}

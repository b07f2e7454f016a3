/* events.c: fmbroker events (events.h). */
#include "events.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "argcheck.h"
#include "fields.h"

static void print_event (json_t *ev)
{
    char when[40], *detail = json_dumps (json_object_get (ev, "detail"),
                                         JSON_COMPACT | JSON_SORT_KEYS);
    cli_iso_time (cli_num (ev, "time_ms"), when, sizeof (when));
    printf ("%-6lld %s %-22s %-12s %s\n",
            cli_num (ev, "seq"),
            when,
            cli_str (ev, "type"),
            cli_str (ev, "job"),
            detail);
    free (detail);
}

int cmd_events (struct cli *cli, int argc, char **argv)
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
            if (!cli_parse_number ("events --after", optarg, 0, INT64_MAX, &after))
                return EXIT_USAGE;
            break;
        case 'n':
            if (!cli_parse_number ("events --count", optarg, 1, INT64_MAX, &count))
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
    if (follow && cli->timeout < 40)
        cli->timeout = 40; /* the long poll below waits 30 s */
    for (;;) {
        char path[128];
        json_t *r;
        snprintf (path,
                  sizeof (path),
                  "/v1/events?after=%lld%s",
                  after,
                  follow ? "&wait=30" : "");
        int rc = cli_call (cli, "GET", path, NULL, NULL, &r);
        if (rc)
            return rc;
        long long first = cli_num (r, "first_seq");
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
            if (cli->json) {
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
        after = cli_num (r, "last_seq");
        json_decref (r);
        if (!follow)
            return 0;
    }
}

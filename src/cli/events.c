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

/* What events was asked for. */
struct events_options {
    bool follow;
    long long after, count; /* count -1: no end */
};

/* events' options; false (printed) on a usage error. */
static bool events_options (int argc, char **argv, struct events_options *opt)
{
    static const struct option o[] = {
        {"follow", 0, 0, 'f'}, {"after", 1, 0, 'a'}, {"count", 1, 0, 'n'}, {0}};
    int c;
    optind = 0; /* 0: glibc restarts its scan (main used "+") */
    while ((c = getopt_long (argc, argv, "fa:n:", o, NULL)) != -1) {
        switch (c) {
        case 'f':
            opt->follow = true;
            break;
        case 'a':
            if (!cli_parse_number ("events --after", optarg, 0, INT64_MAX, &opt->after))
                return false;
            break;
        case 'n':
            if (!cli_parse_number ("events --count", optarg, 1, INT64_MAX, &opt->count))
                return false;
            break;
        default:
            return false;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "fmbroker: events: unexpected argument '%s'\n", argv[optind]);
        return false;
    }
    return true;
}

int cmd_events (struct cli *cli, int argc, char **argv)
{
    struct events_options opt = {.follow = false, .after = 0, .count = -1};
    if (!events_options (argc, argv, &opt))
        return EXIT_USAGE;
    bool follow = opt.follow;
    long long after = opt.after, count = opt.count, seen = 0;
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

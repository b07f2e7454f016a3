/* cli.h: one run of the fmbroker CLI, the state its commands share (the
 * global options, the configuration, the broker target), and the call to
 * the broker that every command makes.
 *
 * Exit status: 0 success; 1 the broker refused (its problem detail is
 * printed); 2 usage; 3 the broker could not be reached.  `status` is a
 * monitoring check instead (STATUS_*). */
#ifndef FMB_CLI_CLI_H
#define FMB_CLI_CLI_H

#include <stdbool.h>

#include <jansson.h>

#include "apiclient.h"
#include "config.h"

#define EXIT_REFUSED     1
#define EXIT_USAGE       2
#define EXIT_UNREACHABLE 3

/* `status` is a monitoring check, with the Nagios plugin codes:
 * OK, WARNING, CRITICAL, and UNKNOWN for a check that could not run as
 * asked (a usage or configuration error), never read as CRITICAL. */
#define STATUS_OK          0
#define STATUS_DEGRADED    1
#define STATUS_UNREACHABLE 2
#define STATUS_USAGE       3

struct cli {
    const char *config;
    const char *socket;
    const char *broker_url; /* --broker-url: replaces [api] broker_url */
    bool json;
    long long timeout;
    struct fmb_config cfg;
    struct api_target target;
};

/* Call the broker; returns an exit status, *ret gets the JSON body.
 * Problems are printed here, once. */
int cli_call (struct cli *cli,
              const char *method,
              const char *path,
              const char *body,
              const char *token,
              json_t **ret);

/* An answer as --json prints it: indented, keys sorted. */
void cli_print_json (json_t *o);

/* 's' escaped for a URL path segment (a new string, the caller frees
 * it; NULL when out of memory). */
char *cli_escape (const char *s);

#endif

/* cli.h: one run of the fmbroker CLI, the state its commands share (the
 * global options, the configuration, the broker target), and the call to
 * the broker that every command makes.
 *
 * Exit status, one scheme for every command: the Nagios plugin codes,
 * since `status` is a monitoring check and a hook reads the others the
 * same way (deploy/hooklib.sh's fmb_transient: only 2 is worth a retry). */
#ifndef FMB_CLI_CLI_H
#define FMB_CLI_CLI_H

#include <stdbool.h>

#include <jansson.h>

#include "apiclient.h"
#include "config.h"

/* 1: the broker refused (a 4xx: asking again changes nothing), status's
 * degraded (WARNING), or a command that failed.
 * 2: no broker answered, or one answered that it cannot now (408, 429,
 * 5xx: busy, failing over, its disk failing): try again later
 * (CRITICAL for status).
 * 3: the command line or the configuration (UNKNOWN for status, so a
 * mistake in a check's own command line is not read as the broker down). */
#define EXIT_OK          0
#define EXIT_REFUSED     1
#define EXIT_DEGRADED    1
#define EXIT_UNREACHABLE 2
#define EXIT_USAGE       3

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

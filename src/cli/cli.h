/* cli.h: one run of the fmbroker CLI, the state its commands share (the
 * global options, the configuration, the broker target), and the call to
 * the broker that every command makes.
 *
 * Exit status, one scheme for every command but status: the broker's
 * answer as apiretry.h's rule judges it, with sysexits.h's EX_TEMPFAIL
 * (75) for "try again", the one status deploy/hooklib.sh's fmb_transient
 * retries.  status is a monitoring check, so it keeps the Nagios plugin
 * codes (2 CRITICAL where the others say 75). */
#ifndef FMB_CLI_CLI_H
#define FMB_CLI_CLI_H

#include <stdbool.h>

#include <jansson.h>

#include "apiclient.h"
#include "apiretry.h"
#include "config.h"

/* 1: the broker refused (a 4xx: asking again changes nothing), status's
 * degraded (WARNING), or a command that failed.
 * 3: the command line or the configuration (UNKNOWN for status, so a
 * mistake in a check's own command line is not read as the broker down).
 * 75: no broker answered, or one answered that it cannot now (408, 429,
 * 5xx: busy, failing over, its disk failing): try again later.
 * 2: status's CRITICAL, what 75 is for the other commands. */
#define EXIT_OK       API_EXIT_OK
#define EXIT_REFUSED  API_EXIT_REFUSED
#define EXIT_DEGRADED 1
#define EXIT_CRITICAL 2
#define EXIT_USAGE    API_EXIT_USAGE
#define EXIT_TEMPFAIL API_EXIT_TEMPFAIL

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

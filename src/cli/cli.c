/* cli.c: the call to the broker and what every command prints with. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_call (struct cli *cli,
              const char *method,
              const char *path,
              const char *body,
              const char *token,
              json_t **ret)
{
    struct api_reply r;
    struct fmb_error e;
    if (api_client_call (
            &cli->target, NULL, cli->timeout, method, path, body, token, &r, &e) < 0) {
        int err = errno;
        fprintf (stderr, "fmbroker: %s\n", e.text);
        /* EACCES: no call was made, for want of a client token this user
         * may read: the configuration's to fix (3), not worth a retry. */
        return api_outcome_exit (api_outcome_of (-1, err, 0, 0));
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
        return api_outcome_exit (api_outcome_of (0, 0, r.status, 0));
    }
    if (ret)
        *ret = r.body;
    else
        json_decref (r.body);
    return 0;
}

void cli_print_json (json_t *o)
{
    json_dumpf (o, stdout, JSON_INDENT (2) | JSON_SORT_KEYS);
    putchar ('\n');
}

char *cli_escape (const char *s)
{
    size_t len = strlen (s) * 3 + 1;
    char *e = malloc (len);
    if (e && api_path_escape (s, e, len) < 0) {
        free (e);
        return NULL;
    }
    return e;
}

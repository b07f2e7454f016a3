/* stepclean.c: fmbroker_spank_clean.so, the plugin's step-end call to the
 * broker (see stepclean.h for why it is a module of its own). */
#include <stdio.h>
#include <unistd.h>

#include <jansson.h>

#include "apiclient.h"
#include "config.h"
#include "stepclean.h"

int fmb_spank_clean_step (const char *config,
                          const char *job,
                          const char *step,
                          unsigned timeout_s,
                          char *why,
                          size_t len)
{
    struct fmb_config cfg;
    struct api_target t;
    struct api_reply r = {0};
    struct fmb_error e;
    char path[512], estep[3 * 128 + 1];
    fmb_config_defaults (&cfg);
    if (access (config, R_OK) == 0 && fmb_config_load_client (&cfg, config, &e) < 0) {
        snprintf (why, len, ": %s", e.text);
        return -1;
    }
    if (api_path_escape (step, estep, sizeof (estep)) < 0) {
        snprintf (why, len, ": step name '%.64s...' too long", step);
        return -1;
    }
    api_target_init (&t, &cfg, NULL);
    snprintf (path, sizeof (path), "/v1/jobs/%s/steps/%s", job, estep);
    int rc =
        api_client_call (&t, NULL, (long)timeout_s, "DELETE", path, NULL, NULL, &r, &e);
    api_target_clear (&t);
    if (rc < 0)
        snprintf (why, len, ": %s", e.text);
    else if (r.status < 200 || r.status > 299) {
        const char *detail = json_string_value (json_object_get (r.body, "detail"));
        snprintf (
            why, len, " refused by the broker: %ld %s", r.status, detail ? detail : "");
        rc = -1;
    }
    json_decref (r.body);
    return rc < 0 ? -1 : 0;
}

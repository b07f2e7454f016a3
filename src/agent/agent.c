/* agent.c: the run's failure reason and its calls to the broker. */
#include "agent.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include <jansson.h>

#include "apiclient.h"
#include "jobrecord.h"
#include "log.h"

#define BROKER_TIMEOUT_S 5 /* the broker answers from its own store */

int agent_fail_job (struct agent *ag, const char *fmt, ...)
{
    va_list ap;
    if (!ag->final_reason[0]) {
        va_start (ap, fmt);
        vsnprintf (ag->final_reason, sizeof (ag->final_reason), fmt, ap);
        va_end (ap);
    }
    return EXIT_FAIL;
}

int agent_broker_call (struct agent *ag,
                       const char *method,
                       const char *path,
                       const char *body,
                       json_t **ret,
                       struct fmb_error *error)
{
    struct api_reply r;
    ag->broker_status = 0;
    if (api_client_call (&ag->target,
                         ag->keep,
                         BROKER_TIMEOUT_S,
                         method,
                         path,
                         body,
                         NULL,
                         &r,
                         error) < 0) {
        ag->broker_down = true; /* kept reports wait: no second timeout */
        return -1;              /* errno EHOSTUNREACH */
    }
    ag->broker_status = r.status;
    if (r.status < 200 || r.status > 299) {
        const char *detail = json_string_value (json_object_get (r.body, "detail"));
        fmb_errorf (error,
                    "broker: %s %s: %ld %s",
                    method,
                    path,
                    r.status,
                    detail ? detail : "");
        json_decref (r.body);
        errno = r.status == 404 ? ENOENT : EIO;
        return -1;
    }
    if (ret)
        *ret = r.body;
    else
        json_decref (r.body);
    return 0;
}

int agent_setup (struct agent *ag, const struct agent_args *service)
{
    struct fmb_error e;
    if (service) {
        ag->args.config = service->config;
        ag->args.libcxi = service->libcxi;
        ag->args.socket = service->socket;
        ag->args.broker_url = service->broker_url;
        ag->args.state_dir = service->state_dir;
    }
    fmb_config_defaults (&ag->cfg);
    const char *path =
        ag->args.config
            ? ag->args.config
            : (access (FMB_CONFIG_PATH, F_OK) == 0 ? FMB_CONFIG_PATH : NULL);
    if (path && fmb_config_load_client (&ag->cfg, path, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return -1;
    }
    fmb_log_set_level (ag->cfg.log_level);
    if (!ag->args.libcxi)
        ag->args.libcxi = ag->cfg.cxi_libcxi;
    if (ag->args.broker_url &&
        api_config_broker_url (&ag->cfg, ag->args.broker_url, &e) < 0) {
        fmb_log (LOG_ERR, "%s", e.text);
        return -1;
    }
    api_target_init (&ag->target, &ag->cfg, ag->args.socket);
    if (!ag->args.state_dir)
        ag->args.state_dir = JOBRECORD_DIR_DEFAULT;
    return 0;
}

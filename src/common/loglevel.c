/* loglevel.c: syslog level names.  Apart from log.c so that code that
 * only names levels (the configuration, and with it the SPANK plugin)
 * does not bring in journald's library. */
#include <strings.h>

#include "log.h"

static const char *const level_names[] = {
    [LOG_EMERG] = "emerg",
    [LOG_ALERT] = "alert",
    [LOG_CRIT] = "crit",
    [LOG_ERR] = "error",
    [LOG_WARNING] = "warning",
    [LOG_NOTICE] = "notice",
    [LOG_INFO] = "info",
    [LOG_DEBUG] = "debug",
};

const char *fmb_log_level_name (int level)
{
    return level_names[level & 7];
}

int fmb_log_level_parse (const char *name)
{
    for (int i = 0; i <= LOG_DEBUG; i++)
        if (strcasecmp (name, level_names[i]) == 0)
            return i;
    if (strcasecmp (name, "err") == 0)
        return LOG_ERR;
    if (strcasecmp (name, "warn") == 0)
        return LOG_WARNING;
    return -1;
}

/* devices.c: this node's Slingshot NICs through libcxi (devices.h). */
#include "devices.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "monotime.h"

/* The first NIC the kernel's cxi driver shows (name into 'nic'), or
 * false.  FMBROKER_CXI_SYSFS replaces /sys/class/cxi (tests). */
static bool sysfs_nic (char *nic, size_t len)
{
    const char *dir = getenv ("FMBROKER_CXI_SYSFS");
    DIR *d = opendir (dir && *dir ? dir : "/sys/class/cxi");
    struct dirent *de;
    bool found = false;
    if (!d)
        return false;
    while (!found && (de = readdir (d)))
        if (de->d_name[0] != '.') {
            snprintf (nic, len, "%s", de->d_name);
            found = true;
        }
    closedir (d);
    return found;
}

/* A libcxi that cannot be loaded means "no Slingshot NICs here" only when
 * nobody chose it (the [cxi] libcxi default) and the kernel shows no
 * NIC: a mistyped path, or a node whose libcxi is missing, must not turn
 * isolation off while saying "nothing to do". */
#define LIBCXI_DEFAULT "libcxi.so.1"
static int no_libcxi (struct agent *ag, const char *why)
{
    char nic[256];
    if (strcmp (ag->args.libcxi, LIBCXI_DEFAULT) != 0) {
        fmb_log (LOG_ERR,
                 "%s: the libcxi chosen (--libcxi or [cxi] libcxi) cannot be used",
                 why);
        agent_fail_job (
            ag,
            "this node's libcxi cannot be loaded: no job can get CXI services "
            "here");
        return -1;
    }
    if (sysfs_nic (nic, sizeof (nic))) {
        fmb_log (LOG_ERR,
                 "%s, but this node has Slingshot NICs (%s): install libcxi or set "
                 "[cxi] libcxi",
                 why,
                 nic);
        agent_fail_job (
            ag,
            "this node has Slingshot NICs (%s) but no libcxi: no job can get "
            "CXI services here",
            nic);
        return -1;
    }
    fmb_log (
        LOG_NOTICE, "no libcxi (%s): no Slingshot NICs to manage, nothing to do", why);
    return 0;
}

/* Load libcxi and list the NICs.  0 with *ret NULL: nothing to do here. */
int devices_list (struct agent *ag, struct cxil_device_list **ret)
{
    struct fmb_error e;
    *ret = NULL;
    if (cxilib_open (ag->args.libcxi, &ag->lib, &e) < 0) {
        if (errno == EOPNOTSUPP)
            return no_libcxi (ag, e.text);
        agent_fail_job (ag, "%s", e.text);
        return -1;
    }
    int rc = ag->lib.get_device_list (ret);
    if (rc < 0) {
        agent_fail_job (ag, "cxil_get_device_list: %s", strerror (-rc));
        return -1;
    }
    if ((*ret)->count == 0) {
        fmb_log (LOG_NOTICE, "no Slingshot NICs on this node: nothing to do");
        ag->lib.free_device_list (*ret);
        *ret = NULL;
    }
    return 0;
}

const char *devices_errname (int neg)
{
    switch (-neg) {
    case EPERM:
        return "EPERM (not root?)";
    case EINVAL:
        return "EINVAL";
    case EEXIST:
        return "EEXIST (a VNI is already in another service)";
    case ENOSPC:
        return "ENOSPC";
    case EBUSY:
        return "EBUSY";
    case ENOENT:
        return "ENOENT";
    default:
        return strerror (-neg);
    }
}

static void sleep_s (unsigned s)
{
    struct timespec ts = {s, 0};
    nanosleep (&ts, NULL);
}

/* Destroy one service, retrying EBUSY once a second within the window. */
int devices_destroy_svc (struct agent *ag,
                         struct cxil_dev *dev,
                         unsigned svc,
                         const char *job)
{
    for (;;) {
        int r = ag->lib.destroy_svc (dev, svc);
        if (r != -EBUSY || fmb_monotime_ms () >= ag->retry_deadline_ms)
            return r;
        fmb_log (LOG_INFO,
                 "job %s: %s: service %u busy, retrying",
                 job,
                 dev->info.device_name,
                 svc);
        sleep_s (1);
    }
}

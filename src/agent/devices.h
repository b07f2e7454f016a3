/* devices.h: this node's Slingshot NICs through libcxi (cxilib.h): load
 * it and list the NICs, name its errors, destroy a service patiently. */
#ifndef FMB_AGENT_DEVICES_H
#define FMB_AGENT_DEVICES_H

#include "agent.h"

/* Load libcxi (ag->lib) and list the NICs.  0 with *ret NULL: nothing to
 * do here (no NIC, or no libcxi where none was chosen and the kernel
 * shows no NIC); -1 with the job's reason set (agent_fail_job). */
int devices_list (struct agent *ag, struct cxil_device_list **ret);

/* A libcxi error (negative errno) in words. */
const char *devices_errname (int neg);

/* Destroy one service, retrying EBUSY once a second until
 * ag->retry_deadline_ms.  libcxi's result. */
int devices_destroy_svc (struct agent *ag,
                         struct cxil_dev *dev,
                         unsigned svc,
                         const char *job);

#endif

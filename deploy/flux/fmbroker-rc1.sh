#!/bin/sh
# Flux rc1.d script (every instance, as its owner, at start; install as
# /etc/flux/rc1.d/fmbroker): loads fmbroker's jobtap plugin in every
# sub-instance (flux batch, flux alloc), where it deletes each sub-job's
# multicast trees when the sub-job ends, with the session token the
# sub-instance inherited.  The system instance loads it from its own
# configuration ([job-manager] plugins, with the site's settings), so
# this does nothing there.
. "$(dirname "$(readlink -f "$0")")/common.sh"
[ "$(flux getattr instance-level 2>/dev/null || echo 0)" = 0 ] && exit 0
flux jobtap list 2>/dev/null | grep -q '^fmbroker' && exit 0
flux jobtap load "${FMBROKER_FLUX_JOBTAP:-fmbroker.so}" config="$FMBROKER_CONF" ||
    fmb_log "cannot load ${FMBROKER_FLUX_JOBTAP:-fmbroker.so} in this sub-instance: its jobs' multicast trees go with the enclosing job"
exit 0

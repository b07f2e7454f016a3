#!/bin/sh
# Flux rc1.d script (every instance, as its owner, at start; install as
# /etc/flux/rc1.d/fmbroker): loads fmbroker's jobtap plugin in every
# sub-instance (flux batch, flux alloc), where it deletes each sub-job's
# multicast trees when the sub-job ends, with the session token the
# sub-instance inherited.  The system instance loads it from its own
# configuration ([job-manager] plugins, with the site's settings), so
# this does nothing there.
#
# In the system instance it checks that its configuration did load the
# plugin: Flux merges conf.d's files table by table, but an array such
# as [job-manager] plugins in a later file (system.toml, as Flux's admin
# guide sets one up) replaces fmbroker.toml's, and then every job would
# wait in its per-rank prolog and fail.  Said at start, with the fix.
. "$(dirname "$(readlink -f "$0")")/common.sh"
if [ "$(flux getattr instance-level 2>/dev/null || echo 0)" = 0 ]; then
    flux jobtap list 2>/dev/null | grep -q '^fmbroker' ||
        fmb_log "$FMBROKER_NOT_LOADED"
    exit 0
fi
flux jobtap list 2>/dev/null | grep -q '^fmbroker' && exit 0
flux jobtap load "${FMBROKER_FLUX_JOBTAP:-fmbroker.so}" config="$FMBROKER_CONF" ||
    fmb_log "cannot load ${FMBROKER_FLUX_JOBTAP:-fmbroker.so} in this sub-instance: its jobs' multicast trees go with the enclosing job"
exit 0

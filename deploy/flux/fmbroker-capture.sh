#!/bin/sh
# Flux rc1 script (every sub-instance, as its owner, at start): keep the
# enclosing job's SLINGSHOT_*/FI_CXI_* variables (all but the step id) in
# the instance's rundir, so that its jobs get them without asking the
# broker, which knows only system-instance jobs.  Install in rc1.d.
. "$(dirname "$0")/common.sh"
[ "$(fmb_level)" = 0 ] && exit 0
rundir=$(flux getattr rundir 2>/dev/null) || exit 0
umask 077
env | LC_ALL=C grep -E '^(SLINGSHOT|FI_CXI)_[A-Z0-9_]*=[^[:cntrl:]]*$' |
    grep -v '^FI_CXI_COLL_JOB_STEP_ID=' >"$rundir/$FMBROKER_INHERITED.tmp" &&
    mv "$rundir/$FMBROKER_INHERITED.tmp" "$rundir/$FMBROKER_INHERITED"
exit 0

#!/bin/sh
# Flux per-node epilog (root): destroy the job's CXI services; exit 1
# (drain) only when some could not be destroyed.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
timeout 120 fmbroker-cxi epilog --job "$FLUX_JOB_ID" --retry-busy 30 --node "$(hostname -s)"
rc=$?
[ $rc = 1 ] && exit 1
exit 0

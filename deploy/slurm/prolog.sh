#!/bin/sh
# Node prolog (each node, root), run by the fmbroker SPANK plugin's job
# prolog (plugstack.conf prolog=...), which puts what this prints into
# slurmd's log: the job's CXI services on this node's NICs and the job's
# environment record for its steps.  Exits non-zero with the reason as the
# last line when they could not be set up; the plugin then leaves that
# reason in the record, and the job's steps fail (policy=fail_closed, the
# default) or run without isolation (fail_open).  Never drains the node.
. "$(dirname "$0")/common.sh"
# The job's traffic classes (--fmb-tcs) come with the job from the broker.
timeout 60 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog --job "$SLURM_JOB_ID" \
    --ncores "$(fmb_ncores)" --node "${SLURMD_NODENAME:-$(hostname -s)}" 2>&1

#!/bin/sh
# Node prolog (each node, root), run by the fmbroker SPANK plugin's job
# prolog (plugstack.conf prolog=...), which puts what this prints into
# slurmd's log: the job's CXI services on this node's NICs and the job's
# environment record for its steps.  Exits non-zero with the reason as the
# last line when they could not be set up; the plugin then leaves that
# reason in the record, and the job's steps fail (policy=fail_closed, the
# default) or run without isolation (fail_open).  Never drains the node.
case $0 in */*) . "${0%/*}/common.sh" ;; *) . ./common.sh ;; esac
# The job's traffic classes (--fmb-tcs) come with the job from the broker.
# Under plugstack run=node the plugin hands over the job's RUN request
# (FMBROKER_RUN): fmbroker-cxi makes the RUN itself, no PrologSlurmctld.
# The plugin bounds the run (hook_timeout) and kills it past that.  The
# node's 'created' report goes after the prolog (--report-later): the
# job's launch waits for the services, not for the report.
cpus=${SLURM_JOB_CPUS_PER_NODE:-0}
exec "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog --job "$SLURM_JOB_ID" \
    --ncores "${cpus%%[!0-9]*}" --node "${SLURMD_NODENAME:-$(hostname -s)}" \
    ${FMBROKER_RUN:+--run "$FMBROKER_RUN"} --report-later 2>&1

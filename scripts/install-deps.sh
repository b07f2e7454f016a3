#!/bin/sh
# Install what fmbroker needs to build and test on Debian 12 (run as root).
# Safe to run again: apt-get skips what is already installed.
set -eu
export DEBIAN_FRONTEND=noninteractive
packages="build-essential cmake pkg-config clang libclang-rt-14-dev clang-format cppcheck
  libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev
  libssl-dev libcmocka-dev libinih-dev libsystemd-dev libsmartcols-dev
  libgnutls28-dev sqlite3 jq curl openssl file man-db python3 universal-ctags python3-jsonschema python3-yaml rpm
  slurmctld slurmd slurm-client libslurm-dev munge systemd lua5.4
  pacemaker corosync pacemaker-cli-utils resource-agents kmod psmisc iproute2 e2fsprogs"
# pacemaker/corosync: the HA recipe in deploy/ha (t3610 checks it offline
# with crm_verify/crm_simulate from pacemaker-cli-utils).  Installing them
# asks nothing; on a machine whose policy-rc.d allows it, Debian starts
# corosync and pacemaker as a one-node cluster on loopback with nothing
# configured, which runs no resource and binds no public address.
# resource-agents, kmod, psmisc, iproute2, e2fsprogs: t3620 runs the recipe
# on a live two-node cluster in network namespaces (ocf:heartbeat:Filesystem
# needs kmod's modprobe and psmisc's fuser; mkfs.ext4 makes its volume).
missing=
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
fi
# flux-core and flux-security for the tests under a real Flux (t4020):
# built once per machine from ../shared/thirdparty into
# /var/cache/fmbroker-test (scripts/build-flux.sh); cmake then builds the
# Flux plugins against them.  Where the tarballs are absent, t4020 says
# so and skips (under CI=true it fails).
if [ -r "$(dirname "$0")/../../shared/thirdparty/flux-core-0.88.0.tar.gz" ]; then
    "$(dirname "$0")/build-flux.sh" --deps >/dev/null
fi
# libfabric 2.6.0 with its CXI provider, for the test of libfabric's own
# FM client against mockfm (t1095): built once per machine from
# ../shared/thirdparty into /var/cache/fmbroker-test
# (scripts/build-libfabric.sh, with libtool and libjson-c-dev).  Where the
# tarballs are absent, t1095 says so and skips (under CI=true it fails).
tp=$(dirname "$0")/../../shared/thirdparty
if [ -r "$tp/libfabric-2.6.0.tar.gz" ] && [ -r "$tp/shs-headers.tar.gz" ]; then
    "$(dirname "$0")/build-libfabric.sh" --deps >/dev/null
fi

#!/bin/bash
# host-boot.sh NAME DIR AGENTS: "boot" a test broker host.  Run inside the
# host's network namespace, in a mount and a UTS namespace of its own
# (ip netns exec NS unshare -m -u --propagation private host-boot.sh ...),
# so that the host has, as a real one does:
#   - its own host name (corosync's and Pacemaker's node name, the broker's
#     state-lock holder);
#   - its own /etc, /var/lib and /var/log: overlays on the machine's, whose
#     changes go to DIR/{etc,var_lib,var_log}.up (corosync.conf and
#     authkey, /etc/fmbroker, the CIB and scheduler files in
#     /var/lib/pacemaker, /var/lib/fmbroker the mount point, the logs);
#   - a fresh /run and /dev/shm (tmpfs: corosync's pid-file lock, libqb's
#     IPC buffers, the resource agents' state), keeping /run/netns, the
#     namespace handles the fence agent uses;
#   - the test's agents beside Debian's: AGENTS/sbin (fence_fmbtest) over
#     /usr/sbin and AGENTS/ocf (ocf:fmbroker:fmbrokerd) over
#     /usr/lib/ocf/resource.d, read-only overlays.
# libqb's IPC sockets are abstract, hence per network namespace: the two
# hosts' corosync and Pacemaker daemons do not see each other but through
# the network.  Every mount here lives in this mount namespace alone and
# goes away with its last process, which is how the fence agent "powers
# off" a host.  Then it starts corosync and pacemakerd and waits.
set -eu
name=$1 dir=$2 agents=$3
echo $$ >"$dir/pid" # the host's "init": ha_in enters its namespaces
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
hostname "$name"
for p in etc var/lib var/log; do
    d=$dir/${p//\//_}
    mkdir -p "$d.up" "$d.wk"
    mount -t overlay "fmbha-$name" -o "lowerdir=/$p,upperdir=$d.up,workdir=$d.wk" "/$p"
done
mount -t overlay fmbha-sbin -o "lowerdir=$agents/sbin:/usr/sbin" /usr/sbin
mount -t overlay fmbha-ocf -o "lowerdir=$agents/ocf:/usr/lib/ocf/resource.d" /usr/lib/ocf/resource.d
mkdir -p "$dir/netns"
mount --rbind /run/netns "$dir/netns"
mount -t tmpfs -o mode=755 "fmbha-run-$name" /run
mkdir -p /run/netns /run/lock /run/resource-agents
mount --rbind "$dir/netns" /run/netns
umount -l "$dir/netns"
mount -t tmpfs -o mode=1777 "fmbha-shm-$name" /dev/shm
mkdir -p /var/log/corosync /var/log/pacemaker /var/log/fmbroker
chown hacluster:haclient /var/log/pacemaker
echo "$(date +%s%3N) boot $name" >>"$dir/../events.log"
corosync -f &
for _ in $(seq 1 100); do
    corosync-cfgtool -s >/dev/null 2>&1 && break
    sleep 0.1
done
# as Debian's pacemaker.service runs it, logging to its file only
PCMK_logfacility=none PCMK_logfile=/var/log/pacemaker/pacemaker.log pacemakerd &
wait

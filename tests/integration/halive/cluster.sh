# halive/cluster.sh: a live two-node Pacemaker cluster for fmbrokerd on
# one machine, as deploy/ha/ describes it, for t3620-pacemaker-live.sh and
# bench/ha-takeover.sh.  Sourced after lib.sh (uses $T, FMB_BIN, FMB_SRC).
#
#   broker hosts fm1, fm2   network namespaces, each "booted" by
#                           host-boot.sh: own mount and UTS namespaces,
#                           own /etc, /var/lib, /var/log, /run, running
#                           Debian's corosync (knet over UDP) and pacemakerd
#   clients                 a third namespace: the RM, the compute nodes'
#                           agents, and the mock FM (reachable from both)
#   switch                  a fourth: the bridge the others plug into
#   192.0.2.0/24            fm1 .1, fm2 .2, clients .100, floating .50
#                           (TEST-NET-1, inside the test's namespaces only)
#   state volume            an ext4 file system on a loop device over
#                           $T/ha/disk.img, mounted by ocf:heartbeat:Filesystem
#   CIB                     deploy/ha/fmbroker-cib.xml, with its EDIT values
#                           filled in, the fence devices fence_fmbtest and
#                           systemd:fmbrokerd replaced by ocf:fmbroker:fmbrokerd
#                           (halive/fmbrokerd.ocf says why and what it does)
#   HA_TOTEM_EXTRA          (bench/ha-takeover.sh --token) lines added to
#                           corosync's totem section
#   HA_FENCING_DELAY        (--fencing-delay) the CIB's priority-fencing-delay
#
# ha_cleanup (an on_exit hook) kills every process in the namespaces, which
# takes their mounts with them, detaches the loop device and deletes the
# namespaces: only what ha_setup made.

ha_dir=$T/ha
ha_src=$FMB_SRC/tests/integration/halive
ha_pfx=fmb$$-
ha_ns_sw=${ha_pfx}sw ha_ns_fm1=${ha_pfx}fm1 ha_ns_fm2=${ha_pfx}fm2 ha_ns_cl=${ha_pfx}cl
ha_vip=192.0.2.50
ha_url=https://$ha_vip:8443
ha_events=$ha_dir/events.log
ha_loop=

# ha_missing: prints why this machine cannot run the cluster (nothing if it can)
ha_missing () {
    if [ "$(id -u)" != 0 ]; then echo "needs root (network and mount namespaces, a loop device)"; return; fi
    local c
    for c in ip unshare nsenter losetup findmnt mkfs.ext4 corosync corosync-keygen corosync-cfgtool \
        corosync-cmapctl pacemakerd cibadmin crm_resource crm_mon openssl curl jq fuser modprobe; do
        command -v "$c" >/dev/null ||
            { echo "needs the command $c (scripts/install-deps.sh installs what this test needs)"; return; }
    done
    for c in Filesystem IPaddr2; do
        [ -x /usr/lib/ocf/resource.d/heartbeat/$c ] || { echo "needs ocf:heartbeat:$c (resource-agents)"; return; }
    done
    [ -x /usr/bin/python3 ] || { echo "needs /usr/bin/python3"; return; }
    grep -qw overlay /proc/filesystems || { echo "the kernel has no overlay file system"; return; }
    ip netns add "${ha_pfx}probe" 2>/dev/null || { echo "cannot make a network namespace (ip netns add)"; return; }
    ip -n "${ha_pfx}probe" link add p0 type veth peer name p1 2>/dev/null &&
        ip -n "${ha_pfx}probe" link add b0 type bridge 2>/dev/null
    local links=$?
    ip netns del "${ha_pfx}probe"
    [ $links = 0 ] || { echo "cannot make a veth pair and a bridge in a namespace"; return; }
    unshare -m -u --propagation private true 2>/dev/null || { echo "cannot make a mount namespace (unshare -m)"; return; }
    losetup -f >/dev/null 2>&1 || { echo "no free loop device (losetup -f)"; return; }
}

ha_ns () { eval "echo \$ha_ns_$1"; } # ha_ns fm1|fm2|cl|sw
ha_now () { date +%s%3N; }
ha_event () { echo "$(ha_now) $*" >>"$ha_events"; }

# ha_in HOST COMMAND...: run COMMAND on broker host HOST (its namespaces)
ha_in () {
    local pid
    pid=$(cat "$ha_dir/hosts/$1/pid" 2>/dev/null) || return 1
    shift
    nsenter -t "$pid" -m -u -n -- "$@"
}
# ha_cl COMMAND...: run COMMAND in the clients' namespace
ha_cl () { ip netns exec "$ha_ns_cl" "$@"; }

ha_net () {
    local n h
    for n in sw fm1 fm2 cl; do
        ip netns add "$(ha_ns $n)" && ip -n "$(ha_ns $n)" link set lo up || return 1
    done
    ip -n "$ha_ns_sw" link add br0 type bridge && ip -n "$ha_ns_sw" link set br0 up || return 1
    for h in fm1:1 fm2:2 cl:100; do
        n=${h%%:*}
        ip -n "$ha_ns_sw" link add "p-$n" type veth peer name eth0 netns "$(ha_ns "$n")" &&
            ip -n "$ha_ns_sw" link set "p-$n" master br0 up &&
            ip -n "$(ha_ns "$n")" addr add "192.0.2.${h#*:}/24" dev eth0 &&
            ip -n "$(ha_ns "$n")" link set eth0 up || return 1
    done
}

# ha_host_files HOST: what the host's /etc holds before its first boot
ha_host_files () {
    local up=$ha_dir/hosts/$1/etc.up
    mkdir -p "$up/corosync" "$up/fmbroker/tls" &&
        cp "$ha_dir/corosync.conf" "$up/corosync/corosync.conf" &&
        install -m 400 "$ha_dir/authkey" "$up/corosync/authkey" &&
        cp "$ha_dir/fmbroker.conf" "$up/fmbroker/fmbroker.conf" &&
        install -m 600 "$ha_dir/tokens" "$up/fmbroker/tokens" &&
        install -m 644 "$ha_dir/certs/vip.pem" "$up/fmbroker/tls/server.pem" &&
        install -m 600 "$ha_dir/certs/vip.key" "$up/fmbroker/tls/server.key"
}

# ha_setup: the network, the volume, the files; then boots both hosts and
# loads the CIB.  The mock FM runs in the clients' namespace.
ha_setup () {
    mkdir -p "$ha_dir/agents/sbin" "$ha_dir/agents/ocf/fmbroker" "$ha_dir/hosts/fm1" "$ha_dir/hosts/fm2" \
        "$ha_dir/clients" || return 1
    : >"$ha_events"
    ha_net || { echo "network"; return 1; }
    ha_start_mockfm || return 1
    install -m 755 "$ha_src/fence_fmbtest" "$ha_dir/agents/sbin/fence_fmbtest" &&
        install -m 755 "$ha_src/fmbrokerd.ocf" "$ha_dir/agents/ocf/fmbroker/fmbrokerd" || return 1
    truncate -s 64M "$ha_dir/disk.img" && ha_loop=$(losetup -f --show "$ha_dir/disk.img") &&
        echo "$ha_loop" >"$ha_dir/loop" && mkfs.ext4 -q -F "$ha_loop" || { echo "volume"; return 1; }
    # certificates: the floating address is the name clients check
    sh "$FMB_SRC/tests/integration/make-certs.sh" "$ha_dir/certs" >/dev/null &&
        (cd "$ha_dir/certs" && openssl req -newkey rsa:2048 -nodes -subj "/CN=fmbroker" \
            -keyout vip.key -out vip.csr 2>/dev/null &&
            printf "subjectAltName=IP:%s\n" "$ha_vip" >vip.ext &&
            openssl x509 -req -in vip.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile vip.ext -out vip.pem 2>/dev/null) || { echo "certificates"; return 1; }
    ha_rm_tok=rm-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
    printf "rm %s\n" "$ha_rm_tok" >"$ha_dir/tokens"
    corosync-keygen -k "$ha_dir/authkey" >/dev/null 2>&1 || { echo "corosync-keygen"; return 1; }
    cat >"$ha_dir/corosync.conf" <<EOF
totem {
	version: 2
	cluster_name: fmbtest
	transport: knet
	crypto_cipher: aes256
	crypto_hash: sha256
${HA_TOTEM_EXTRA:-}
}
nodelist {
	node {
		name: fm1
		nodeid: 1
		ring0_addr: 192.0.2.1
	}
	node {
		name: fm2
		nodeid: 2
		ring0_addr: 192.0.2.2
	}
}
quorum {
	provider: corosync_votequorum
	two_node: 1
}
logging {
	to_logfile: yes
	logfile: /var/log/corosync/corosync.log
	to_syslog: no
	to_stderr: no
	timestamp: hires
}
EOF
    cat >"$ha_dir/fmbroker.conf" <<EOF
[broker]
cluster_name = c1
state_dir = /var/lib/fmbroker
[api]
socket = /run/fmbroker/fmbroker.sock
rm_users = root
admin_users = root
tcp = $ha_vip:8443
tls_cert = /etc/fmbroker/tls/server.pem
tls_key = /etc/fmbroker/tls/server.key
tokens_file = /etc/fmbroker/tokens
[fabric_manager]
url = $fm_url
auth = none
[hwcoll]
addrs_per_job = 4
min_nodes = 2
[vni]
pool = 1024-65535
EOF
    ha_host_files fm1 && ha_host_files fm2 || { echo "host files"; return 1; }
    # the clients: the RM's configuration (rm token) and the nodes' (%n.token)
    printf "%s\n" "$ha_rm_tok" >"$ha_dir/clients/rm.token" && chmod 600 "$ha_dir/clients/rm.token"
    printf "[api]\nsocket = %s\nbroker_url = %s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$ha_dir/no-such.sock" "$ha_url" "$ha_dir/clients/rm.token" "$ha_dir/certs/ca.pem" >"$ha_dir/clients/rm.conf"
    printf "[api]\nsocket = %s\nbroker_url = %s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$ha_dir/no-such.sock" "$ha_url" "$ha_dir/clients/%n.token" "$ha_dir/certs/ca.pem" >"$ha_dir/clients/node.conf"
    ha_boot fm1 && ha_boot fm2 || return 1
    ha_wait_online fm1 fm2 || { echo "the cluster did not form"; return 1; }
    ha_load_cib || { echo "the CIB did not load"; return 1; }
}

# ha_start_mockfm: the mock FM in the clients' namespace; sets fm_url,
# fm_pid (lib.sh's stop_mockfm stops it)
ha_start_mockfm () {
    rm -f "$T/fm.port"
    ip netns exec "$ha_ns_cl" "$FMB_BIN/mockfm" --listen 192.0.2.100:0 --port-file "$T/fm.port" \
        --request-log "$T/fm.log" --state-file="$T/fm.state" 2>>"$T/fm.err" &
    fm_pid=$!
    wait_for 100 0.05 test -s "$T/fm.port" || { echo "mockfm did not start"; return 1; }
    fm_port=$(cat "$T/fm.port")
    fm_url="http://192.0.2.100:$fm_port"
}
# the mock FM's own checks go through its namespace
mockfm_jobs () { ha_cl curl -sf "$fm_url/_mock/state" | jq -r '.jobs | keys[]'; }

# ha_boot HOST: power the host on and start its cluster stack
ha_boot () {
    local d=$ha_dir/hosts/$1 ns
    ns=$(ha_ns "$1")
    ip -n "$ha_ns_sw" link set "p-$1" up && ip -n "$ns" link set eth0 up || return 1
    rm -f "$d/pid"
    # (in a subshell: not a job of this shell, whose end the fence would report)
    (ip netns exec "$ns" unshare -m -u --propagation private /bin/bash "$ha_src/host-boot.sh" "$1" "$d" \
        "$ha_dir/agents" </dev/null >>"$d/boot.log" 2>&1 &)
    wait_for 100 0.05 test -s "$d/pid" || { echo "$1 did not boot"; cat "$d/boot.log"; return 1; }
}

# ha_power_off HOST: what the fence agent does, from the test (cleanup)
ha_power_off () {
    local ns pids
    ns=$(ha_ns "$1")
    for _ in $(seq 1 100); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null
        sleep 0.05
    done
    return 1
}

# ha_mon HOST: crm_mon's XML, as seen from HOST
ha_mon () { ha_in "$1" crm_mon -1 --output-as=xml 2>/dev/null; }
# ha_online HOST NODE...: HOST's Pacemaker sees every NODE online, and a DC
ha_online () {
    local h=$1 x
    shift
    x=$(ha_mon "$h") || return 1
    echo "$x" | python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.stdin).getroot()
dc = r.find("summary/current_dc")
on = {n.get("name") for n in r.iter("node") if n.get("online") == "true" and n.get("name")}
sys.exit(0 if dc is not None and dc.get("present") == "true" and set(sys.argv[1:]) <= on else 1)' "$@"
}
ha_wait_online () { wait_for 600 0.2 ha_online "$1" "$@"; }

# ha_where [HOST]: the node fmbrokerd is Started on (as HOST sees it), or "stopped"
ha_where () {
    local h=${1:-}
    if [ -z "$h" ]; then
        for h in fm1 fm2; do [ -s "$ha_dir/hosts/$h/pid" ] && kill -0 "$(cat "$ha_dir/hosts/$h/pid")" 2>/dev/null && break; done
    fi
    ha_mon "$h" | python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.stdin).getroot()
g = {e.get("id"): e for e in r.iter("resource")}
names = []
for rid in ("fm-fs", "fm-ip", "fmbrokerd"):
    e = g.get(rid)
    n = e.find("node") if e is not None else None
    names.append(n.get("name") if n is not None and e.get("role") == "Started" and e.get("active") == "true" else "stopped")
print(names[0] if len(set(names)) == 1 else "split:" + ",".join(names))'
}

ha_is_at () { [ "$(ha_where)" = "$1" ]; }

# ha_cib: deploy/ha/fmbroker-cib.xml made live here (see the header)
ha_cib () {
    python3 - "$FMB_SRC/deploy/ha/fmbroker-cib.xml" "$ha_loop" "$ha_vip" "$FMB_BIN/fmbrokerd" "$ha_events" \
        "$ha_ns_fm1" "$ha_ns_fm2" "$ha_ns_sw" "${HA_FENCING_DELAY:-}" <<'PY'
import sys, xml.etree.ElementTree as ET
src, loop, vip, binary, events, ns1, ns2, sw, delay = sys.argv[1:10]
t = ET.parse(src)
if delay: # bench/ha-takeover.sh --fencing-delay
    [n for n in t.iter("nvpair") if n.get("name") == "priority-fencing-delay"][0].set("value", delay)
res = t.find("configuration/resources")
def set_params(prim, params):
    ia = prim.find("instance_attributes")
    if ia is None:
        ia = ET.SubElement(prim, "instance_attributes", id=prim.get("id") + "-params")
        prim.remove(ia)
        prim.insert(0, ia)
    for k, v in params.items():
        nv = [n for n in ia.iter("nvpair") if n.get("name") == k]
        if nv:
            nv[0].set("value", v)
        else:
            ET.SubElement(ia, "nvpair", id="%s-%s" % (prim.get("id"), k), name=k, value=v)
for p in res.iter("primitive"):
    pid = p.get("id")
    if p.get("class") == "stonith":
        host = [n.get("value") for n in p.iter("nvpair") if n.get("name") == "pcmk_host_list"][0]
        p.set("type", "fence_fmbtest")
        ia = p.find("instance_attributes")
        for n in list(ia):
            if n.get("name") != "pcmk_host_list":
                ia.remove(n)
        set_params(p, {"netns": ns1 if host == "fm1" else ns2, "switch_netns": sw,
                       "switch_port": "p-" + host, "event_log": events})
    elif p.get("type") == "Filesystem":
        set_params(p, {"device": loop})
    elif p.get("type") == "IPaddr2":
        set_params(p, {"ip": vip, "cidr_netmask": "24"})
    elif pid == "fmbrokerd":
        assert p.get("class") == "systemd", "the recipe no longer runs fmbrokerd through systemd"
        p.set("class", "ocf")
        p.set("provider", "fmbroker")
        set_params(p, {"binary": binary, "event_log": events})
t.write(sys.stdout, encoding="unicode")
PY
}
ha_load_cib () {
    ha_cib >"$ha_dir/cib.xml" || return 1
    # as deploy/ha/README.md says
    cp "$ha_dir/cib.xml" "$ha_dir/hosts/fm1/cib.xml" &&
        ha_in fm1 cibadmin --replace --scope configuration --xml-file "$ha_dir/cib.xml"
}

# ha_probe T0 PREFIX [HOST]: RUN fresh jobs PREFIX-1, PREFIX-2, ... (curl,
# the rm token, the floating address, 0.3 s to connect) every 50 ms until
# one is answered -- by HOST's broker if given (the state lock's holder,
# asked right after) -- for at most 120 s; logs the RUNs answered to the
# clients' answers (one not answered is given up: the checks ask nothing
# of it but that, if the broker made it, it is a live job); prints the
# answer's time (ms since the epoch).
ha_probe () {
    local t0=$1 pfx=$2 host=${3:-} i=0 out at
    while [ $(($(ha_now) - t0)) -lt 120000 ]; do
        i=$((i + 1))
        if { [ -z "$host" ] || ha_holder_is "$host"; } &&
            out=$(ha_cl curl -sf --connect-timeout 0.3 --max-time 3 --cacert "$ha_dir/certs/ca.pem" \
                -H "Authorization: Bearer $ha_rm_tok" -X PUT --data-binary '{"uid":1000,"nodes":["p1","p2"]}' \
                "$ha_url/v1/jobs/$pfx-$i") && [ -n "$out" ]; then
            at=$(ha_now)
            echo "$at RUN $pfx-$i $(echo "$out" | jq -c .vnis)" >>"$ha_dir/clients/answers"
            # the same broker before and after: it answered this RUN
            if [ -z "$host" ] || ha_holder_is "$host"; then
                echo "$at"
                return 0
            fi
        fi
        sleep 0.05
    done
    return 1
}
# ha_holder_is HOST: the broker at the floating address is HOST's
ha_holder_is () {
    [ "$(ha_cl curl -sf --connect-timeout 0.3 --max-time 3 --cacert "$ha_dir/certs/ca.pem" \
        -H "Authorization: Bearer $ha_rm_tok" "$ha_url/v1/status" | jq -r .state_lock.host)" = "$1" ]
}

# ha_broker_pid HOST: fmbrokerd's pid on HOST
ha_broker_pid () {
    local p
    for p in $(ip netns pids "$(ha_ns "$1")"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = fmbrokerd ] && echo "$p" && return 0
    done
    return 1
}
# ha_freeze HOST: the host hangs: every process on it stops (its kernel,
# here the machine's, still answers on its links)
ha_freeze () {
    # shellcheck disable=SC2046
    kill -STOP $(ip netns pids "$(ha_ns "$1")")
}

# ha_node_tokens NODE...: each compute node's token, made on the active
# broker's host (its key is on the state volume)
ha_node_tokens () {
    local n h
    h=$(ha_where) || return 1
    for n in "$@"; do
        ha_in "$h" "$FMB_BIN/fmbrokerd" --node-token "$n" >"$ha_dir/clients/$n.token" &&
            chmod 600 "$ha_dir/clients/$n.token" || return 1
    done
}

# ha_traffic_start PHASE: halive/traffic.sh in the clients' namespace
ha_traffic_start () {
    ha_traffic_stop >/dev/null 2>&1 # what a failed step left running
    touch "$ha_dir/traffic.go"
    ha_cl "$ha_src/traffic.sh" "$ha_dir" "$FMB_BIN" "$1" >>"$ha_dir/traffic.out" 2>&1 &
    ha_traffic_pid=$!
}
# ha_traffic_stop: the clients finish what they were asked (at most 150 s),
# then the nodes deliver the reports they kept
ha_traffic_stop () {
    rm -f "$ha_dir/traffic.go"
    [ -n "${ha_traffic_pid:-}" ] || return 0
    local n=0
    while kill -0 "$ha_traffic_pid" 2>/dev/null && [ $n -lt 1500 ]; do sleep 0.1 && n=$((n + 1)); done
    kill "$ha_traffic_pid" 2>/dev/null && { echo "the clients did not finish in 150 s"; return 1; }
    wait "$ha_traffic_pid" 2>/dev/null
    ha_traffic_pid=
    for n in n1 n2; do
        wait_for 300 0.2 ha_cl env SLURMD_NODENAME=$n MOCKCXI_STATE="$ha_dir/clients/$n.cxi.json" MOCKCXI_DEVICES=1 \
            "$FMB_BIN/fmbroker-cxi" -c "$ha_dir/clients/node.conf" --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" \
            --state-dir "$ha_dir/clients/$n.rec" --node "$n" report --pending ||
            { echo "node $n still keeps reports"; return 1; }
    done
}
# ha_check: halive/check.py (what the clients were answered against the
# state and the FM)
ha_check () {
    ha_cl /usr/bin/python3 "$ha_src/check.py" "$ha_dir/clients/answers" "$ha_url" "$ha_dir/certs/ca.pem" \
        "$ha_rm_tok" "$fm_url"
}
# ha_steps KIND T0 ANSWERED OLD NEW: halive/steps.py's JSON
ha_steps () { python3 "$ha_src/steps.py" "$ha_dir" "$@"; }

# ha_diag: the logs' ends, for a failed step
ha_diag () {
    local h
    echo "--- events"; tail -n 20 "$ha_events" 2>/dev/null
    for h in fm1 fm2; do
        echo "--- $h crm_mon"; ha_in "$h" crm_mon -1 -rf 2>&1 | tail -n 25
        echo "--- $h pacemaker.log (notices)"
        grep -E "notice|error|warning" "$ha_dir/hosts/$h/var_log.up/pacemaker/pacemaker.log" 2>/dev/null | tail -n 25
        echo "--- $h fmbrokerd.log"; tail -n 10 "$ha_dir/hosts/$h/var_log.up/fmbroker/fmbrokerd.log" 2>/dev/null
    done
    echo "--- clients"; tail -n 10 "$ha_dir/traffic.out" 2>/dev/null; grep GAVEUP "$ha_dir/clients/answers" 2>/dev/null | tail -n 5
}

# ha_api METHOD PATH [BODY]: the active broker over TLS from the clients, as the RM
ha_api () {
    ha_cl curl -sf --max-time 10 --cacert "$ha_dir/certs/ca.pem" -H "Authorization: Bearer $ha_rm_tok" \
        -X "$1" ${3+--data-binary "$3"} "$ha_url$2"
}

ha_cleanup () {
    local n ns
    rm -f "$ha_dir/traffic.go"
    [ -n "${ha_traffic_pid:-}" ] && kill "$ha_traffic_pid" 2>/dev/null
    for n in fm1 fm2 cl sw; do
        ns=$(ha_ns "$n")
        [ -e "/run/netns/$ns" ] || continue
        ha_power_off "$n"
    done
    if [ -z "$ha_loop" ] && [ -s "$ha_dir/loop" ]; then ha_loop=$(cat "$ha_dir/loop"); fi
    if [ -n "$ha_loop" ]; then
        # the hosts' mounts went with their namespaces; the last reference may lag
        wait_for 50 0.1 sh -c "! grep -q '^$ha_loop ' /proc/mounts" || true
        losetup -d "$ha_loop" 2>/dev/null
        ha_loop=
    fi
    for n in cl fm1 fm2 sw; do
        ns=$(ha_ns "$n")
        [ -e "/run/netns/$ns" ] && ip netns del "$ns"
    done
    return 0
}

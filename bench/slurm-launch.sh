#!/bin/bash
# bench/slurm-launch.sh [BUILD_DIR]: what the Slurm integration adds to a
# launch.  A real Slurm 22.05 (tests/integration/slurm.sh: two emulated
# nodes on 127.0.0.1) runs `srun -N2 true` with fmbroker's plugin and
# hooks (RUN/CLEANUP on the controller, CXI prolog/epilog over TLS with
# the agent token, the plugin in every step) and without them,
# alternately, and prints the medians side by side; then counts the
# broker and FM calls of 10 steps in one job.  Needs root.  Bounded:
# BENCH_LAUNCHES (20) launches of each kind, every daemon stopped at exit.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin FMB_SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$FMB_SRC/tests/integration/lib.sh"
N=${BENCH_LAUNCHES:-20}
[ "$(id -u)" = 0 ] && [ -f "$FMB_BIN/../lib/fmbroker_spank.so" ] || { echo "needs root and the plugin" >&2; exit 1; }
chmod 755 "$T"
. "$FMB_SRC/tests/integration/slurm.sh"
fm_state_file=
start_mockfm || exit 1
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null
tok=agent-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
echo "agent $tok" >"$T/tokens" && echo "$tok" >"$T/agent.token" && chmod 600 "$T/tokens" "$T/agent.token"
tcp_port=$(free_ports 1) || exit 1
write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
    "tls_key = $T/certs/server.key" "tokens_file = $T/tokens"
start_broker || exit 1
printf "[api]\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n[cxi]\nlibcxi = %s\n" \
    "$tcp_port" "$T/agent.token" "$T/certs/ca.pem" "$FMB_BIN/../mockcxi/new/libcxi.so.1" >"$T/node.conf"
mkdir -p "$S/hooks"
# The controller hooks do nothing in the "without" runs (a /bin/sh each).
for h in prolog_slurmctld epilog_slurmctld; do
    printf '#!/bin/sh\n[ "$(cat %s/mode)" = with ] || exit 0\nexport FMBROKER_CONF=%s FMBROKER_BINDIR=%s\nexec %s\n' \
        "$S" "$T/broker.conf" "$FMB_BIN" "$FMB_SRC/deploy/slurm/$h.sh" >"$S/hooks/$h.sh"
done
for h in prolog epilog; do
    printf '#!/bin/sh\nexport FMBROKER_CONF=%s FMBROKER_SBINDIR=%s FMBROKER_CXI_ARGS="--state-dir %s/rec-$SLURMD_NODENAME"\nexport MOCKCXI_STATE=%s/$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2\nexec %s\n' \
        "$T/node.conf" "$FMB_BIN" "$T" "$T" "$FMB_SRC/deploy/slurm/$h.sh" >"$S/hooks/$h.sh"
done
chmod 755 "$S"/hooks/*.sh
# slurmd decides at start whether a job prolog runs SPANK plugins, so a
# change of mode restarts the two slurmd (not timed).
mode () {
    echo "$1" >"$S/mode"
    if [ "$1" = with ]; then
        echo "required $FMB_BIN/../lib/fmbroker_spank.so config=$T/node.conf state_dir=$T/rec-%n prolog=$S/hooks/prolog.sh epilog=$S/hooks/epilog.sh" >"$S/plugstack.conf"
    else
        : >"$S/plugstack.conf"
    fi
    [ -s "$S/slurmd-n1.pid" ] || return 0
    wait_for 300 0.05 slurm_all_idle
    for n in n1 n2; do kill "$(cat "$S/slurmd-$n.pid")"; done
    for _ in $(seq 100); do pgrep -f "slurmd -D -f $SLURM_CONF" >/dev/null || break; sleep 0.1; done
    for n in n1 n2; do setsid /usr/sbin/slurmd -D -f "$SLURM_CONF" -N $n >>"$S/log/slurmd-$n.out" 2>&1 </dev/null & done
    wait_for 300 0.1 sh -c "test \"\$(sinfo -h -o \"%t %D\" 2>/dev/null)\" = \"idle 2\""
}
mode without
slurm_up "PrologSlurmctld=$S/hooks/prolog_slurmctld.sh
EpilogSlurmctld=$S/hooks/epilog_slurmctld.sh
PrologFlags=Alloc" || { slurm_diag; exit 1; }

median () { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
launch_ms () { # one srun -N2 true from an idle cluster, as nobody
    wait_for 300 0.05 slurm_all_idle || return 1
    t0=$(date +%s%N)
    setpriv --reuid=nobody --regid=nogroup --clear-groups srun -N2 true || return 1
    echo $((($(date +%s%N) - t0) / 1000000))
}
: >"$T/with.ms" && : >"$T/without.ms"
# Blocks of N/2 launches, without / with / without / with, each after one
# launch that is not counted (the first after a restart).
for block in without with without with; do
    mode $block && launch_ms >/dev/null || { echo "launch failed ($block)" >&2; slurm_diag >&2; exit 1; }
    for i in $(seq $(((N + 1) / 2))); do
        launch_ms >>"$T/$block.ms" || { echo "launch failed ($block)" >&2; slurm_diag >&2; exit 1; }
    done
done
wo=$(median <"$T/without.ms") wi=$(median <"$T/with.ms")
echo "# fmbroker with Slurm: launch cost, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "## srun -N2 true as nobody, from an idle cluster, $(wc -l <"$T/with.ms") launches of each kind in alternating blocks"
echo "| | median ms | min ms | max ms |"
echo "|---|---|---|---|"
for m in without with; do
    printf "| %s fmbroker | %s | %s | %s |\n" "$m" "$(median <"$T/$m.ms")" "$(sort -g "$T/$m.ms" | head -1)" "$(sort -g "$T/$m.ms" | tail -1)"
done
awk -v a="$wi" -v b="$wo" 'BEGIN { printf "| with / without | %.2f | | |\n", a / b }'
echo
# ---- per step: broker and FM calls of 10 steps in one job ---------------
mode with
metric () { rm_call GET /metrics | awk -v k="$1" 'index($0, k) == 1 {s += $NF} END {print s + 0}'; }
wait_for 300 0.05 slurm_all_idle
fm0=$(wc -l <"$T/fm.log")
setpriv --reuid=nobody --regid=nogroup --clear-groups salloc -N2 sh -c \
    'touch '"$T"'/alloc.up; while [ ! -e '"$T"'/alloc.go ]; do sleep 0.05; done; for i in 1 2 3 4 5 6 7 8 9 10; do srun -N2 true; done' \
    >/dev/null 2>&1 &
alloc_pid=$!
wait_for 300 0.05 test -e "$T/alloc.up"
sleep 0.5
api0=$(metric fmbroker_http_responses_total) fm1=$(wc -l <"$T/fm.log")
touch "$T/alloc.go"
wait "$alloc_pid"
wait_for 300 0.05 slurm_all_idle
api1=$(metric fmbroker_http_responses_total)
sleep 1
steps_fm=$(sed -n "$((fm1 + 1)),\$p" "$T/fm.log" | grep -vc "DELETE /fabric/collectives/jobs/c1-[0-9]* " || true)
gets=$(sed -n "$((fm1 + 1)),\$p" "$T/fm.log" | grep -c "^GET " || true)
patches=$(sed -n "$((fm1 + 1)),\$p" "$T/fm.log" | grep -c "^PATCH " || true)
echo "## 10 steps (srun -N2 true) in one job with a multicast reservation"
echo "| | per step |"
echo "|---|---|"
awk -v a="$((api1 - api0))" 'BEGIN { printf "| broker API calls, all nodes (the step-end DELETE, plus the job'"'"'s CLEANUP and node reports once) | %.1f |\n", a / 10 }'
awk -v g="$gets" 'BEGIN { printf "| FM GETs (Slurm'"'"'s switch/hpe_slingshot: 1 per step) | %.1f |\n", g / 10 }'
awk -v p="$patches" 'BEGIN { printf "| FM PATCHes (step trees released; Slurm: 1 per step) | %.1f |\n", p / 10 }'
echo
echo "(the RUN GET+POST and the CLEANUP DELETE happen once per job: $((fm1 - fm0)) FM calls before the steps)"

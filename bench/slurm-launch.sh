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
# Every hook notes "NAME NODE START_NS END_NS" in $T/hooks.times, so each
# launch can be cut into its pieces.  The controller hooks do nothing in
# the "without" runs (a /bin/sh each).
for h in prolog_slurmctld epilog_slurmctld; do
    cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
t0=\$(date +%s%N)
if [ "\$(cat $S/mode)" = with ]; then
    FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN $FMB_SRC/deploy/slurm/$h.sh
fi
echo "$h - \$t0 \$(date +%s%N)" >>$T/hooks.times
HOOK
done
for h in prolog epilog; do
    cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
t0=\$(date +%s%N)
export FMBROKER_CONF=$T/node.conf FMBROKER_SBINDIR=$FMB_BIN FMBROKER_CXI_ARGS="--state-dir $T/rec-\$SLURMD_NODENAME"
export MOCKCXI_STATE=$T/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2
$FMB_SRC/deploy/slurm/$h.sh
rc=\$?
echo "$h \$SLURMD_NODENAME \$t0 \$(date +%s%N)" >>$T/hooks.times
exit \$rc
HOOK
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
# One srun -N2 true from an idle cluster, as nobody: its total and its
# pieces, in ms, as one line of $T/MODE.parts:
#   total  srun start to PrologSlurmctld start (srun, plugin load, submit,
#          scheduling)  PrologSlurmctld  its end to the last node prolog's
#          end (Slurm starting the prolog, the plugin's job prolog, the
#          hook)  the slowest node prolog.sh alone  the rest (the step:
#          launch, the plugin per step, true, exit)
launch () { # MODE
    wait_for 300 0.05 slurm_all_idle || return 1
    : >"$T/hooks.times"
    t0=$(date +%s%N)
    setpriv --reuid=nobody --regid=nogroup --clear-groups srun -N2 true || return 1
    t1=$(date +%s%N)
    awk -v t0="$t0" -v t1="$t1" '
        $1 == "prolog_slurmctld" { cs = $3; ce = $4 }
        $1 == "prolog" { if ($4 > pe) pe = $4; if ($4 - $3 > pd) pd = $4 - $3 }
        END { ms = 1e6; if (!pe) pe = ce
              printf "%d %d %d %d %d %d\n", (t1 - t0) / ms, (cs - t0) / ms, (ce - cs) / ms,
                  (pe - ce) / ms, pd / ms, (t1 - pe) / ms }' "$T/hooks.times" >>"$T/$1.parts"
}
: >"$T/with.parts" && : >"$T/without.parts"
# Blocks of N/2 launches, without / with / without / with, each after one
# launch that is not counted (the first after a restart).
for block in without with without with; do
    mode $block && launch warmup || { echo "launch failed ($block)" >&2; slurm_diag >&2; exit 1; }
    for i in $(seq $(((N + 1) / 2))); do
        launch $block || { echo "launch failed ($block)" >&2; slurm_diag >&2; exit 1; }
    done
done
col () { cut -d' ' -f"$2" "$T/$1.parts" | median; }
cut -d' ' -f1 "$T/without.parts" >"$T/without.ms" && cut -d' ' -f1 "$T/with.parts" >"$T/with.ms"
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
echo "## where a launch's time goes (medians of each piece, ms; they need not add up)"
echo "| piece | without | with |"
echo "|---|---|---|"
piece () { printf "| %s | %s | %s |\n" "$1" "$(col without "$2")" "$(col with "$2")"; }
piece "srun start to PrologSlurmctld start (srun and its plugins, submit, schedule)" 2
piece "PrologSlurmctld (with: fmbroker run-job, RUN with the FM's GET+POST)" 3
piece "its end to the last node prolog's end (slurmd runs the plugin's job prolog)" 4
piece "... of which the slowest node's prolog.sh (fmbroker-cxi prolog over TLS)" 5
piece "the rest: the step (launch, the plugin per step, true, exit)" 6
echo
# ---- what loading the plugin costs: srun --help reads plugstack.conf ---
help_ms () { t0=$(date +%s%N); srun --help >/dev/null 2>&1; echo $((($(date +%s%N) - t0) / 1000000)); }
: >"$T/help.without" && : >"$T/help.with"
for i in $(seq "$N"); do
    echo "required $FMB_BIN/../lib/fmbroker_spank.so" >"$S/plugstack.conf" && help_ms >>"$T/help.with"
    : >"$S/plugstack.conf" && help_ms >>"$T/help.without"
done
echo "## srun --help, $N of each, alternating: what loading the plugin costs a process"
echo "| plugstack.conf | median ms |"
echo "|---|---|"
echo "| empty | $(median <"$T/help.without") |"
echo "| the fmbroker plugin | $(median <"$T/help.with") |"
echo
# ---- per step: 10 steps in one job, timed, and their broker/FM calls ----
metric () { rm_call GET /metrics | awk -v k="$1" 'index($0, k) == 1 {s += $NF} END {print s + 0}'; }
install -d -o nobody "$T/steps"
cat >"$T/steps/job.sh" <<JOB
#!/bin/sh
# inside the allocation: wait for the go, time 10 steps, say so, wait for the end
d=$T/steps
touch \$d/up
while [ ! -e \$d/go ]; do sleep 0.05; done
for i in 1 2 3 4 5 6 7 8 9 10; do
    t0=\$(date +%s%N); srun -N2 true; echo \$(((\$(date +%s%N) - t0) / 1000000)) >>\$d/ms
done
touch \$d/done
while [ ! -e \$d/end ]; do sleep 0.05; done
JOB
chmod 755 "$T/steps/job.sh"
steps () { # MODE: 10 timed steps in one allocation; calls counted around them
    mode "$1" && wait_for 300 0.05 slurm_all_idle || return 1
    rm -f "$T"/steps/up "$T"/steps/go "$T"/steps/done "$T"/steps/end "$T/steps/ms"
    setpriv --reuid=nobody --regid=nogroup --clear-groups salloc -N2 "$T/steps/job.sh" >/dev/null 2>&1 &
    alloc_pid=$!
    wait_for 600 0.05 test -e "$T/steps/up" || return 1
    sleep 0.5
    api0=$(metric fmbroker_http_responses_total) fm1=$(wc -l <"$T/fm.log") # (api1 counts this call)
    touch "$T/steps/go"
    wait_for 1200 0.05 test -e "$T/steps/done" || return 1
    sleep 0.5 # the last step's end
    api1=$(metric fmbroker_http_responses_total) fm2=$(wc -l <"$T/fm.log")
    touch "$T/steps/end" && wait "$alloc_pid"
    cp "$T/steps/ms" "$T/steps.$1"
}
steps without || { echo "steps failed (without)" >&2; slurm_diag >&2; exit 1; }
steps with || { echo "steps failed (with)" >&2; slurm_diag >&2; exit 1; }
gets=$(sed -n "$((fm1 + 1)),${fm2}p" "$T/fm.log" | grep -c "^GET /fabric/collectives/jobs/c1-" || true)
patches=$(sed -n "$((fm1 + 1)),${fm2}p" "$T/fm.log" | grep -c "^PATCH " || true)
echo "## 10 steps (srun -N2 true) in one job (with: a multicast reservation)"
echo "| | without | with |"
echo "|---|---|---|"
echo "| step, median ms | $(median <"$T/steps.without") | $(median <"$T/steps.with") |"
awk -v a="$((api1 - api0 - 1))" 'BEGIN { printf "| broker API calls per step, all nodes (with: the step-end DELETE from node 0) | | %.1f |\n", a / 10 }'
awk -v g="$gets" 'BEGIN { printf "| FM GETs per step (Slurm'"'"'s switch/hpe_slingshot: 1) | | %.1f |\n", g / 10 }'
awk -v p="$patches" 'BEGIN { printf "| FM PATCHes per step (step trees released; Slurm: 1) | | %.1f |\n", p / 10 }'
echo
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"

#!/bin/bash
# bench/flux-launch.sh [BUILD_DIR]: what the Flux integration adds to a
# launch.  The multi-user system instance of the tests
# (tests/integration/flux.sh: flux-core 0.88.0, owner flux, the IMP,
# munge, ranks n1 and n2 on this host) runs a user's `flux run -N2 true`
# with fmbroker (the jobtap plugin's RUN and CLEANUP; the shell plugin
# handing each node's resident service the job's setup, which reaches
# the broker over TLS with the node's own token; the per-rank epilog)
# and without it,
# alternately, and prints the medians, p90 and the slowest side by side.
# "Without" is the same instance with fmbroker's jobtap plugin unloaded
# and its epilog.d/housekeeping.d scripts switched off: the IMP's per-rank
# prolog and epilog still run (empty), as on a Flux site that runs them;
# the shell plugin and the node services stay (they do nothing for a job
# the jobtap plugin did not see).  Needs root.  Bounded: BENCH_LAUNCHES (100) of each kind.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin FMB_SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$FMB_SRC/tests/integration/lib.sh"
N=${BENCH_LAUNCHES:-100}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
. "$FMB_SRC/tests/integration/flux.sh"
fm_state_file=
tls_and_node_tokens >/dev/null && start_mockfm || exit 1
rm_users=root,flux
start_broker_for_nodes n1 n2 || exit 1
printf "[api]\nsocket = %s\n" "$T/api.sock" >"$T/rm.conf"
chmod 644 "$T/rm.conf"
mkdir -p "$T/home" && chown nobody "$T/home"
flux_node_scripts "$T/node.conf"
flux_node_services "$T/node.conf" || exit 1
flux_config fail_closed
flux_start || { echo "flux did not start" >&2; exit 1; }
mode () {
    # the epilog and housekeeping scripts are switched off by a file they
    # look for, not moved away: a script moved while the IMP's loop runs
    # it fails, and the stand-in for flux-run-housekeeping drains its node
    if [ "$1" = with ]; then
        rm -f "$T/fmbroker.off"
        flux_as_owner flux jobtap list | grep -q '^fmbroker' ||
            flux_as_owner flux jobtap load fmbroker.so config="$T/rm.conf" state-dir="$T/rec-%n"
    else
        touch "$T/fmbroker.off"
        flux_as_owner flux jobtap remove fmbroker.so 2>/dev/null
    fi
}
launch () { # prints the ms of one `flux run -N2 true` as nobody
    t0=$(date +%s%N)
    flux_as_user flux run -N2 true >/dev/null 2>&1 || echo "launch failed ($1)" >&2
    echo $((($(date +%s%N) - t0) / 1000000))
}
# the host's steal time over the run (/proc/stat's 8th field), in %
steal_mark () { awk '/^cpu / {s = 0; for (i = 2; i <= 11; i++) s += $i; print $9, s}' /proc/stat; }
steal_pct () { steal_mark | { read -r s1 t1; read -r s0 t0 <"$T/steal0"; awk -v a=$((s1 - s0)) -v b=$((t1 - t0)) 'BEGIN {printf "%.1f", b ? 100 * a / b : 0}'; }; }
for kind in with without; do mode $kind && launch $kind >/dev/null; done # warm
steal_mark >"$T/steal0"
: >"$T/with" && : >"$T/without"
for i in $(seq "$N"); do
    for kind in with without; do mode $kind && launch $kind >>"$T/$kind"; done
done
mode with
stats () { sort -n "$1" | awk '{a[NR]=$1} END {printf "%6d %6d %6d", a[int((NR+1)/2)], a[int(NR*0.9+0.5)], a[NR]}'; }
echo "## flux run -N2 true as a user, $N each, alternated ($(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg); steal $(steal_pct)%)"
printf '%-34s %6s %6s %6s (ms)\n' "" median p90 max
printf '%-34s %s\n' "without fmbroker" "$(stats "$T/without")"
printf '%-34s %s\n' "with fmbroker" "$(stats "$T/with")"
median () { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
awk -v w="$(median "$T/without")" -v r="$(median "$T/with")" 'BEGIN {printf "median ratio %.2f\n", r / w}'

# bench/benchlib.sh: what the benchmarks that run their own broker and
# mock FM share, sourced first with the script's arguments: the build
# directory ($1, default ../build), the test library
# (tests/integration/lib.sh: $T, start_mockfm, start_broker, its own
# cleanup at exit) and the host's CPU steal between two moments.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin
export FMB_SRC=${FMB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/../tests/integration/lib.sh"
# "TOTAL STEAL" in ticks from /proc/stat, for steal_between
cpu_line () { awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
steal_between () { # "TOTAL STEAL" "TOTAL STEAL": the % of the CPU other guests took
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
        d = y[1] - x[1]; printf "%.1f", (d > 0 ? 100 * (y[2] - x[2]) / d : 0) }'
}
# bench_title TEXT [MORE]: the report's first lines (what, when, the
# machine and its load); MORE is added to the machine's line
bench_title () {
    echo "# $1, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start${2:+; $2}"
}

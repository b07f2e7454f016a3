#!/usr/bin/env python3
"""cpu-in-launch.py WINDOWS SETUP...: the host's CPU within srun's time,
per command, per setup (bench/slurm-launch.sh, BENCH_PERF=1).

WINDOWS has one line per launch, "SETUP START END" (bash's
$EPOCHREALTIME around srun; "warmup" lines are left out).  Standard
input is `perf script -F comm,time` of a `perf record -e cpu-clock -a
-F 999 -k realtime` taken meanwhile, so that sample times and the
windows are one clock.  Prints a Markdown table: for each command, the
CPU ms per launch its samples inside the setup's windows make (999 Hz:
a sample is about 1 ms of one CPU), the commands that differ most
between the setups first (for one setup, the busiest first), down to
0.1 ms; the idle task (swapper) is left out of the total."""
import bisect
import collections
import sys

HZ = 999.0


def main():
    setups = sys.argv[2:]
    windows = []
    for line in open(sys.argv[1]):
        setup, start, end = line.split()
        if setup != "warmup":
            windows.append((float(start), float(end), setup))
    windows.sort()
    starts = [w[0] for w in windows]
    launches = collections.Counter(w[2] for w in windows)
    samples = collections.defaultdict(collections.Counter)
    for line in sys.stdin:
        head, _, _ = line.rpartition(":")
        comm, _, stamp = head.rpartition(" ")
        try:
            t = float(stamp)
        except ValueError:
            continue
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= windows[i][1]:
            samples[windows[i][2]][comm.strip()] += 1

    def ms(setup, comm):
        n = launches[setup]
        return 1000.0 * samples[setup][comm] / HZ / n if n else 0.0

    comms = set()
    for setup in setups:
        comms |= set(samples[setup])
    spread = {c: max(ms(s, c) for s in setups) - min(ms(s, c) for s in setups) for c in comms}
    if len(setups) == 1:  # the busiest first
        spread = {c: ms(setups[0], c) for c in comms}
    rows = sorted((c for c in comms if c != "swapper"), key=lambda c: -spread[c])
    print("| command | " + " | ".join(setups) + " |")
    print("|---" * (len(setups) + 1) + "|")
    for c in rows:
        if spread[c] < 0.1:
            break
        print("| %s | %s |" % (c, " | ".join("%.2f" % ms(s, c) for s in setups)))
    busy = ["%.2f" % sum(ms(s, c) for c in samples[s] if c != "swapper") for s in setups]
    print("| all but idle | %s |" % " | ".join(busy))
    print("| launches | %s |" % " | ".join(str(launches[s]) for s in setups))


if __name__ == "__main__":
    main()

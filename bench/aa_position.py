"""Where does an A/A offset come from: the arms' order, or the arm itself?

Usage: python3 bench/aa_position.py [RESULTS] [DRIVER] [JOB]
(defaults: docs/bench/results.json overlay2 fsync)

Reads the benchmark's default runs from the results file and, for every
round of JOB, takes each target's headline value (fsync p99, random-write
IOPS, sequential bandwidth) as a log residual from the round's mean over
its four targets: what the round's moment of the shared disk did is then
removed, and what is left is the target's own level plus where it ran in
the round. It prints the mean residual (100 * log, about percent; plus or
minus one standard error) of every target at each of the four positions,
bind's minus host's at each position (what the benchmark report quotes
for an A/A miss), and host's and bind's by the target that ran just
before them.

If the A/A control's offset came from the order, host and bind would
differ at some positions and not at others and cancel over a balanced
design; if it belongs to the arm (the host arm runs fio natively, every
other arm runs it through `docker exec` in the probe container), host
sits apart from bind at every position. For a throughput job a positive
residual is slower (the sign of an overhead) for every job.

Runs where bind measured host's file (recorded before bind had files of
its own; no "bind_own_files" in the run) and runs where it had its own are
reported apart: on a shared file, running second is also the file's second
execution in the round, with files of their own it is the position alone.
"""
import collections
import json
import math
import statistics as st
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "docs/bench/results.json"
driver = sys.argv[2] if len(sys.argv) > 2 else "overlay2"
job = sys.argv[3] if len(sys.argv) > 3 else "fsync"
# An execution's "v" holds write IOPS, bandwidth, p50, p99, fsync p99
# (measure.Metrics' order).
index = {"seqwrite": 1, "randwrite": 0, "fsync": 4}[job]
sign = 1 if job == "fsync" else -1  # throughput: a higher value is faster

with open(path) as f:
    results = json.load(f)
runs = [d for d in results["drivers"] if d["driver"] == driver]
if not runs or not runs[0].get("defaults"):
    sys.exit(f"{path}: no default runs on {driver}")


def split(defaults):
    """Residuals of JOB by (target, position) and by (target, the target before)."""
    by_position = collections.defaultdict(list)
    by_before = collections.defaultdict(list)
    for run in defaults:
        rounds = collections.defaultdict(list)
        for e in run["executions"]:
            if e["j"] == job:
                rounds[e["r"]].append(e)
        for execs in rounds.values():
            ok = [e for e in execs if not e.get("err") and e.get("v") and e["v"][index]]
            if len(ok) != 4:
                continue  # a failed arm: the round's mean would not be comparable
            mean = st.mean(math.log(e["v"][index]) for e in ok)
            order = {e["o"]: e["t"] for e in ok}
            for e in ok:
                r = sign * 100 * (math.log(e["v"][index]) - mean)
                by_position[(e["t"], e["o"])].append(r)
                by_before[(e["t"], order.get(e["o"] - 1, "(first)"))].append(r)
    return by_position, by_before


def cell(xs):
    if len(xs) < 2:
        return f"{'n/a':>15}"
    return f"{st.mean(xs):+6.2f} ± {st.stdev(xs) / math.sqrt(len(xs)):4.2f}"


targets = ["host", "bind", "volume", "container"]


def diff(a, b):
    if len(a) < 2 or len(b) < 2:
        return f"{'n/a':>15}"
    se = math.hypot(st.stdev(a) / math.sqrt(len(a)), st.stdev(b) / math.sqrt(len(b)))
    return f"{st.mean(a) - st.mean(b):+6.2f} ± {se:4.2f}"


def report(label, by_position, by_before):
    print(f"{driver} {job}, {label}: mean log residual from the round's mean (x100), ± one standard error")
    print(f"{'position':<10}" + "".join(f"{t:>17}" for t in targets))
    for pos in range(1, 5):
        print(f"{pos:<10}" + "".join(f"{cell(by_position[(t, pos)]):>17}" for t in targets))
    print(f"{'all':<10}" + "".join(
        f"{cell([x for p in range(1, 5) for x in by_position[(t, p)]]):>17}" for t in targets))
    print(f"{'bind-host':<10}" + "".join(
        f"{diff(by_position[('bind', p)], by_position[('host', p)]):>17}" for p in range(1, 5)) + "   (positions 1-4)")
    print()
    print("host and bind by the target run just before them")
    for t in ("host", "bind"):
        for before in ["(first)"] + targets:
            if (t, before) in by_before:
                print(f"  {t:<5} after {before:<10} {cell(by_before[(t, before)])}  n={len(by_before[(t, before)])}")


kinds = [
    ("bind on host's file", [r for r in runs[0]["defaults"] if not r.get("bind_own_files")]),
    ("bind on files of its own", [r for r in runs[0]["defaults"] if r.get("bind_own_files")]),
]
first = True
for label, defaults in kinds:
    if not defaults:
        continue
    if not first:
        print()
    first = False
    report(f"{label}, {len(defaults)} runs", *split(defaults))

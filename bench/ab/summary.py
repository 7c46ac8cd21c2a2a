#!/usr/bin/env python3
"""Summary of bench/ab/binaries.sh's runs: per binary the median half-width
of one target's overhead, its rounds, the share of bytes spent laying out
files, the runs' spread against what their intervals promise, and the
paired difference of the estimates (new - old), with its standard error.
Usage: bench/ab/summary.py OUT [target] [workload] [metric] [--prior ARM=R:RUNS ...]
--prior pools an earlier sitting's R of the same arm (from its committed
summary) with this one's: each sitting's runs are measured against their own
mean and their own median half-width, so a shift between days does not count
as spread, and R's interval is chi-square with the degrees of freedom of both."""
import glob
import json
import re
import statistics as st
import sys


def chi2(k, q):
    """The q quantile of chi-square with k degrees of freedom (Wilson-Hilferty:
    within 0.5% of the exact one from 9 degrees of freedom up)."""
    z = st.NormalDist().inv_cdf(q)
    return k * (1 - 2 / (9 * k) + z * (2 / (9 * k)) ** 0.5) ** 3


args, priors = [], {}
for a in sys.argv[1:]:
    if not a.startswith("--prior="):
        args.append(a)
        continue
    arm, rn = a[len("--prior="):].split("=")
    r0, n0 = rn.split(":")
    priors.setdefault(arm, []).append((float(r0), int(n0)))


def interval(r, k):
    """R's 95% interval from k degrees of freedom: an SD's, chi-square."""
    return (r * (k / chi2(k, q)) ** 0.5 for q in (0.975, 0.025))


out = args[0]
target, workload, metric = (args[1:] + ["container", "randwrite", "iops"][len(args) - 1:])[:3]
runs = {}
for f in glob.glob(f"{out}/[0-9]*-*.json"):
    i, v = re.search(r"/(\d+)-(\w+)\.json$", f).groups()
    try:
        e = json.load(open(f))["engines"][0]
    except json.JSONDecodeError:
        print(f"{f}: not a finished run's JSON, left out", file=sys.stderr)
        continue
    o = [r for r in e["results"] if r["target"] == target and r["workload"] == workload][0]["overhead"][metric]
    runs[int(i)] = dict(v=v, est=o["percent_of_host"], hw=(o["percent_of_host_high"] - o["percent_of_host_low"]) / 2,
                        rounds=o["rounds"], gib=e["bytes_written"] / 2**30, layout=e["layout_bytes"] / e["bytes_written"])
print(f"{target} {workload} {metric}, percent of host; {len(runs)} runs")
for v in ("old", "new"):
    rs = [r for r in runs.values() if r["v"] == v]
    hw = st.median(r["hw"] for r in rs)
    sd = st.stdev(r["est"] for r in rs)
    print(f"{v}: half-width median ±{hw:.1f} pp [{min(r['hw'] for r in rs):.1f}, {max(r['hw'] for r in rs):.1f}], "
          f"rounds {st.median(r['rounds'] for r in rs):.0f}, {st.median(r['gib'] for r in rs):.2f} GiB, "
          f"layout {100 * st.median(r['layout'] for r in rs):.0f}% of the bytes; estimate median {st.median(r['est'] for r in rs):.1f}%, "
          f"spread sd {sd:.1f} pp = {sd / (hw / 1.96):.2f} x the promise")
    # R, the run-level calibration (1.96 x SD of the run estimates / median
    # half-width), with the 95% interval of an SD from len(rs) runs
    # (chi-square with len(rs)-1 degrees of freedom, Wilson-Hilferty).
    k = len(rs) - 1
    r = 1.96 * sd / hw
    lo, hi = interval(r, k)
    print(f"{v}: R = {r:.2f} [{lo:.2f}, {hi:.2f}] over {len(rs)} runs")
    if v in priors:
        ss, kk = k * r * r, k
        for r0, n0 in priors[v]:
            ss, kk = ss + (n0 - 1) * r0 * r0, kk + n0 - 1
        rp = (ss / kk) ** 0.5
        lo, hi = interval(rp, kk)
        print(f"{v}: pooled with {' '.join(f'R {r0:.2f} over {n0}' for r0, n0 in priors[v])}: "
              f"R = {rp:.2f} [{lo:.2f}, {hi:.2f}], {kk} degrees of freedom")
diffs = []
for p in range(len(runs) // 2):
    a, b = runs[2 * p + 1], runs[2 * p + 2]
    new, old = (a, b) if a["v"] == "new" else (b, a)
    diffs.append(new["est"] - old["est"])
if len(diffs) > 1:
    se = st.stdev(diffs) / len(diffs) ** 0.5
    print(f"paired new - old over {len(diffs)} pairs: {st.mean(diffs):+.2f} pp, standard error {se:.2f} "
          f"(95% [{st.mean(diffs) - 1.96 * se:+.2f}, {st.mean(diffs) + 1.96 * se:+.2f}])")

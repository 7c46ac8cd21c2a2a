"""Does a file's placement change the speed of 1 MiB direct sequential writes?

Usage: python3 bench/placement.py DIR [REPS]

Lays out ten 8 MiB files in ten fresh directories under DIR and ten in one
shared directory (1 MiB buffered writes, then fsync: layerprobe's layout),
then overwrites every file REPS times (default 16) in a random order with
layerprobe's seqwrite job (8 MiB of 1 MiB direct writes at queue depth 1)
and prints, for each group, the spread of the files' mean log write latency
against one execution's own noise. A between-file spread well above zero
means that where a file's blocks lie matters, and that a measurement on one
file per target carries a fixed placement error (docs/methodology.md,
"Sequential and random writes get a file per round"). Needs fio; removes DIR first and
after.
"""
import json
import math
import os
import random
import shutil
import statistics as st
import subprocess
import sys

base = sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/lp-placement"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 16
shutil.rmtree(base, ignore_errors=True)
files = {}
for i in range(10):
    d = f"{base}/d{i}"
    os.makedirs(d)
    files[f"dirs{i}"] = f"{d}/seqwrite.dat"
os.makedirs(f"{base}/same")
for i in range(10):
    files[f"same{i}"] = f"{base}/same/seqwrite.{i}.dat"


def fio(path, layout=False):
    """Runs one execution on path; returns its mean write latency in ns."""
    argv = ["fio", "--output-format=json", "--name=seqwrite", "--filename=" + path, "--rw=write", "--bs=1M", "--size=8M"]
    if layout:
        argv += ["--ioengine=psync", "--end_fsync=1"]
    else:
        argv += ["--ioengine=libaio", "--direct=1", "--iodepth=1"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["write"]["lat_ns"]["mean"]


try:
    for p in files.values():
        fio(p, layout=True)
    lat = {k: [] for k in files}
    for _ in range(reps):
        keys = list(files)
        random.shuffle(keys)
        for k in keys:
            lat[k].append(math.log(fio(files[k])))
    for group, what in (("dirs", "a directory each"), ("same", "one directory")):
        keys = [k for k in files if k.startswith(group)]
        means = [st.mean(lat[k]) for k in keys]
        within = st.mean([st.variance(lat[k]) for k in keys])
        between = max(st.variance(means) - within / reps, 0)
        print(f"{what}: between files sd {math.sqrt(between) * 100:.1f}%, one execution's sd {math.sqrt(within) * 100:.1f}% "
              f"({len(keys)} files x {reps} executions)")
finally:
    shutil.rmtree(base, ignore_errors=True)

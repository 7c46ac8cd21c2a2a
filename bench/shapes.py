#!/usr/bin/env python3
"""Noise per byte of fio execution shapes, container writable layer against host.

The figures behind the sequential job's size in docs/methodology.md
("Larger sequential executions"), and (rw against rwl, run together)
whether a random-write execution's length moves the container's figure
("Sequential and random writes get a file per round"). For every shape, each round runs the
shape four times in ABBA order (host and container, random which first)
and records the log ratio container/host of the bandwidth (the mean of
the two executions of each arm). The report is the robust sigma
(1.4826 x MAD) of the rounds' log ratios and that sigma times the square
root of the MiB a round wrote: lower is more precise per byte.

Usage (root, a running dockerd, fio on the host):

    IMAGE=<image with fio on PATH> python3 bench/shapes.py 30 fit8 fit24 now

OUT=<file> also writes every round's log ratio and MiB as JSON. IMAGE must
have fio on its PATH; the container idles in fio's null
engine. Host files go to /var/lib/layerprobe-shapes (removed at the end), which
must be on the data root's file system; the container's to its /tmp (the
writable layer).
"""
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys

HOSTDIR = "/var/lib/layerprobe-shapes"
CT = "layerprobe-shapes"
MIB = 1 << 20

# name: (file MiB, MiB per execution, fresh file each time, runtime ms)
SHAPES = {
    "fit8": (8, 8, False, 250),
    "fit12": (12, 12, False, 250),
    "fit24": (24, 24, False, 250),
    "fit48": (48, 48, False, 500),
    "now": (16, 24, False, 250),  # quick's sequential job before 8 MiB
    "fresh32": (32, 32, True, 0),  # the schema-1 default: a new 32 MiB file
    "rw": (16, 16, False, 250),  # quick's random-write job
    "rw8": (16, 8, False, 250),
    "rw8n": (16, 8, False, 250),  # no ramp
    "rwl": (16, 16384, False, 5000),  # the long profile's random-write job: 5 s after a 1 s ramp
}


def argv(shape, d):
    fmib, cap, fresh, rt = SHAPES[shape]
    a = ["fio", "--output-format=json", "--eta=never", "--directory=" + d, "--kb_base=1024", "--thread",
         "--name=" + shape, "--size=%d" % (fmib * MIB), "--ioengine=libaio", "--direct=1", "--iodepth=1"]
    if shape.startswith("rw"):
        a += ["--rw=randwrite", "--bs=4k", "--numjobs=4", "--group_reporting=1"]
        if shape == "rwl":
            a += ["--ramp_time=1s"]
        elif not shape.endswith("n"):
            a += ["--ramp_time=20ms"]
        cap //= 4
    else:
        a += ["--rw=write", "--bs=1M"]
    if fresh:
        a += ["--unlink=1", "--filename=fresh-" + shape]
    else:
        a += ["--unlink=0", "--filename=" + shape, "--io_size=%d" % (cap * MIB)]
    if rt:
        a += ["--runtime=%dms" % rt]
    return a


def layout(shape, d):
    return ["fio", "--output-format=json", "--eta=never", "--directory=" + d, "--name=layout",
            "--filename=" + shape, "--rw=write", "--bs=1M", "--ioengine=psync",
            "--size=%d" % (SHAPES[shape][0] * MIB), "--end_fsync=1", "--unlink=0"]


def fio(cmd, arm):
    if arm == "c":
        cmd = ["docker", "exec", CT] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    w = json.loads(out[out.index("{"):])["jobs"][0]["write"]
    return w["bw_bytes"], w["io_bytes"]


def main():
    rounds, shapes = int(sys.argv[1]), sys.argv[2:]
    image = os.environ["IMAGE"]
    os.makedirs(HOSTDIR, exist_ok=True)
    subprocess.run(["docker", "rm", "-f", CT], capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", CT, "--network", "none", "--entrypoint", "fio", image,
                    "--name=idle", "--ioengine=null", "--rw=read", "--size=1M", "--time_based", "--runtime=1d",
                    "--rate_iops=1"], check=True, capture_output=True)
    try:
        for s in shapes:
            if not SHAPES[s][2]:
                fio(layout(s, HOSTDIR), "h")
                fio(layout(s, "/tmp"), "c")
        res = {s: [] for s in shapes}
        for r in range(rounds):
            random.shuffle(shapes)
            for s in shapes:
                arms = ["h", "c"] if random.random() < 0.5 else ["c", "h"]
                bw, mib = {"h": [], "c": []}, 0.0
                for arm in arms + arms[::-1]:
                    b, n = fio(argv(s, HOSTDIR if arm == "h" else "/tmp"), arm)
                    bw[arm].append(math.log(b))
                    mib += n / MIB
                res[s].append((statistics.mean(bw["c"]) - statistics.mean(bw["h"]), mib))
            print("round", r + 1, "of", rounds, file=sys.stderr, flush=True)
    finally:
        subprocess.run(["docker", "rm", "-f", CT], capture_output=True)
        shutil.rmtree(HOSTDIR, ignore_errors=True)
    if os.environ.get("OUT"):
        # Every round's (log ratio, MiB), for comparisons between shapes
        # round by round.
        with open(os.environ["OUT"], "w") as f:
            json.dump(res, f)
    print("shape     rounds  median  sigma  MiB/round  sigma*sqrt(MiB)")
    for s in sorted(res):
        lr = [x[0] for x in res[s]]
        med = statistics.median(lr)
        sigma = 1.4826 * statistics.median([abs(x - med) for x in lr])
        mib = statistics.mean([x[1] for x in res[s]])
        print("%-8s  %6d  %+5.1f%%  %.3f  %9.1f  %.2f" % (
            s, len(lr), 100 * (math.exp(med) - 1), sigma, mib, sigma * math.sqrt(mib)))


if __name__ == "__main__":
    main()

"""Does the way an arm starts fio cost fsync latency, apart from the files?

Usage: python3 bench/arms.py DIR SECONDS [LAYERPROBE_BIN] [ARMS]
(as root, with dockerd running; LAYERPROBE_BIN defaults to bin/layerprobe,
ARMS, comma-separated, to H0,HB,HA,E)

The host arm runs fio natively in the probe container's CPU cgroups; every
other arm runs it through `docker exec` inside the container, in its mount
namespace, its seccomp profile and every cgroup of it. This script runs
the default profile's fsync job (500 ms after a 50 ms ramp, 4 KiB random
read/write with an fsync after every write) in four arms, each round in a
fresh random order, until SECONDS have passed:

  H0  fio natively in the container's CPU cgroups (cpu, cpuacct, cpuset):
      layerprobe's host arm
  HB  H0 plus the container's block-I/O cgroup (cgroup v1)
  HA  fio natively in every cgroup v1 hierarchy of the container: no
      namespace, no seccomp, no `docker exec`
  E   `docker exec` fio inside the container, on a bind mount of DIR
  N   fio natively in H0's cgroups but inside the container's mount
      namespace (nsenter --mount), on the same bind mount: E without the
      seccomp filter, no-new-privileges and `docker exec`
  EU  `docker exec` fio in a second container like the first but with
      seccomp unconfined and without no-new-privileges, on its own bind
      mount of DIR: E without the seccomp filter

E against EU is the seccomp filter's cost, N against H0 the mount
namespace's and the bind mount's.

One preconditioned 8 MiB file per arm in DIR/rot serves all arms: every round a
fresh random permutation gives each arm one of them, so that where a file
lies cannot pass for an arm's effect (with one file per arm it did, by 2-3
points either way). It prints, for mean fsync latency and fsync p99, each
arm against H0 (median of the per-round ratios with its distribution-free
95% interval) and each file's effect (a fit of round + arm + file on log
latency, 95% bootstrap interval over rounds). cgroup v1 only. It builds a
local image `layerprobe-arms:local` (fio and its libraries copied from the
host, layerprobe as the idle entrypoint: nothing is pulled), runs it with
--network none, and removes the container and DIR's files after.
"""
import json
import math
import os
import random
import shutil
import statistics as st
import subprocess
import sys
import tempfile
import time
from math import comb

root, budget = os.path.abspath(sys.argv[1]), float(sys.argv[2])
lp_bin = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else "bin/layerprobe")
IMAGE, NAME = "layerprobe-arms:local", "layerprobe-arms"
ARMS = sys.argv[4].split(",") if len(sys.argv) > 4 else ["H0", "HB", "HA", "E"]
if ARMS[0] != "H0" or not set(ARMS) <= {"H0", "HB", "HA", "E", "N", "EU"}:
    sys.exit("ARMS: H0 first, then any of HB, HA, E, N, EU")
FIO = ["--output-format=json+", "--eta=never", "--kb_base=1024", "--thread"]


def job(d, f):
    return FIO + ["--directory=" + d, "--name=fsync", "--filename=" + f, "--unlink=0", "--size=8388608",
                  "--io_size=33554432", "--runtime=500ms", "--ramp_time=50ms", "--rw=randrw", "--rwmixread=50",
                  "--bs=4k", "--ioengine=psync", "--fsync=1"]


def layout(d, f):
    return FIO + ["--directory=" + d, "--name=layout", "--filename=" + f, "--rw=write", "--bs=1M",
                  "--ioengine=psync", "--size=8388608", "--end_fsync=1", "--unlink=0"]


def build_image():
    """fio with the libraries ldd names, at their paths, and layerprobe."""
    fio = shutil.which("fio")
    tmp = tempfile.mkdtemp()
    try:
        os.makedirs(tmp + "/lp/bin")
        shutil.copy(fio, tmp + "/lp/bin/fio")
        shutil.copy(lp_bin, tmp + "/lp/bin/layerprobe")
        for line in subprocess.run(["ldd", fio], capture_output=True, text=True, check=True).stdout.splitlines():
            path = next((w for w in line.split() if w.startswith("/")), None)
            if path:
                os.makedirs(tmp + os.path.dirname(path), exist_ok=True)
                shutil.copy(path, tmp + path)
        tar = subprocess.Popen(["tar", "-C", tmp, "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "--change", 'ENTRYPOINT ["/lp/bin/layerprobe", "probe-helper", "idle"]',
                        "-", IMAGE], stdin=tar.stdout, check=True, capture_output=True)
        tar.wait()
    finally:
        shutil.rmtree(tmp)


def cgroups(pid):
    member = {}
    for line in open("/proc/%d/cgroup" % pid):
        _, ctrls, path = line.strip().split(":", 2)
        if ctrls:
            member[ctrls] = path

    def dirs(want):
        out = []
        for c, p in member.items():
            if want == "all" or any(x in c.split(",") for x in want):
                d = "/sys/fs/cgroup/" + c.replace("name=", "") + p
                if os.path.isdir(d):
                    out.append(d)
        return out
    cpu = ["cpu", "cpuacct", "cpuset"]
    return {"H0": dirs(cpu), "HB": dirs(cpu + ["blkio"]), "HA": dirs("all")}


def median_ci(v):
    """Median and the order-statistic 95% interval of it (sign test)."""
    v, n, k = sorted(v), len(v), 0
    for j in range(n // 2):
        if sum(comb(n, i) for i in range(j + 1)) / 2 ** n < 0.025:
            k = j + 1
    return st.median(v), v[max(k - 1, 0)], v[min(n - k, n - 1)]


def fit(rs, m, files):
    """log y = round + arm + file, by alternating means; arms against H0."""
    a, f = {x: 0.0 for x in ARMS}, {x: 0.0 for x in files}
    for _ in range(30):
        ra, rf = {x: [] for x in ARMS}, {x: [] for x in files}
        for r in rs:
            mu = st.mean(math.log(r[x][m]) - a[x] - f[r["files"][x]] for x in ARMS)
            for x in ARMS:
                ra[x].append(math.log(r[x][m]) - mu - f[r["files"][x]])
                rf[r["files"][x]].append(math.log(r[x][m]) - mu - a[x])
        a = {x: st.mean(ra[x]) - st.mean(ra["H0"]) for x in ARMS}
        fm = st.mean(st.mean(rf[x]) for x in files)
        f = {x: st.mean(rf[x]) - fm for x in files}
    return a, f


def pct(x):
    return "%+.1f%%" % (100 * math.expm1(x))


def main():
    build_image()
    subprocess.run(["docker", "rm", "-f", NAME, NAME + "-u"], capture_output=True)
    rot = root + "/rot"
    os.makedirs(rot, exist_ok=True)
    cid = subprocess.run(["docker", "run", "-d", "--name", NAME, "--network", "none", "--security-opt",
                          "no-new-privileges", "-v", rot + ":/x", IMAGE], check=True, capture_output=True,
                         text=True).stdout.strip()
    ucid = None
    try:
        if "EU" in ARMS:
            ucid = subprocess.run(["docker", "run", "-d", "--name", NAME + "-u", "--network", "none", "--security-opt",
                                   "seccomp=unconfined", "-v", rot + ":/x", IMAGE], check=True, capture_output=True,
                                  text=True).stdout.strip()
        pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], check=True,
                                 capture_output=True, text=True).stdout)
        groups = cgroups(pid)

        def native(arm, argv, prog=("fio",)):
            def join():
                for d in groups[arm]:
                    with open(d + "/cgroup.procs", "w") as fh:
                        fh.write(str(os.getpid()))
            return subprocess.run(list(prog) + argv, preexec_fn=join, capture_output=True, text=True,
                                  check=True).stdout

        files = ["f%d" % i for i in range(len(ARMS))]
        for f in files:
            native("H0", layout(rot, f))
        recs, t0 = [], time.time()
        while time.time() - t0 < budget:
            order, perm = ARMS[:], files[:]
            random.shuffle(order)
            random.shuffle(perm)
            rec = {"files": dict(zip(ARMS, perm))}
            for a in order:
                f = rec["files"][a]
                if a in ("E", "EU"):
                    out = subprocess.run(["docker", "exec", cid if a == "E" else ucid, "/lp/bin/fio"] + job("/x", f),
                                         capture_output=True, text=True, check=True).stdout
                elif a == "N":
                    out = native("H0", job("/x", f), ("nsenter", "--target", str(pid), "--mount", "/lp/bin/fio"))
                else:
                    out = native(a, job(rot, f))
                j = json.loads(out[out.index("{"):])["jobs"][0]
                rec[a] = {"mean": j["sync"]["lat_ns"]["mean"], "p99": j["sync"]["lat_ns"]["percentile"]["99.000000"]}
            recs.append(rec)
    finally:
        subprocess.run(["docker", "rm", "-f", NAME, NAME + "-u"], capture_output=True)
        shutil.rmtree(rot, ignore_errors=True)
    rng = random.Random(1)
    for m, what in (("mean", "mean fsync latency"), ("p99", "fsync p99")):
        print("%s, %d rounds; host arm H0 median %.0f us" % (what, len(recs), st.median(r["H0"][m] for r in recs) / 1e3))
        for a in ARMS[1:]:
            md, lo, hi = median_ci([math.log(r[a][m] / r["H0"][m]) for r in recs])
            print("  %s / H0: %s [%s, %s]" % (a, pct(md), pct(lo), pct(hi)))
        _, f = fit(recs, m, files)
        boot = [fit([rng.choice(recs) for _ in recs], m, files)[1] for _ in range(200)]
        for x in files:
            b = sorted(bf[x] for bf in boot)
            print("  file %s: %s [%s, %s]" % (x, pct(f[x]), pct(b[4]), pct(b[195])))


main()

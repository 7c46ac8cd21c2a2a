#!/usr/bin/env python3
"""The agent's window, live: a new agent with the built-in cycle defaults,
its steady cycles triggered back to back, and after each the published
container intervals (GET /api/v1/overhead).

What differs from a default agent, and why: the daily byte budget is off
and the busy-host guards are off (the cycles come minutes apart instead of
6 hours, so the rolling day's budget and a disk still busy from the last
cycle would skip them), and the cold probe is off (its cycles feed no
steady window). Every cycle setting (agent.budget, agent.first_fill,
agent.window_rounds, the profile and the targets) is the default.

  run.py --bin layerprobe --docker-host unix:///run/x.sock --out DIR --cycles 12

writes DIR/cycles.tsv (one row per cycle: bytes, seconds, stop reason and,
per workload, the window's rounds and the container's half-width in
points), DIR/agent.log and DIR/config.yaml; the table is printed as it
grows. A cycle's index times agent.interval (6 h) is the agent's age.
"""
import argparse
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

HEADLINE = {"fsync": "fsync_p99", "randwrite": "iops", "seqwrite": "bandwidth", "smallfiles": "iops"}
WORKLOADS = ["fsync", "randwrite", "seqwrite", "smallfiles"]


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.load(r)


def post(base, path, token):
    """POST, again while the agent answers 409: it is still busy with the
    last cycle's aftermath (the advisor's pass, pruning)."""
    req = urllib.request.Request(base + path, method="POST", headers={"Authorization": "Bearer " + token})
    end = time.time() + 600
    while True:
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code != 409 or time.time() > end:
                raise
            time.sleep(3)


def wait_cycle(base, cid, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            c = get(base, "/api/v1/cycles/%d" % cid)
            if c.get("result") not in (None, "", "running"):
                return c
        except Exception:
            pass
        time.sleep(2)
    raise SystemExit("cycle %d did not end within %d s" % (cid, timeout))


def latest_id(base):
    cs = get(base, "/api/v1/cycles?limit=1")
    items = cs.get("cycles", cs) if isinstance(cs, dict) else cs
    return items[0]["id"] if items else 0


def container_widths(base):
    ov = get(base, "/api/v1/overhead")
    out = {}
    for e in ov["engines"]:
        if e["mode"] != "steady":
            continue
        for r in e["results"]:
            if r["target"] != "container" or r["workload"] not in HEADLINE:
                continue
            o = (r.get("overhead") or {}).get(HEADLINE[r["workload"]])
            if not o or o.get("ci_low") is None:
                out[r["workload"]] = (o.get("rounds", 0) if o else 0, float("nan"), float("nan"))
                continue
            out[r["workload"]] = (o["rounds"], 50 * (o["ci_high"] - o["ci_low"]), 100 * o["ratio"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--docker-host", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cycles", type=int, default=12, help="steady cycles after the first")
    ap.add_argument("--listen", default="127.0.0.1:19812")
    ap.add_argument("--resume", action="store_true", help="go on from DIR's state and cycles.tsv (a sitting cut short)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    state = os.path.join(a.out, "state")
    os.makedirs(state, exist_ok=True)
    token = secrets.token_hex(16)
    if a.resume:
        with open(os.path.join(a.out, "token")) as f:
            token = f.read().strip()
    with open(os.path.join(a.out, "token"), "w") as f:
        f.write(token)
    os.chmod(os.path.join(a.out, "token"), 0o600)
    cfg = f"""engines:
  - name: default
    type: docker
    host: {a.docker_host}
agent:
  listen_address: "{a.listen}"
  state_dir: {state}
  api_token_file: {os.path.join(a.out, "token")}
  jitter: 0
  cold_interval: 0s
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
"""
    with open(os.path.join(a.out, "config.yaml"), "w") as f:
        f.write(cfg)
    base = "http://" + a.listen
    log = open(os.path.join(a.out, "agent.log"), "a" if a.resume else "w")
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    ag = subprocess.Popen([a.bin, "agent", "--config", os.path.join(a.out, "config.yaml")], stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        for _ in range(120):
            try:
                if latest_id(base) > 0:
                    break
            except Exception:
                pass
            time.sleep(1)
        head = ["cycle", "age_h", "bytes_mib", "seconds", "rounds", "stop"]
        for w in WORKLOADS:
            head += [w + "_window", w + "_hw_pp", w + "_est_pct"]
        done = 0
        if a.resume:
            with open(os.path.join(a.out, "cycles.tsv")) as f:
                done = sum(1 for l in f.read().splitlines()[1:] if not l.startswith("confirm"))
            tsv = open(os.path.join(a.out, "cycles.tsv"), "a")
        else:
            tsv = open(os.path.join(a.out, "cycles.tsv"), "w")
            tsv.write("\t".join(head) + "\n")
        print("\t".join(head), flush=True)
        # The first cycle is the schedule's; so is one a resumed agent
        # starts by itself (a cycle begun since this agent started).
        recorded = -1 if not a.resume else latest_id(base)
        if a.resume:
            time.sleep(15)
        i = done
        while i <= a.cycles:
            lid = latest_id(base)
            c = get(base, "/api/v1/cycles/%d" % lid) if lid > 0 else {}
            if lid != recorded and c.get("started_at", "") >= started:
                cid = lid
            else:
                cid = post(base, "/api/v1/cycles", token)["cycle_id"]
            recorded = cid
            c = wait_cycle(base, cid, 900)
            ws = container_widths(base)
            # A suspicion's confirmation rounds (trigger confirm) follow
            # the cycle that raised it: a row of their own, no age.
            confirm = c.get("trigger") == "confirm"
            row = ["confirm" if confirm else str(i + 1), "-" if confirm else "%.0f" % (6 * i),
                   "%.0f" % (c.get("bytes_written", 0) / 2**20),
                   "%.1f" % c.get("duration_seconds", 0), str(c.get("rounds", 0)), str(c.get("stop_reason", ""))]
            for w in WORKLOADS:
                n, hw, est = ws.get(w, (0, float("nan"), float("nan")))
                row += [str(n), "%.2f" % hw, "%.2f" % est]
            rows.append(row)
            tsv.write("\t".join(row) + "\n")
            tsv.flush()
            print("\t".join(row), flush=True)
            if not confirm:
                i += 1
            # The confirmation, if any, starts at once after the cycle.
            time.sleep(3)
    finally:
        ag.terminate()
        try:
            ag.wait(60)
        except subprocess.TimeoutExpired:
            ag.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

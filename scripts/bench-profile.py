#!/usr/bin/env python3
"""What the CPU profile costs a launch-bound job: its launch rate with
`gpufeed diagnose --profile on` attached, beside `--profile off` (the /proc
sampler alone) and no observer at all, measured side by side in one run.

A launch loop of tiny kernels runs on the simulated driver (gpufeed simdev,
the simulated CUDA driver library through python/gpufeed_simdev.py) and logs,
every 0.2 s, its launch count, its thread's CPU time and the wall clock.
Rounds of one window per mode follow, the order rotating each round so that
drifting host load falls on every mode alike. For each window the launch rate
(per wall second) and the launches per CPU second of the launch thread (what
a launch costs it, whatever else the host runs) are read from the log,
between the window's first and last half second; gpufeed's own CPU comes
from each report's observer section.

Usage: scripts/bench-profile.py [--rounds N] [--window SECONDS] [--gpufeed BIN]
Run as root (or with CAP_PERFMON) so that --profile on can sample.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
log = open(sys.argv[2], "w", buffering=1)
print("ready", flush=True)
n, next_log = 0, 0.0
while True:
    for _ in range(100):
        dev.launch(5)
    dev.synchronize()
    n += 100
    now = time.time()
    if now >= next_log:
        log.write("%.6f %d %.6f\n" % (now, n, time.thread_time()))
        next_log = now + 0.2
"""


def read_log(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append((float(p[0]), int(p[1]), float(p[2])))
    return rows


def rates(rows, start, end):
    """Launches per wall second and per CPU second of the thread in [start, end]."""
    inside = [r for r in rows if start <= r[0] <= end]
    if len(inside) < 2:
        return None
    (t0, n0, c0), (t1, n1, c1) = inside[0], inside[-1]
    if t1 <= t0 or c1 <= c0:
        return None
    return (n1 - n0) / (t1 - t0), (n1 - n0) / (c1 - c0)


def quartiles(v):
    if len(v) < 4:
        return min(v), max(v)
    q = statistics.quantiles(v, n=4)
    return q[0], q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--gpufeed", help="the gpufeed binary (default: built from this checkout)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="gpufeed-bench-profile-")
    bin_ = a.gpufeed
    if not bin_:
        bin_ = os.path.join(tmp, "gpufeed")
        subprocess.run(["go", "build", "-o", bin_, "./cmd/gpufeed"], cwd=ROOT, check=True)
    sock, log = os.path.join(tmp, "gpu.sock"), os.path.join(tmp, "launches.log")
    simdev = subprocess.Popen([bin_, "simdev", "--socket", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    env = dict(os.environ, GPUFEED_SIMDEV=sock, GPUFEED_SIMDEV_SYNC="spin")
    job = subprocess.Popen([sys.executable, "-c", WORKLOAD, os.path.join(ROOT, "python"), log], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        if not job.stdout.readline().startswith("ready"):
            sys.exit("the workload did not start")
        time.sleep(1)
        modes = ["none", "off", "on"]
        got = {m: [] for m in modes}
        profiled, probed = [], []
        observer = {"off": [], "on": []}
        for r in range(a.rounds):
            order = modes[r % 3:] + modes[:r % 3]
            for m in order:
                start = time.time()
                if m == "none":
                    time.sleep(a.window)
                else:
                    out = subprocess.run([bin_, "diagnose", "--pid", str(job.pid), "--duration", "%gs" % a.window,
                                          "--profile", m, "-o", "json"], capture_output=True, text=True)
                    if out.returncode != 0:
                        sys.exit("diagnose --profile %s: exit %d: %s" % (m, out.returncode, out.stderr))
                    rep = json.loads(out.stdout)
                    if m == "on":
                        profiled.append(rep.get("cpu_profile") is not None)
                        dc = rep.get("driver_calls") or {}
                        probed.append(dc.get("state") == "on")
                    cpu = (rep.get("observer") or {}).get("cpu_of_one_core_percent")
                    if cpu is not None:
                        observer[m].append(cpu)
                end = time.time()
                time.sleep(0.5)
                rt = rates(read_log(log), start + 0.5, end - 0.5)
                if rt:
                    got[m].append(rt)
        if not all(profiled):
            sys.exit("--profile on took no profile in %d of %d windows (run as root or with CAP_PERFMON)"
                     % (profiled.count(False), len(profiled)))
    finally:
        job.kill()
        simdev.terminate()
        job.wait()
        simdev.wait()

    print("--profile on windows with the CUDA driver probes attached: %d of %d" % (probed.count(True), len(probed)))
    print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    print("%-26s %8s %22s %22s" % ("mode", "windows", "launches/s median", "launches/CPU-s median"))
    med = {}
    for m in modes:
        w = [x[0] for x in got[m]]
        c = [x[1] for x in got[m]]
        if not w:
            continue
        med[m] = (statistics.median(w), statistics.median(c))
        label = {"none": "no observer", "off": "diagnose --profile off", "on": "diagnose --profile on"}[m]
        print("%-26s %8d %22.0f %22.0f" % (label, len(w), med[m][0], med[m][1]))
    for m in ("off", "on"):
        if observer[m]:
            print("gpufeed's own CPU, --profile %-3s: median %.1f %% of one core" % (m, statistics.median(observer[m])))
    if "on" in med and "off" in med:
        # Paired: each round's on window against the off window of the same round.
        pairs = [on[0] / off[0] for on, off in zip(got["on"], got["off"])]
        cpairs = [on[1] / off[1] for on, off in zip(got["on"], got["off"])]
        print("profile on / off, launch rate: median %.3f, %.3f to %.3f, quartiles %.3f and %.3f (rounds: %s)" % (
            statistics.median(pairs), min(pairs), max(pairs), *quartiles(pairs), " ".join("%.3f" % p for p in pairs)))
        print("profile on / off, launches per CPU second: median %.3f (rounds: %s)" % (statistics.median(cpairs), " ".join("%.3f" % p for p in cpairs)))


if __name__ == "__main__":
    main()

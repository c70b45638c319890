"""A Python target for scripts/bench-pystacks.sh: --busy threads each run a
pure-Python loop at a stack depth of --depth frames and count iterations;
--idle threads sleep. Every --report seconds it prints the iterations done
since the last report, one line per report, so the caller computes the
target's throughput with and without an observer reading its stacks."""
import argparse
import sys
import threading
import time

counts = []


def work(i, depth):
    if depth > 0:
        return work(i, depth - 1)
    n = 0
    while True:
        for _ in range(1000):
            n += 1
        counts[i] += 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--busy", type=int, default=1)
    p.add_argument("--idle", type=int, default=8)
    p.add_argument("--depth", type=int, default=30)
    p.add_argument("--report", type=float, default=1.0)
    a = p.parse_args()
    counts.extend([0] * a.busy)
    for i in range(a.busy):
        threading.Thread(target=work, args=(i, a.depth), daemon=True).start()
    for _ in range(a.idle):
        threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
    last = 0
    while True:
        time.sleep(a.report)
        now = sum(counts)
        print(now - last, flush=True)
        last = now


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()

"""DataLoader-style workers forked from a parent that holds a dataset, each
walking its share of the dataset over a few seconds (seed 000 §5 and its
drill: a list of Python objects versus flat storage).

With --storage objects the dataset is a list of Python float objects: reading
an item increments its reference count, a write to the page holding it, so
copy-on-write gives each worker its own copy of every page it walked and its
unique memory (USS) climbs. With --storage array the same numbers live in one
array.array buffer: reading an item writes nothing shared, USS stays flat.

    python3 cow.py --storage objects --workers 2 --items 1500000 --seconds 6 --start fork
"""
import argparse
import array
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402


def build(storage, items):
    if storage == "objects":
        return [float(i) for i in range(items)]
    return array.array("d", range(items))


def walk(data, worker, workers, seconds, chunks):
    lo = len(data) * worker // workers
    hi = len(data) * (worker + 1) // workers
    step = max(1, (hi - lo) // chunks)
    pause = seconds / chunks
    total = 0.0
    for start in range(lo, hi, step):
        for i in range(start, min(start + step, hi)):
            total += data[i]
        time.sleep(pause)
    say("walked", worker=worker, total=total)
    while True:  # hold the memory, like a worker waiting for its next index
        time.sleep(3600)


def spawned_worker(storage, items, worker, workers, seconds, chunks):
    # spawn/forkserver children do not inherit the parent's heap: they build
    # their own copy (that is the memory cost of those start methods).
    walk(build(storage, items), worker, workers, seconds, chunks)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--storage", choices=["objects", "array"], default="objects")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--items", type=int, default=1_500_000)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--chunks", type=int, default=60)
    p.add_argument("--start", choices=["fork", "spawn", "forkserver"], default="fork")
    a = p.parse_args()
    ctx = mp.get_context(a.start)
    data = build(a.storage, a.items) if a.start == "fork" else None
    procs = []
    for w in range(a.workers):
        if a.start == "fork":
            proc = ctx.Process(target=walk, args=(data, w, a.workers, a.seconds, a.chunks), daemon=True)
        else:
            proc = ctx.Process(target=spawned_worker, args=(a.storage, a.items, w, a.workers, a.seconds, a.chunks), daemon=True)
        proc.start()
        procs.append(proc)
    say("workers", workers=[pr.pid for pr in procs], storage=a.storage, start=a.start)
    for pr in procs:
        pr.join()

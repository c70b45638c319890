"""preprocessing-bound: worker processes decompress data for the trainer.

One worker process per CPU (a DataLoader with num_workers = cores) turns
zlib-compressed records into batches: 20 ms of decompression per batch. The
trainer takes batches from a multiprocessing queue and launches 2 ms of GPU
work per batch: the GPU waits for the workers, which keep every core busy.
"""

import multiprocessing as mp
import os
import random
import time
import zlib

from demo_common import connect, ready, running

BATCH_CPU_S = 0.020
KERNELS, KERNEL_US = 4, 500


def make_record():
    rnd = random.Random(42)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9))) for _ in range(2000)]
    raw = b" ".join(rnd.choice(words) for _ in range(400000))
    return zlib.compress(raw, 6)


def worker(record, q):
    while running():
        end = time.thread_time() + BATCH_CPU_S
        n = 0
        while time.thread_time() < end:
            n += len(zlib.decompress(record))
        q.put(n)


def main():
    record = make_record()
    q = mp.Queue(maxsize=8)
    ctx_workers = [mp.Process(target=worker, args=(record, q), daemon=True) for _ in range(os.cpu_count() or 1)]
    for p in ctx_workers:
        p.start()
    dev = connect()  # after the fork: workers never touch the device, as DataLoader workers never touch CUDA
    q.get()  # the pipeline is producing
    ready()
    while running():
        q.get()
        for _ in range(KERNELS):
            dev.launch(KERNEL_US)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()

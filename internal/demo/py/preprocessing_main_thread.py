"""preprocessing-main-thread: a DataLoader with num_workers=0.

The training thread prepares every batch itself (20 ms of zlib
decompression, as a DataLoader with num_workers=0 runs the dataset's
__getitem__ and collate in the main process), then queues 1 ms of kernels
and reads the loss (a synchronisation). The GPU waits for the one thread
that both preprocesses and launches; from /proc that thread is simply busy
(in user mode, on one core), and the change is to move the preprocessing
off it (num_workers > 0).
"""

import random
import time
import zlib

from demo_common import connect, ready, running

BATCH_CPU_S = 0.020
KERNELS, KERNEL_US = 2, 500


def make_record():
    rnd = random.Random(42)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9))) for _ in range(2000)]
    raw = b" ".join(rnd.choice(words) for _ in range(400000))
    return zlib.compress(raw, 6)


def next_batch(record):
    end = time.thread_time() + BATCH_CPU_S
    n = 0
    while time.thread_time() < end:
        n += len(zlib.decompress(record))
    return n


record = make_record()
dev = connect()
next_batch(record)
ready()
while running():
    next_batch(record)
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    dev.synchronize()  # loss.item()

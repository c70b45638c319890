"""storage-bound: readers make many small reads that miss the page cache.

Two reader processes each read 16 random 4 KiB blocks per sample with
O_DIRECT (no page cache) from a file the runner had this script write on the
temp directory's filesystem, and pass the sample to the trainer through a
multiprocessing queue; the trainer launches 2 ms of GPU work per sample. When
the runner could create one, the readers run in a block-I/O cgroup limited
to a few hundred reads per second (a throttled or shared volume): they wait
on the disk, not on the CPU.
"""

import mmap
import multiprocessing as mp
import os
import random

from demo_common import connect, fail, ready, running

READERS = 2
BLOCK = int(os.environ.get("GPUFEED_DEMO_BLOCK", "4096"))
READS_PER_SAMPLE = int(os.environ.get("GPUFEED_DEMO_READS", "16"))
SIZE = 64 << 20
KERNELS, KERNEL_US = 4, 500


def prepare(path):
    if not os.path.exists(path) or os.path.getsize(path) != SIZE:
        with open(path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # nothing of it stays cached
    os.close(fd)


def join_cgroup():
    procs = os.environ.get("GPUFEED_DEMO_CGROUP_PROCS", "")
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))


def reader(path, q):
    join_cgroup()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    blocks = SIZE // BLOCK
    rnd = random.Random(os.getpid())
    while running():
        n = 0
        for _ in range(READS_PER_SAMPLE):
            n += os.preadv(fd, [buf], rnd.randrange(blocks) * BLOCK)
        q.put(n)


def main():
    path = os.environ.get("GPUFEED_DEMO_DATA", "")
    if not path:
        fail("GPUFEED_DEMO_DATA is not set")
    prepare(path)
    q = mp.Queue(maxsize=8)
    readers = [mp.Process(target=reader, args=(path, q), daemon=True) for _ in range(READERS)]
    for p in readers:
        p.start()
    dev = connect()
    q.get()
    ready()
    while running():
        q.get()
        for _ in range(KERNELS):
            dev.launch(KERNEL_US)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()

# gpufeed's copy-on-write drill: a parent builds a dataset, forks workers as
# a DataLoader with the fork start method does, and each worker reads every
# item in a random order, as a shuffled sampler makes it. Reading a Python
# object writes its reference count, so each page of objects a worker
# touches is copied into the worker; a flat buffer (numpy, or bytes) is
# read without a write and stays shared.
#
# Protocol (lines on stdout, one JSON object each): {"workers": [pids...],
# ...} once the workers are forked and waiting; the parent then waits for
# "go" on stdin, releases the workers, prints {"done": pid} as each
# finishes its pass, and ends its workers when stdin closes.
import gc
import json
import os
import math
import select
import sys

storage, items, workers, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

flat_kind = None
if storage == "list":
    data = [(i, float(i), str(i)) for i in range(items)]
else:
    try:
        import numpy

        data = numpy.arange(items * 3, dtype=numpy.float64).reshape(items, 3)
        flat_kind = "numpy"
    except ImportError:
        data = bytes(items * 24)
        flat_kind = "bytes"
gc.collect()

go_r, go_w = os.pipe()
done_r, done_w = os.pipe()
pids = []
parent = os.getpid()


def end_workers():
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    for pid in pids:
        os.waitpid(pid, 0)


for w in range(workers):
    pid = os.fork()
    if pid == 0:
        try:  # end with the parent, whatever ends it (PR_SET_PDEATHSIG, SIGKILL)
            import ctypes

            ctypes.CDLL(None).prctl(1, 9)
        except Exception:
            pass
        if os.getppid() != parent:
            os._exit(1)
        os.close(go_w)
        os.close(done_r)
        os.read(go_r, 1)
        # A shuffled order without a list of indices (which would be the
        # worker's own memory, not copied pages): a stride coprime with
        # the dataset's length visits every item once, scattered.
        step = 7919 * (w + 1) + 1
        while math.gcd(step, items) != 1:
            step += 1
        total = 0.0
        for p in range(passes):
            k = (p * 104729) % items
            for _ in range(items):
                k = (k + step) % items
                if flat_kind == "bytes":
                    total += data[k * 24]
                else:
                    item = data[k]
                    total += item[1]
        os.write(done_w, (json.dumps({"done": os.getpid()}) + "\n").encode())
        # Stay alive (and resident) until the parent ends us.
        while True:
            select.select([], [], [])
    pids.append(pid)
os.close(go_r)
os.close(done_w)
print(json.dumps({"workers": pids, "storage": storage, "flat": flat_kind, "items": items}), flush=True)
if sys.stdin.readline().strip() != "go":
    end_workers()
    sys.exit(1)
os.write(go_w, b"g" * workers)
buf = b""
left = workers
while left:
    chunk = os.read(done_r, 4096)
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        print(line.decode(), flush=True)
        left -= 1
sys.stdin.read()
end_workers()

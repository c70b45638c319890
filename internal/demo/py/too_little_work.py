"""too-little-work: a lightly loaded inference service.

Requests arrive every 5 ms (a generator thread stands in for the network);
each needs three 40 us kernels and the result read back. Nothing is slow:
the CPU is mostly idle, nothing waits on the GPU, disk or workers; the GPU
just gets little work per request (batch size 1).
"""

import queue
import threading
import time

from demo_common import connect, ready, running

ARRIVAL_S = 0.005
KERNELS, KERNEL_US = 3, 40


def arrivals(q):
    while running():
        time.sleep(ARRIVAL_S)
        q.put(time.monotonic())


dev = connect()
requests = queue.Queue()
threading.Thread(target=arrivals, args=(requests,), name="requests", daemon=True).start()
ready()
while running():
    requests.get()
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    dev.synchronize()  # read the answer back

"""stalled: a job that stops making progress.

After a few steps a helper thread takes a lock and blocks reading a pipe
that nobody writes (a peer that died); the training thread then waits for
the lock. Nothing runs, the GPU idles, nothing is read or written.
"""

import os
import threading

from demo_common import LIFETIME, connect, ready

dev = connect()
for _ in range(10):
    dev.launch(100)
dev.synchronize()
lock = threading.Lock()
r, w = os.pipe()
held = threading.Event()


def helper():
    with lock:
        held.set()
        os.read(r, 1)  # the writer never writes


threading.Thread(target=helper, name="loader", daemon=True).start()
held.wait()
ready()
lock.acquire(timeout=LIFETIME)  # waits until the runner stops it

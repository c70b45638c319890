"""A training loop that changes phase, for the live view's test.

Phase 1 (argv[2] seconds): GPU-bound, as the gpu-bound demo: each step 1 ms
of CPU, twenty 1 ms kernels queued, a synchronisation every 25 steps.
Phase 2 (argv[3] seconds): launch-bound, as the launch-bound demo: one
thread launching 2 us kernels flat out. It writes "phase 2" to stderr when
it switches. argv[1] is the directory of gpufeed_simdev.py.
"""

import sys
import time

sys.path.insert(0, sys.argv[1])
import gpufeed_simdev  # noqa: E402

PHASE1, PHASE2 = float(sys.argv[2]), float(sys.argv[3])


def burn(cpu_seconds):
    end = time.thread_time() + cpu_seconds
    x = 1
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


dev = gpufeed_simdev.connect()
t0 = time.monotonic()
step = 0
while time.monotonic() - t0 < PHASE1:
    burn(0.001)
    for _ in range(20):
        dev.launch(1000)
    step += 1
    if step % 25 == 0:
        dev.synchronize()
dev.synchronize()
sys.stderr.write("phase 2\n")
sys.stderr.flush()
t1 = time.monotonic()
while time.monotonic() - t1 < PHASE2:
    for _ in range(100):
        dev.launch(2)

"""noisy-neighbour: the launch-bound job with CPU hogs on its core.

The launch thread is pinned to one CPU (as taskset -c would), and the
runner starts two CPU-bound processes outside the job pinned to the same
CPU: the launch thread waits on the run queue most of the time.
"""

import os

from demo_common import connect, ready, running

KERNEL_US = 5

cpu = int(os.environ.get("GPUFEED_DEMO_CPU", "0"))
os.sched_setaffinity(0, {cpu})
dev = connect()
ready()
while running():
    for _ in range(100):
        dev.launch(KERNEL_US)

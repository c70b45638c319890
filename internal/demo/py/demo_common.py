"""Shared helpers of gpufeed's demo workloads (standard library only).

The demo runner (internal/demo) starts each workload as a separate process
with GPUFEED_SIMDEV pointing at its simulated device and this directory on
PYTHONPATH. A workload prepares what it needs, calls ready(), then works
until the runner stops it; running() is a safety net that ends it on its own
GPUFEED_DEMO_SECONDS after start, so nothing outlives a crashed runner.
"""

import os
import sys
import time

import gpufeed_simdev

_START = time.monotonic()
LIFETIME = float(os.environ.get("GPUFEED_DEMO_SECONDS", "60"))


def connect():
    """Connect to the simulated device named by GPUFEED_SIMDEV."""
    return gpufeed_simdev.connect()


def burn(cpu_seconds):
    """Spend cpu_seconds of this thread's CPU time computing.

    Measured in thread CPU time, not wall time: a thread that is descheduled
    still does the same work, it just takes longer, as real code does.
    """
    end = time.thread_time() + cpu_seconds
    x = 1
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def ready():
    """Tell the runner the workload is set up: the observation starts now."""
    fd = int(os.environ.get("GPUFEED_DEMO_READY_FD", "-1"))
    if fd >= 0:
        os.write(fd, b"ready\n")
        os.close(fd)


def running():
    """True until the workload's lifetime is over (the runner stops it first)."""
    return time.monotonic() - _START < LIFETIME


def fail(msg):
    sys.stderr.write("demo workload: %s\n" % msg)
    sys.exit(2)

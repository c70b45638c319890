"""idle-sleep: a process waiting on a timer, with no GPU.

It becomes the sleep(1) program (exec: the same process), which waits in
clock_nanosleep for the scenario's lifetime. The runner is told it is ready
a moment after the exec, by a short-lived grandchild outside the job, so
the observation starts with sleep already waiting, as when one attaches to
a running `sleep 30`. Nothing runs and no GPU is in view: the job is idle,
waiting on a timer, not stalled.
"""

import os
import time

from demo_common import LIFETIME, ready

fd = int(os.environ.get("GPUFEED_DEMO_READY_FD", "-1"))
pid = os.fork()
if pid == 0:
    if os.fork() == 0:  # the grandchild: reparented away from the job
        time.sleep(0.3)
        ready()
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)
if fd >= 0:
    os.close(fd)  # only the grandchild says ready
os.execvp("sleep", ["sleep", str(int(LIFETIME))])

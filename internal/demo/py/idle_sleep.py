"""idle-sleep: a process waiting on a timer, with no GPU.

Once ready it becomes the sleep(1) program (exec: the same process), which
waits in clock_nanosleep for the scenario's lifetime. Nothing runs and no
GPU is in view: the job is idle, waiting on a timer, not stalled.
"""

import os

from demo_common import LIFETIME, ready

ready()
os.execvp("sleep", ["sleep", str(int(LIFETIME))])

"""A process that leaks file descriptors (files, sockets, pipes) at a steady
rate toward a lowered soft RLIMIT_NOFILE, as a data loader that opens a file
per sample and never closes it (seed 004, "File descriptor exhaustion").

    python3 fdleak.py --soft 256 --rate 20
"""
import argparse
import os
import resource
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--soft", type=int, default=256)
p.add_argument("--rate", type=float, default=20.0)
a = p.parse_args()

_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (a.soft, hard))
# Under the working directory, which the harness removes afterwards.
d = tempfile.mkdtemp(prefix="fdleak-", dir=os.getcwd())
say("limit", soft=a.soft, hard=hard, dir=d)
kept = []
n = 0
while True:
    try:
        kind = n % 4
        if kind in (0, 1):
            kept.append(open(os.path.join(d, "shard-%05d.bin" % n), "wb"))
        elif kind == 2:
            kept.extend(socket.socketpair())
        else:
            kept.extend(os.pipe())
        n += 1
    except OSError as e:
        say("exhausted", errno=e.errno, open=len(kept))
        while True:
            time.sleep(3600)
    time.sleep(1.0 / a.rate)

"""Several Python threads running pure-Python loops: the GIL lets one run at
a time, so together they use about one core however many cores are free
(seed 004, "The GIL").

    python3 gilthreads.py --threads 3
"""
import argparse
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=3)
a = p.parse_args()


def spin():
    x = 0
    while True:
        for i in range(10000):
            x += i * i


ts = [threading.Thread(target=spin, name="busy-%d" % i, daemon=True) for i in range(a.threads)]
for t in ts:
    t.start()
say("spinning", threads=[t.native_id for t in ts])
for t in ts:
    t.join()

"""Threads blocked on a lock held by a thread that sleeps: every waiter
sleeps in futex() (CPython's Lock is a semaphore on a futex), the holder in
clock_nanosleep(), the main thread in futex() joining them. No CPU is used.

    python3 futexhang.py --waiters 3
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--waiters", type=int, default=3)
a = p.parse_args()

lock = threading.Lock()
held = threading.Event()


def holder():
    with lock:
        held.set()
        time.sleep(3600)


def waiter():
    with lock:
        pass


h = threading.Thread(target=holder, name="holder", daemon=True)
h.start()
held.wait()
ws = [threading.Thread(target=waiter, name="waiter-%d" % i, daemon=True) for i in range(a.waiters)]
for w in ws:
    w.start()
time.sleep(0.2)
say("waiting", holder=h.native_id, waiters=[w.native_id for w in ws])
for w in ws:
    w.join()

# A known program for the CPython stack reader's tests: every line the
# tests expect is marked with a comment naming it. It runs on CPython 3.8+.
import json
import select
import sys
import threading
import time


def gen():
    yield 0
    time.sleep(1000)  # @gen-sleep
    yield 1


def consume(ready):
    g = gen()
    next(g)
    ready.set()
    for _ in g:  # @consume-for
        pass


def leaf(ready):
    ready.set()
    select.select([], [], [], 1000)  # @leaf-select


def middle(ready):
    leaf(ready)  # @middle-call


def outer(ready):
    middle(ready)  # @outer-call


class Spinner:
    def spin(self, ready, stop):
        ready.set()
        n = 0
        while not stop:  # @spin-loop
            n += 1


def main_wait():
    time.sleep(1000)  # @main-sleep


def start(name, target, *args):
    ready = threading.Event()
    t = threading.Thread(target=target, args=(ready,) + args, name=name, daemon=True)
    t.start()
    ready.wait()
    return t


if __name__ == "__main__":
    native = getattr(threading, "get_native_id", lambda: 0)  # 3.8+
    tids = {"main": native()}
    for name, fn, args in [("nested", outer, ()), ("gen", consume, ())] + (
            [("spin", Spinner().spin, ([],))] if "--spin" in sys.argv else []):
        t = start(name, fn, *args)
        tids[name] = getattr(t, "native_id", 0)
    time.sleep(0.2)  # let every thread reach its wait
    print(json.dumps({"ready": tids, "version": sys.version.split()[0]}), flush=True)
    main_wait()  # @module-call

"""Two processes that each wait to read what the other never writes: the
parent blocks in read() on an empty pipe whose writer is alive (the child
holds it), the child blocks in read() on the other pipe. Nothing progresses.

    python3 pipehang.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

to_parent_r, to_parent_w = os.pipe()
to_child_r, to_child_w = os.pipe()
pid = os.fork()
if pid == 0:
    say("child-waiting")
    os.read(to_child_r, 1)  # the parent never writes
    os._exit(0)
say("waiting", child=pid)
os.read(to_parent_r, 1)  # the child never writes

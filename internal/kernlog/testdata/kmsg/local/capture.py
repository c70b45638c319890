"""Regenerates local-6.18.kmsg: real kernel log records of a segfault, CPU
traps and a memory-cgroup OOM kill, produced on the machine that runs it.

Run as root on a host with the cgroup v1 memory controller:
    gcc -O0 -o /tmp/crash crash.c && python3 capture.py /tmp/crash > local-6.18.kmsg
It reads /dev/kmsg from its end, so only the records these programs cause
are written out (plus whatever else the kernel logged meanwhile).
"""
import os
import subprocess
import sys
import time

crash = sys.argv[1]
fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
os.lseek(fd, 0, os.SEEK_END)
for what in ["segv", "gpf", "ud2", "int3"]:
    subprocess.run([crash, what])
subprocess.run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"])

own = [l.split(":")[2].strip() for l in open("/proc/self/cgroup") if l.split(":")[1] == "memory"][0]
cg = "/sys/fs/cgroup/memory" + own.rstrip("/") + "/gpufeed-fixture-%d" % os.getpid()
os.mkdir(cg)
try:
    with open(cg + "/memory.limit_in_bytes", "w") as f:
        f.write(str(64 << 20))

    def enter():
        with open(cg + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    subprocess.run([sys.executable, "-c", "b=[]\nwhile True: b.append(bytearray(4<<20))"], preexec_fn=enter)
    time.sleep(0.3)
finally:
    os.rmdir(cg)

out = []
while True:
    try:
        out.append(os.read(fd, 8192))
    except BlockingIOError:
        break
sys.stdout.buffer.write(b"".join(out))

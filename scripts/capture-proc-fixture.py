#!/usr/bin/env python3
"""Capture a /proc fixture tree from a live process tree, sanitised.

    scripts/capture-proc-fixture.py OUT_DIR            # spawn the built-in workload and capture it
    scripts/capture-proc-fixture.py OUT_DIR --pid PID  # capture a running process tree
    scripts/capture-proc-fixture.py --run SECONDS      # only run the workload (to record it live)

The built-in workload looks like a PyTorch trainer: a main thread named
pt_main_thread, pt_autograd_0, a pin-memory thread blocked reading a pipe,
NCCL-named threads, a pool of unnamed threads waiting on futexes, a spinning
thread, and a forked DataLoader-style worker (pt_data_worker) blocked on a
pipe. One thread ("doomed") is told to exit after the thread list is taken
and before its files are copied, so its task/TID directory is left empty:
exactly what the sampler sees when a thread vanishes mid-read.

What is copied, for the target and each descendant: stat statm status io
limits cmdline environ smaps_rollup schedstat, fd/ (as symlinks with the same
targets, paths reduced to their base name), and per thread task/TID/{stat,
schedstat,status,wchan,syscall}. Host: stat meminfo diskstats pressure/*.

Sanitising: environ keeps only gpufeed's allowlist plus one deliberate canary
(GPUFEED_FIXTURE_CANARY, a fake secret the tests check is never read); fd
targets that are paths keep only their base name; nothing names the host.
Run as root (syscall and wchan of other users' threads need ptrace access).
"""
import argparse
import ctypes
import os
import shutil
import signal
import sys
import threading
import time

ALLOW = """RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK SLURM_PROCID SLURM_LOCALID
SLURM_JOB_ID OMP_NUM_THREADS MKL_NUM_THREADS CUDA_VISIBLE_DEVICES CUDA_LAUNCH_BLOCKING
PYTORCH_CUDA_ALLOC_CONF NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING
TORCH_NCCL_BLOCKING_WAIT NCCL_BLOCKING_WAIT TORCH_NCCL_DUMP_ON_TIMEOUT
TORCH_NCCL_TRACE_BUFFER_SIZE NCCL_TIMEOUT NCCL_DEBUG TORCH_DISTRIBUTED_DEBUG
GPUFEED_SIMDEV""".split()
CANARY = "GPUFEED_FIXTURE_CANARY"

PROC_FILES = ["stat", "statm", "status", "io", "limits", "cmdline", "smaps_rollup", "schedstat", "wchan", "syscall"]
TASK_FILES = ["stat", "schedstat", "status", "wchan", "syscall"]
HOST_FILES = ["stat", "meminfo", "diskstats", "pressure/cpu", "pressure/memory", "pressure/io"]


def workload(ready_w, doom_r):
    """The fixture's subject: runs until killed."""
    libc = ctypes.CDLL(None)

    def name(n):
        libc.prctl(15, n.encode(), 0, 0, 0)

    name("pt_main_thread")
    stop = threading.Event()
    pin_r, _pin_w = os.pipe()
    worker_r, worker_w = os.pipe()

    def named(n, fn):
        def run():
            name(n)
            fn()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    named("pt_autograd_0", stop.wait)
    named("pt_data_pin", lambda: os.read(pin_r, 1))
    named("pt_nccl_watchdg", lambda: time.sleep(3600))
    named("NCCL Service 0", stop.wait)

    def spin():
        x = 0
        while True:
            x += 1
    named("pt_spin", spin)
    for _ in range(30):  # an unnamed pool, as OpenMP leaves it
        threading.Thread(target=stop.wait, daemon=True).start()
    named("doomed", lambda: os.read(doom_r, 1))
    if os.fork() == 0:
        name("pt_data_worker")
        os.close(worker_w)  # EOF (and exit) when the trainer goes
        os.read(worker_r, 1)
        os._exit(0)
    os.write(ready_w, b"r")
    stop.wait()


def copy_file(src, dst):
    try:
        with open(src, "rb") as f:
            data = f.read(1 << 20)
    except (FileNotFoundError, ProcessLookupError):
        return False
    except PermissionError:
        return False
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(data)
    return True


def sanitise_environ(src, dst):
    try:
        with open(src, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return
    keep = []
    for entry in data.split(b"\0"):
        k, _, _ = entry.partition(b"=")
        if k.decode(errors="replace") in ALLOW or k == CANARY.encode():
            keep.append(entry)
    with open(dst, "wb") as f:
        f.write(b"\0".join(keep) + (b"\0" if keep else b""))


def descendants(root_pid):
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                parent[int(d)] = int(s[s.rindex(")") + 2:].split()[1])
            except OSError:
                pass
    tree, grew = {root_pid}, True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in tree and p not in tree:
                tree.add(p)
                grew = True
    return sorted(tree)


def capture(out, root_pid, before_copy=None):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for h in HOST_FILES:
        copy_file(f"/proc/{h}", os.path.join(out, h))
    pids = descendants(root_pid)
    tids = {pid: sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")) for pid in pids}
    if before_copy:
        before_copy()
    for pid in pids:
        pdir = os.path.join(out, str(pid))
        os.makedirs(pdir)
        for name in PROC_FILES:
            copy_file(f"/proc/{pid}/{name}", os.path.join(pdir, name))
        sanitise_environ(f"/proc/{pid}/environ", os.path.join(pdir, "environ"))
        os.makedirs(os.path.join(pdir, "fd"))
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/"):
                target = "/fixture/" + os.path.basename(target)
            os.symlink(target, os.path.join(pdir, "fd", fd))
        for tid in tids[pid]:
            tdir = os.path.join(pdir, "task", str(tid))
            os.makedirs(tdir)
            copied = [copy_file(f"/proc/{pid}/task/{tid}/{name}", os.path.join(tdir, name)) for name in TASK_FILES]
            if not any(copied):
                # The thread vanished: its directory stays, empty but for a
                # .keep so git tracks it (the sampler reads only stat/schedstat).
                open(os.path.join(tdir, ".keep"), "w").close()
    return pids, tids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--pid", type=int)
    args = ap.parse_args()
    if args.pid:
        pids, tids = capture(args.out, args.pid)
    else:
        ready_r, ready_w = os.pipe()
        doom_r, doom_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", OMP_NUM_THREADS="4", NCCL_DEBUG="WARN")
        env[CANARY] = "not-a-real-secret-but-must-never-be-read"
        os.set_inheritable(ready_w, True)
        os.set_inheritable(doom_r, True)
        pid = os.fork()
        if pid == 0:
            os.environ.clear()
            os.environ.update(env)
            # Re-exec so the environment is the process's real initial one.
            os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "--workload",
                                       str(ready_w), str(doom_r)], env)
        os.read(ready_r, 1)
        time.sleep(0.5)  # let every thread reach its wait

        def doom():
            os.write(doom_w, b"x")  # the doomed thread exits between listing and copying
            time.sleep(0.3)
        try:
            pids, tids = capture(args.out, pid, before_copy=doom)
        finally:
            for p in reversed(descendants(pid)):
                os.kill(p, signal.SIGKILL)
            os.waitpid(pid, 0)
    print(f"captured {len(pids)} processes, {sum(len(t) for t in tids.values())} threads into {args.out}: pids {pids}")


def run_for(seconds):
    _ready_r, ready_w = os.pipe()
    doom_r, _doom_w = os.pipe()

    def end():
        time.sleep(seconds)
        os._exit(0)  # the forked worker sees its pipe close and exits too
    threading.Thread(target=end, daemon=True).start()
    workload(ready_w, doom_r)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--workload":
        workload(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--run":
        run_for(float(sys.argv[2]))
    else:
        main()

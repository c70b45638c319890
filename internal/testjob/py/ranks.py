"""A three-rank job whose ranks run a ring "all-reduce" over pipes, the way a
collective passes a value around; one rank is put in a memory cgroup and
allocates until the kernel OOM-kills it, and the others block waiting for it.

The launcher (like torchrun or srun) starts each rank as a fresh interpreter
with RANK / LOCAL_RANK / WORLD_SIZE (and, unless --no-local-world-size,
LOCAL_WORLD_SIZE) in its environment and keeps every pipe end open, so a
dead rank never turns into an end-of-file for its peers: they wait in read()
forever, as ranks wait in a collective for a peer that died.

With --wait any the launcher reaps each rank as it ends (waitpid(-1)); with
--wait order it waits for rank 0, then 1, ..., like a plain launcher looping
over its children, so a dead rank 2 stays a zombie while rank 0 lives.

    python3 ranks.py --world 3 --victim 2 --cgroup-procs /sys/fs/cgroup/memory/x/cgroup.procs
"""
import argparse
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402


def rank_main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    rfd = int(os.environ["GPUFEED_SCN_READ_FD"])
    wfd = int(os.environ["GPUFEED_SCN_WRITE_FD"])
    rounds = int(os.environ["GPUFEED_SCN_ROUNDS"])
    victim = os.environ.get("GPUFEED_SCN_VICTIM") == "1"
    step = int(os.environ.get("GPUFEED_SCN_STEP_MB", "4")) << 20
    hog = []
    n = 0
    while True:
        n += 1
        if victim and n > rounds:
            say("allocating", rank=rank)
            # The "activation memory" that does not fit: grows until the
            # memory cgroup's limit makes the kernel kill this process.
            while True:
                hog.append(bytearray(step))
        if rank == 0:
            os.write(wfd, struct.pack("<q", 1))
            total = struct.unpack("<q", os.read(rfd, 8))[0]
            if n == rounds:
                say("rounds-done", rank=rank, total=total)
        else:
            v = struct.unpack("<q", os.read(rfd, 8))[0]
            os.write(wfd, struct.pack("<q", v + 1))
        if n <= rounds:
            time.sleep(0.01)


def launcher(args):
    world = args.world
    # pipe i carries rank i's output to rank (i+1) % world.
    pipes = [os.pipe() for _ in range(world)]
    procs = {}
    for rank in range(world):
        rfd = pipes[(rank - 1) % world][0]
        wfd = pipes[rank][1]
        env = dict(os.environ)
        if args.local_world_size:
            env["LOCAL_WORLD_SIZE"] = str(world)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
            "GPUFEED_SCN_READ_FD": str(rfd), "GPUFEED_SCN_WRITE_FD": str(wfd),
            "GPUFEED_SCN_ROUNDS": str(args.rounds),
            "GPUFEED_SCN_VICTIM": "1" if rank == args.victim else "0",
            "GPUFEED_SCN_STEP_MB": str(args.step_mb),
        })
        preexec = None
        if rank == args.victim and args.cgroup_procs:
            def preexec(path=args.cgroup_procs):
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
        procs[rank] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank-main"],
            env=env, pass_fds=(rfd, wfd), preexec_fn=preexec)
    say("ranks", ranks={str(r): p.pid for r, p in procs.items()})
    by_pid = {p.pid: r for r, p in procs.items()}
    if args.wait == "order":
        for rank in range(world):
            status = procs[rank].wait()
            say("exit", rank=rank, child=procs[rank].pid, signal=-status if status < 0 else 0,
                code=status if status >= 0 else None)
        return
    # Like a launcher that does not tear the job down: note each exit and
    # keep waiting, with every pipe end still open.
    while by_pid:
        pid, status = os.waitpid(-1, 0)
        rank = by_pid.pop(pid, None)
        say("exit", rank=rank, child=pid, signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
            code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None)


if __name__ == "__main__":
    if "--rank-main" in sys.argv:
        rank_main()
    else:
        p = argparse.ArgumentParser()
        p.add_argument("--world", type=int, default=3)
        p.add_argument("--victim", type=int, default=2)
        p.add_argument("--rounds", type=int, default=20)
        p.add_argument("--step-mb", type=int, default=4)
        p.add_argument("--cgroup-procs", default="")
        p.add_argument("--wait", choices=["any", "order"], default="any")
        p.add_argument("--no-local-world-size", dest="local_world_size", action="store_false")
        launcher(p.parse_args())

"""A torch.distributed job on the CPU (gloo backend) started the way srun
starts tasks: a plain launcher runs the same command line once per rank
(subprocess: fork, then exec), with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT in each rank's environment, and waits for them.

The ranks all_reduce a small tensor in a loop. With --hang R, rank R takes a
lock it already holds after --rounds rounds (a deadlock in its own code)
while the others wait for it in all_reduce. With --slow R, rank R spends
--slow-ms milliseconds of its own CPU before each all_reduce (--slow-how
cpu), sleeps that long (--slow-how sleep) or waits that long for a batch from
its DataLoader's one worker (--slow-how data): a straggler its peers wait
for in all_reduce. --phases RANK:HOW,... lists several stragglers, one after
the other, and --control FILE moves the job between them (or pauses its rounds)
when a test writes the phase's index (or "pause") there: one job's ranks, whose
start-up (importing torch, joining the group) is most of a test's time, serve
several tests. --simdev DIR gives each step a GPU side on gpufeed's
simulated device (a 2 ms kernel and a synchronise). --preexec-delay S holds each
rank for S seconds between fork and exec (a launcher setting up a cgroup or
CPU binding there), so an observer sees it first with the launcher's
command line, environment and memory layout. --torchrun-env gives each rank
the whole environment torchrun's elastic agent sets on one node (also
LOCAL_WORLD_SIZE, GROUP_RANK=0 and a TORCHELASTIC_RUN_ID), so that rank
detection is exercised as under torchrun. --torchrun starts the ranks with
torchrun itself (python3 -m torch.distributed.run --standalone): its elastic
agent is then the ranks' parent, and this launcher its parent. Its rendezvous
is --standalone's on a free port: two jobs can run at once.

Debian's torchrun (torch 1.13) under Python 3.11 fails before it starts any
worker with its defaults: it reads --redirects and --tee ("0") into an
IntFlag, and Python 3.11 no longer lists the flag's zero member when
iterating it, so "0" becomes None and to_map fails. A mapping for a local
rank that does not exist ("9:1", one digit as its pattern wants) gives
every real rank the default, no redirection, without that lookup:
--torchrun passes it (jobs of up to 9 ranks on the node).

    /usr/bin/python3 torch_ranks.py --world 3 --hang 1
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402


def rank_main(a):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if a.torchrun:
        say("rank-up", rank=rank)
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    t = torch.ones(1024)
    dev = None

    def device():
        # a GPU side: gpufeed's simulated device (GPUFEED_SIMDEV)
        nonlocal dev
        if dev is None:
            sys.path.insert(0, a.simdev)
            import gpufeed_simdev
            dev = gpufeed_simdev.connect()
        return dev

    if a.simdev and not a.phases:
        device()
    batches = None

    def slow_batches():
        # its input comes from a DataLoader worker that takes slow_ms per batch
        from torch.utils.data import DataLoader, Dataset

        class Slow(Dataset):
            def __len__(self):
                return 1 << 30

            def __getitem__(self, i):
                time.sleep(a.slow_ms / 1000)
                return torch.ones(4)

        return iter(DataLoader(Slow(), batch_size=1, num_workers=1, prefetch_factor=1, persistent_workers=True))

    phases = a.phases or [(a.slow, a.slow_how, bool(a.simdev))]
    phase = 0
    paused = False
    n = 0
    total = 0
    while True:
        if a.control:
            want = read_control(a.control)
            if want == "pause":
                # No collective while paused: each rank makes the same
                # number of all_reduce calls, so they meet again on resume.
                paused = True
                time.sleep(0.05)
                continue
            if want is not None and (want != phase or paused) and 0 <= want < len(phases):
                phase, n = want, 0
                say("phase", rank=rank, phase=phase)
            paused = False
        slow, how, gpu = phases[phase]
        n += 1
        total += 1
        if rank == a.hang and total > a.rounds:
            lock = threading.Lock()
            lock.acquire()
            say("hung", rank=rank)
            lock.acquire()  # never returns: the others wait in all_reduce
        if rank == slow:
            if how == "sleep":
                time.sleep(a.slow_ms / 1000)
            elif how == "data":
                if batches is None:
                    batches = slow_batches()
                next(batches)
            else:
                end = time.thread_time() + a.slow_ms / 1000
                x = 0
                while time.thread_time() < end:
                    x += sum(range(1000))
        if gpu:
            device().launch(2000)  # a 2 ms kernel, then wait for it
            dev.synchronize()
        dist.all_reduce(t)
        if n == a.rounds:
            say("rounds-done", rank=rank, phase=phase)
        time.sleep(a.pause)


def read_control(path):
    """The phase the test wants now: an index into --phases, "pause", or
    None when the file is missing or unreadable."""
    try:
        with open(path) as f:
            v = f.read().strip()
    except OSError:
        return None
    if v == "pause":
        return v
    try:
        return int(v)
    except ValueError:
        return None


def parse_phases(spec):
    """--phases "1:cpu,1:cpu:gpu,1:sleep": the straggler rank and how it is
    slow, per phase; ":gpu" gives each step a GPU side (--simdev)."""
    out = []
    for part in filter(None, spec.split(",")):
        f = part.split(":")
        if len(f) not in (2, 3) or f[1] not in ("cpu", "sleep", "data") or (len(f) == 3 and f[2] != "gpu"):
            raise SystemExit("--phases: %r: want RANK:cpu, RANK:sleep or RANK:data, then :gpu or nothing" % part)
        out.append((int(f[0]), f[1], len(f) == 3))
    return out


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_launcher(a):
    """Runs the ranks under torchrun and says their pids (each rank says its
    own once up: torchrun's agent, not this process, is their parent)."""
    # The ranks get this command line (--torchrun included: with RANK set
    # they are ranks, and say when they are up).
    # What --standalone sets, on a free port: --standalone's rendezvous store
    # is always localhost:29400, so a second single-node job joined the
    # first one's store and failed when that job ended.
    rdzv = ["--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:%d" % free_port(),
            "--rdzv_id", "gpufeed-test-%d" % os.getpid()]
    cmd = [sys.executable, "-m", "torch.distributed.run"] + rdzv + ["--nnodes", "1",
           "--nproc_per_node", str(a.world), "--redirects", "9:1", "--tee", "9:1",
           os.path.abspath(__file__)] + sys.argv[1:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    ranks = {}
    for line in p.stdout:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("event") == "rank-up":
            ranks[str(m["rank"])] = m["pid"]
            if len(ranks) == a.world:
                say("ranks", ranks=ranks, agent=p.pid)
            continue
        sys.stdout.write(line)
        sys.stdout.flush()
    p.wait()


def launcher(a):
    if a.torchrun:
        return torchrun_launcher(a)
    port = a.port or free_port()
    procs = []
    for rank in range(a.world):
        env = dict(os.environ)
        env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(a.world),
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        if a.torchrun_env:
            env.update({"LOCAL_WORLD_SIZE": str(a.world), "GROUP_RANK": "0",
                        "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(a.world),
                        "TORCHELASTIC_RUN_ID": "gpufeed-test-%d" % os.getpid(),
                        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0"})
        preexec = None
        if a.preexec_delay > 0:
            def preexec(d=a.preexec_delay):
                time.sleep(d)
        # The same command line for every rank, as srun runs one per task.
        procs.append(subprocess.Popen([sys.executable] + sys.orig_argv[1:], env=env, preexec_fn=preexec))
    say("ranks", ranks={str(r): p.pid for r, p in enumerate(procs)}, port=port)
    for p in procs:
        p.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=3)
    p.add_argument("--hang", type=int, default=-1)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--pause", type=float, default=0.02)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--slow", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=150)
    p.add_argument("--slow-how", choices=["cpu", "sleep", "data"], default="cpu")
    p.add_argument("--phases", type=parse_phases, default=[],
                   help="RANK:HOW,...: the straggler per phase (the first at the start; --control moves between them)")
    p.add_argument("--control", default="",
                   help="a file each rank reads before each round: a phase index (each rank says 'phase' on moving, "
                        "and 'rounds-done' with the phase after --rounds rounds in it), or 'pause' (no rounds)")
    p.add_argument("--simdev", default="", help="directory of gpufeed_simdev.py: each rank drives the simulated GPU")
    p.add_argument("--preexec-delay", type=float, default=0)
    p.add_argument("--torchrun-env", action="store_true", help="each rank gets the environment torchrun sets on one node")
    p.add_argument("--torchrun", action="store_true", help="start the ranks with torchrun itself")
    a = p.parse_args()
    if "RANK" in os.environ:
        rank_main(a)
    else:
        launcher(a)

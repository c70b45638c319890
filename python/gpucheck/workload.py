"""PyTorch workloads that really produce one bottleneck each, for
scripts/gpu-check.sh: the check runs each under `gpufeed diagnose` and
compares the verdict with `gpufeed trace` on the PyTorch profiler trace the
workload writes of its own steps (the ground truth).

    python3 workload.py MODE --seconds S [--ready FILE] [--trace FILE] [--device cuda|cpu]

It warms up (--warmup seconds of steps), writes its pid to --ready, runs
--seconds more, and profiles --profile-steps steps --profile-after seconds
in (torch.profiler, a Chrome trace to --trace).

MODE                 what it does (expected verdict)
launch               500 tiny kernels per step from one thread (submission-bound)
sync-spin            four medium kernels, loss.item(), 1 ms of CPU, per step,
                     with CUDA's default (spinning) synchronisation (sync-bound;
                     from outside the thread, spinning looks like launching)
sync-blocking        the same with blocking synchronisation: the primary
                     context's flags set to CU_CTX_SCHED_BLOCKING_SYNC through
                     the driver API before PyTorch creates it (sync-bound)
preprocess           num_workers=0: the training thread decompresses and
                     decodes each batch itself, then a short GPU step
                     (submission-bound: the launch thread is busy)
transfer             a 256 MiB pageable host tensor copied to the device per
                     step, then a small kernel (transfer-bound)
gpu                  large matmuls back to back, the loss read every 20 steps
                     (gpu-bound)

With --device cpu (PyTorch without CUDA) only `preprocess` can run: its
device step runs on the CPU, and the trace has no GPU activity.
"""
import argparse
import ctypes
import os
import sys
import time
import zlib

p = argparse.ArgumentParser()
p.add_argument("mode")
p.add_argument("--seconds", type=float, default=12)
p.add_argument("--trace", default="")
p.add_argument("--device", default="cuda")
p.add_argument("--ready", default="", help="write this file once warmed up (an observer attaches then)")
p.add_argument("--warmup", type=float, default=1.0, help="seconds of steps before --ready is written")
p.add_argument("--profile-after", type=float, default=3.0, help="seconds of steps after --ready before the profiled ones")
p.add_argument("--profile-steps", type=int, default=12)
a = p.parse_args()

MODES = ("launch", "sync-spin", "sync-blocking", "preprocess", "transfer", "gpu")
if a.mode not in MODES:
    sys.exit(f"workload.py: mode {a.mode!r}: want one of {', '.join(MODES)}")

if a.mode == "sync-blocking":
    # Before torch touches CUDA: the runtime uses the primary context, so
    # its flags decide how every synchronisation waits.
    cu = ctypes.CDLL("libcuda.so.1")
    if cu.cuInit(0) != 0:
        sys.exit("workload.py: cuInit failed")
    dev = ctypes.c_int()
    if cu.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        sys.exit("workload.py: cuDeviceGet failed")
    r = cu.cuDevicePrimaryCtxSetFlags_v2(dev, 0x04)  # CU_CTX_SCHED_BLOCKING_SYNC
    if r != 0:
        sys.exit(f"workload.py: cuDevicePrimaryCtxSetFlags_v2 returned {r}")

import torch  # noqa: E402

dev = torch.device(a.device)
if dev.type == "cuda" and not torch.cuda.is_available():
    sys.exit("workload.py: torch.cuda.is_available() is False")
if dev.type != "cuda" and a.mode != "preprocess":
    sys.exit(f"workload.py: {a.mode} needs a CUDA device")


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


# Each mode is a step function; state is built first.
if a.mode == "launch":
    x = torch.zeros(1, device=dev)

    def step():
        for _ in range(500):
            x.add_(1)
        sync()  # bound the queue: the step's time is the launches'

elif a.mode in ("sync-spin", "sync-blocking"):
    w = torch.randn(2048, 2048, device=dev)
    h = torch.randn(2048, 2048, device=dev)

    def step():
        global h
        for _ in range(4):
            h = torch.tanh(h @ w)
        loss = h.mean().item()  # the synchronisation
        t = time.perf_counter() + 0.001
        while time.perf_counter() < t:  # 1 ms of Python on the loss
            loss = loss * 0.999

elif a.mode == "preprocess":
    raw = zlib.compress(os.urandom(1 << 18) * 8, 6)
    w = torch.randn(512, 512, device=dev)

    def step():
        # The batch, decompressed and decoded by the training thread itself.
        buf = b"".join(zlib.decompress(raw) for _ in range(3))
        batch = torch.frombuffer(bytearray(buf[: 512 * 512 * 4]), dtype=torch.float32).view(512, 512)
        batch = torch.nan_to_num(batch, 0.0, 0.0, 0.0).clamp_(-1, 1).to(dev)
        y = batch @ w
        y.sum().item()

elif a.mode == "transfer":
    host = torch.ones(64 << 20, dtype=torch.float32)  # 256 MiB, pageable
    dst = torch.empty(64 << 20, dtype=torch.float32, device=dev)

    def step():
        dst.copy_(host)  # pageable: the copy blocks the thread
        dst.mul_(0.5)
        sync()

elif a.mode == "gpu":
    dt = torch.float16 if dev.type == "cuda" else torch.float32
    m1 = torch.randn(8192, 8192, device=dev, dtype=dt)
    m2 = torch.randn(8192, 8192, device=dev, dtype=dt)
    n = [0]

    def step():
        c = m1 @ m2
        n[0] += 1
        if n[0] % 20 == 0:
            c[0, 0].item()


def run_until(end):
    while time.monotonic() < end:
        step()


step()
sync()
run_until(time.monotonic() + a.warmup)
if a.ready:
    with open(a.ready, "w") as f:
        f.write(str(os.getpid()))
start = time.monotonic()
end = start + a.seconds
run_until(min(end, start + a.profile_after))
if a.trace and time.monotonic() < end:
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    n = a.profile_steps
    with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=n),
                 on_trace_ready=lambda pr: pr.export_chrome_trace(a.trace)) as prof:
        for _ in range(n + 1):
            step()
            prof.step()
    sync()
run_until(end)
sync()

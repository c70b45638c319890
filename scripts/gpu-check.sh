#!/usr/bin/env bash
# gpu-check.sh: run gpufeed diagnose against real work on a real NVIDIA GPU.
#
# For a machine with an NVIDIA driver, Go and python3 with a CUDA build of
# PyTorch. In one go (about 1-2 minutes, well under 5):
#   1. builds gpufeed;
#   2. diagnose (NVML) over a PyTorch matmul loop: expect high utilisation;
#   3. diagnose over bursts of tiny kernels separated by sleeps: expect low,
#      bursty utilisation;
#   4. prints a short table (GPU, driver, utilisation p10/p50/p90, SM clock,
#      power, throttle reasons) and whether each expectation held.
# Exit status: 0 when both expectations held, 1 when one did not, 2 when the
# machine lacks what the check needs. The raw JSON reports are kept in
# $GPU_CHECK_OUT (default: a temporary directory, printed at the end).
# Record what it printed, with the GPU and driver, in docs/NVML.md.
#
#   scripts/gpu-check.sh                    # defaults
#   GPU_CHECK_DURATION=20s scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'gpu-check: %s\n' "$*" >&2; exit 2; }

duration=${GPU_CHECK_DURATION:-10s}
case $duration in
*ms|*[!0-9s]*|'') die "GPU_CHECK_DURATION=$duration: want whole seconds such as 10s" ;;
esac
seconds=${duration%s}
# The workloads outlive the window by a margin (CUDA start-up, then the window).
run_for=$((seconds + 8))

command -v go >/dev/null || die "Go is not installed: it builds gpufeed"
command -v python3 >/dev/null || die "python3 is not installed: it runs the PyTorch workloads"
if ! { ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; } && ! command -v nvidia-smi >/dev/null; then
	die "no NVIDIA driver: libnvidia-ml.so.1 not found (this check needs a real NVIDIA GPU)"
fi
torch_status=0
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null || torch_status=$?
case $torch_status in
0) ;;
3) die "PyTorch is installed but sees no CUDA device (torch.cuda.is_available() is False)" ;;
*) die "PyTorch is not importable by python3 (pip install torch, a CUDA build)" ;;
esac

out=${GPU_CHECK_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$out"

printf 'gpu-check: building gpufeed\n' >&2
go build -o "$out/gpufeed" ./cmd/gpufeed 2>"$out/build.log" || { cat "$out/build.log" >&2; die "go build failed"; }

cat >"$out/matmul.py" <<'EOF'
# Large fp16 matmuls back to back: the GPU never waits for the CPU.
import sys, time, torch
run_for = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
end = time.monotonic() + run_for
while time.monotonic() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()  # bound the queue so the loop ends on time
EOF

cat >"$out/tiny.py" <<'EOF'
# Bursts of 200 tiny kernels, then a sync and a 20 ms sleep: the GPU is idle
# most of the time and busy in short bursts.
import sys, time, torch
run_for = float(sys.argv[1])
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
end = time.monotonic() + run_for
while time.monotonic() < end:
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()
    time.sleep(0.02)
EOF

for w in matmul tiny; do
	printf 'gpu-check: diagnose --duration %s over the %s workload\n' "$duration" "$w" >&2
	"$out/gpufeed" diagnose --device nvml --duration "$duration" --interval 100ms -o json \
		-- python3 "$out/$w.py" "$run_for" >"$out/$w.json" 2>"$out/$w.err" ||
		{ cat "$out/$w.err" >&2; die "gpufeed diagnose failed on the $w workload (above)"; }
done

if command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.max,pcie.link.width.max,power.limit \
		--format=csv >"$out/nvidia-smi.csv" 2>&1 || true
fi

python3 - "$out" <<'EOF'
import json, os, sys

out = sys.argv[1]
# Expectations, deliberately loose: they tell a working pipeline from a broken
# one, not a fast GPU from a slow one.
MATMUL_MIN_P50 = 80.0  # back-to-back 8k matmuls keep any datacenter GPU busy
TINY_MAX_P50 = 50.0    # 200 tiny kernels per ~20 ms sleep leave it mostly idle

def fmt(v, unit="", digits=0):
    if v is None:
        return "-"
    return f"{v:.{digits}f}{unit}"

rows, verdicts = [], []
for name in ("matmul", "tiny"):
    with open(os.path.join(out, name + ".json")) as f:
        rep = json.load(f)
    source = rep.get("gpu_source", "?")
    gpus = [g for g in rep.get("gpus", []) if not g.get("lost")]
    busiest = max(gpus, key=lambda g: g.get("util_p50") or -1, default=None)
    if busiest is None:
        rows.append((name, "-", source, "no GPU samples", "", "", "", ""))
        verdicts.append((name, False, "no GPU samples in the report"))
        continue
    g = busiest
    p10, p50, p90 = g.get("util_p10"), g.get("util_p50"), g.get("util_p90")
    rows.append((
        name,
        f'{g.get("index", "?")}: {g.get("name", "?")}',
        source,
        f"{fmt(p10)}/{fmt(p50)}/{fmt(p90)} %",
        f'{fmt(g.get("sm_clock_mhz_p50"))} (min {fmt(g.get("sm_clock_mhz_min"))}, max {fmt(g.get("max_sm_clock_mhz"))}) MHz',
        f'{fmt(g.get("power_w_p50"))} / {fmt(g.get("power_limit_w"))} W',
        f'{g.get("clock_event_reasons", 0):#x}',
        ",".join(g.get("unsupported") or []) or "-",
    ))
    if name == "matmul":
        ok = p50 is not None and p50 >= MATMUL_MIN_P50
        verdicts.append((name, ok, f"utilisation p50 {fmt(p50)} %, expected >= {MATMUL_MIN_P50:.0f} %"))
    else:
        ok = p50 is not None and p50 <= TINY_MAX_P50
        verdicts.append((name, ok, f"utilisation p50 {fmt(p50)} %, expected <= {TINY_MAX_P50:.0f} % (p10-p90 spread {fmt(None if p10 is None or p90 is None else p90 - p10)} points)"))

head = ("workload", "GPU", "source (driver)", "util p10/p50/p90", "SM clock p50", "power p50/limit", "clock events", "unsupported")
widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
for r in [head] + rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
print()
failed = False
for name, ok, why in verdicts:
    print(f"{'ok' if ok else 'UNEXPECTED':10s} {name}: {why}")
    failed |= not ok
smi = os.path.join(out, "nvidia-smi.csv")
if os.path.exists(smi):
    print()
    print(open(smi).read().rstrip())
print()
print(f"reports: {out}/matmul.json {out}/tiny.json")
sys.exit(1 if failed else 0)
EOF

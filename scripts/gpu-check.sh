#!/usr/bin/env bash
# gpu-check.sh: gpufeed's check on a real NVIDIA GPU, prepared so that its
# first run on a GPU host is not its first run (docs/GPU.md).
#
# For a host with an NVIDIA GPU, its driver and python3 with a CUDA build of
# PyTorch, and nothing else: no Go, perf, strace or network. Build and carry
# the bundle from a machine with Go:
#
#   scripts/gpu-check.sh --bundle gpu-check.tgz    # here: gpufeed + this script + python/gpucheck
#   tar xzf gpu-check.tgz && cd gpu-check && sudo ./scripts/gpu-check.sh --out results
#
# In at most 8 minutes (its own limit, GPU_CHECK_BUDGET seconds, default 480;
# every step has its own timeout), it writes under the output directory:
#   facts.txt            the host, the GPU, the driver, PyTorch, gpufeed
#   nvml/                gpufeed's NVML readings over a busy GPU against nvidia-smi's
#   drills/              gpufeed drill jitter, copy, cow (and syscalls) on libcuda.so.1
#   workloads/MODE/      each PyTorch workload (launch-bound, sync-bound with spinning
#                        and with blocking synchronisation, main-thread preprocessing,
#                        pageable transfers, GPU-bound) under gpufeed diagnose --profile
#                        auto, and gpufeed trace on its own PyTorch profiler trace
#   verdicts.txt         diagnose's verdict against the trace's (the ground truth)
#   uprobe.txt           whether a uprobe on libcuda.so.1's cuLaunchKernel attaches and fires
#   steps.tsv            every step: status, seconds, note; summary.txt: all of it
#
# --dry-run (or GPU_CHECK_DRY_RUN=1) runs the whole script here on gpufeed's
# simulated GPU (gpufeed simdev and the simulated driver) and Debian's CPU
# build of PyTorch, skipping with the reason what needs CUDA.
# GPU_CHECK_QUICK=1 shortens every step (the test suite's run).
#
# Exit status: 0 every step ran (or was skipped with a reason) and every
# comparison agreed; 1 a step failed or a comparison differed; 2 the host
# lacks what the check needs.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

die() { printf 'gpu-check: %s\n' "$*" >&2; exit 2; }

dry=${GPU_CHECK_DRY_RUN:-0}
quick=${GPU_CHECK_QUICK:-0}
out=${GPU_CHECK_OUT:-}
bundle=""
while [ $# -gt 0 ]; do
	case $1 in
	--dry-run) dry=1 ;;
	--quick) quick=1 ;;
	--out) out=${2:?--out needs a directory}; shift ;;
	--bundle) bundle=${2:?--bundle needs a file name}; shift ;;
	-h|--help) sed -n '2,34p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (want --dry-run, --quick, --out DIR or --bundle FILE)" ;;
	esac
	shift
done

if [ -n "$bundle" ]; then
	command -v go >/dev/null || die "--bundle builds gpufeed: Go is needed here"
	tmp=$(mktemp -d)
	mkdir -p "$tmp/gpu-check/scripts" "$tmp/gpu-check/python"
	(cd "$here" && CGO_ENABLED=1 go build -o "$tmp/gpu-check/gpufeed" ./cmd/gpufeed) || die "go build failed"
	cp "$here/scripts/gpu-check.sh" "$tmp/gpu-check/scripts/"
	cp -r "$here/python/gpucheck" "$tmp/gpu-check/python/"
	case $bundle in /*) ;; *) bundle=$PWD/$bundle ;; esac
	tar czf "$bundle" -C "$tmp" gpu-check && rm -rf "$tmp"
	printf 'gpu-check: %s holds gpufeed, scripts/gpu-check.sh and python/gpucheck\n' "$bundle"
	exit 0
fi

budget=${GPU_CHECK_BUDGET:-480}
t0=$SECONDS
left() { echo $((budget - (SECONDS - t0))); }

# The binary: $GPUFEED, the bundle's, a checkout's; built here only when Go is.
gf=${GPUFEED:-}
for c in "$here/gpufeed" "$here/bin/gpufeed"; do
	[ -z "$gf" ] && [ -x "$c" ] && gf=$c
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
if [ -z "$gf" ]; then
	command -v go >/dev/null || die "no gpufeed binary (GPUFEED, ./gpufeed) and no Go to build one: build the bundle elsewhere (--bundle)"
	printf 'gpu-check: building gpufeed\n' >&2
	(cd "$here" && go build -o "$out/gpufeed" ./cmd/gpufeed) >"$out/build.log" 2>&1 || die "go build failed: $out/build.log"
	gf=$out/gpufeed
fi
py=${PYTHON:-python3}
[ "$dry" = 1 ] && [ -z "${PYTHON:-}" ] && [ -x /usr/bin/python3 ] && py=/usr/bin/python3
command -v "$py" >/dev/null || die "$py is not installed: it runs the PyTorch workloads"
pyd=$here/python/gpucheck
[ -f "$pyd/workload.py" ] || die "$pyd/workload.py is missing: carry python/gpucheck with the script"

# What this host has.
has_gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
torch_cuda=0
torch_ok=1
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' >/dev/null 2>&1
case $? in 0) torch_cuda=1 ;; 3) ;; *) torch_ok=0 ;; esac
if [ "$dry" != 1 ]; then
	[ "$has_gpu" = 1 ] || die "no NVIDIA GPU here (nvidia-smi -L fails): --dry-run rehearses the check on gpufeed's simulated GPU"
	[ "$torch_ok" = 1 ] || die "PyTorch is not importable by $py (PYTHON=... names another interpreter)"
	[ "$torch_cuda" = 1 ] || die "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
fi

if [ "$quick" = 1 ]; then win=2; wl=5; cow_items=200000; reps=2; else win=10; wl=16; cow_items=1000000; reps=5; fi

printf 'step\tstatus\tseconds\tnote\n' >"$out/steps.tsv"
failed=0
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$out/steps.tsv"; printf 'gpu-check: %-28s %-8s %3ss %s\n' "$1" "$2" "$3" "$4" >&2; }
skip() { record "$1" skipped 0 "$2"; }
# step NAME LIMIT OUTFILE CMD...: CMD under timeout (LIMIT, or what is left
# of the budget), its stdout to OUTFILE and stderr to OUTFILE.err.
step() {
	local name=$1 limit=$2 file=$3
	shift 3
	local rest
	rest=$(($(left) - 5))
	if [ "$rest" -lt 5 ]; then
		skip "$name" "the check's $budget s budget is spent"
		return 1
	fi
	[ "$limit" -gt "$rest" ] && limit=$rest
	local s=$SECONDS st=0
	timeout --kill-after=5 "$limit" "$@" >"$file" 2>"$file.err" || st=$?
	local took=$((SECONDS - s))
	if [ "$st" = 124 ] || [ "$st" = 137 ]; then
		record "$name" timeout "$took" "killed after $limit s: $file.err"
		failed=1
		return 1
	elif [ "$st" != 0 ]; then
		record "$name" failed "$took" "exit $st: $(tail -c 300 "$file.err" | tr '\n\t' '  ')"
		failed=1
		return 1
	fi
	record "$name" ok "$took" "$file"
	return 0
}

# The simulated GPU of a dry run: one gpufeed simdev process.
sim_pid=""
cleanup() {
	[ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null
	jobs -p | xargs -r kill 2>/dev/null
}
trap cleanup EXIT
driver=cuda
device=nvml
if [ "$dry" = 1 ]; then
	sock=$out/sim.sock
	"$gf" simdev --socket "$sock" >"$out/simdev.log" 2>&1 &
	sim_pid=$!
	for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
	[ -S "$sock" ] || die "gpufeed simdev did not start: $out/simdev.log"
	driver=sim:$sock
	device=sim:$sock
fi

# facts
{
	printf 'date: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'mode: %s\n' "$([ "$dry" = 1 ] && echo "dry run on gpufeed's simulated GPU" || echo "real GPU")"
	printf 'host: %s\n' "$(uname -srm)"
	printf 'cpu: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	printf 'gpufeed: %s\n' "$("$gf" --version 2>&1)"
	printf 'python: %s\n' "$("$py" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
	printf 'torch: %s\n' "$("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1)"
	if [ "$has_gpu" = 1 ]; then
		nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max,power.limit --format=csv 2>&1
	else
		echo "nvidia-smi: none"
	fi
	printf 'diagnose --profile: %s\n' "$("$gf" diagnose --help 2>&1 | grep -q -- '--profile' && echo available || echo 'not in this build')"
} >"$out/facts.txt"
record facts ok 0 "$out/facts.txt"
profile=()
"$gf" diagnose --help 2>&1 | grep -q -- '--profile' && profile=(--profile auto)

# 1. NVML against nvidia-smi, over a busy GPU.
mkdir -p "$out/nvml"
if [ "$has_gpu" = 1 ] && [ "$torch_cuda" = 1 ]; then
	rm -f "$out/nvml/ready"
	"$py" "$pyd/workload.py" gpu --seconds $((win + 6)) --ready "$out/nvml/ready" >"$out/nvml/workload.log" 2>&1 &
	wpid=$!
	for _ in $(seq 300); do [ -f "$out/nvml/ready" ] && break; sleep 0.1; done
	nvidia-smi --query-gpu=name,utilization.gpu,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv -lms 200 >"$out/nvml/smi.csv" 2>&1 &
	smi=$!
	step nvml-diagnose $((win + 30)) "$out/nvml/diagnose.json" "$gf" diagnose --device nvml --pid "$wpid" --duration "${win}s" -o json
	kill "$smi" 2>/dev/null
	wait "$wpid" 2>/dev/null
	step nvml-compare 20 "$out/nvml/compare.out" "$py" "$pyd/compare.py" nvml "$out/nvml/diagnose.json" "$out/nvml/smi.csv" "$out/nvml/compare"
else
	skip nvml-compare "no NVIDIA GPU here: NVML and nvidia-smi cannot be compared"
fi

# 2. The drills, on libcuda.so.1 (the simulated driver in a dry run).
mkdir -p "$out/drills"
# Each drill runs once: its table to DRILL.txt, the same result as JSON to
# DRILL.json (--json). It ran twice before (JSON, then text), which spent
# the device's time on the same experiment again.
drill_step() {
	local name=$1 limit=$2
	shift 2
	step "drill-$name" "$limit" "$out/drills/$name.txt" "$gf" drill "$name" "$@" --json "$out/drills/$name.json"
}
drill_step jitter 90 --driver "$driver" --reps "$reps"
drill_step copy 90 --driver "$driver" --reps "$reps"
drill_step cow 120 --python "$py" --items "$cow_items" -v
# The syscalls drill counts with eBPF: where this build or this kernel
# cannot, it says why (exit 3), recorded as a skip with its reason.
# --quick counts for the short window (2 s) instead of the drill's 5 s.
sc_dur=()
[ "$quick" = 1 ] && sc_dur=(--duration "${win}s")
if "$gf" drill syscalls --python "$py" "${sc_dur[@]}" -v --json "$out/drills/syscalls.json" >"$out/drills/syscalls.txt" 2>&1; then
	record drill-syscalls ok 0 "$out/drills/syscalls.json"
else
	rm -f "$out/drills/syscalls.json"
	skip drill-syscalls "$(tail -1 "$out/drills/syscalls.txt")"
fi

# 3. The PyTorch workloads under gpufeed diagnose, against their own traces.
# diagnose attaches (--pid) once the workload is warm: a window that began
# with the interpreter's start-up and CUDA's initialisation would judge them
# too. GPU_CHECK_LAUNCH=1 runs diagnose -- COMMAND instead.
for w in launch sync-spin sync-blocking preprocess transfer gpu; do
	wd=$out/workloads/$w
	mkdir -p "$wd"
	dev=cuda
	wdevice=$device
	if [ "$torch_cuda" != 1 ]; then
		if [ "$w" != preprocess ] || [ "$torch_ok" != 1 ]; then
			reason="PyTorch has no CUDA here (torch.cuda.is_available() is False): the $w workload needs a GPU"
			[ "$torch_ok" = 1 ] || reason="PyTorch is not importable by $py"
			echo "$reason" >"$wd/skipped.txt"
			skip "workload-$w" "$reason"
			continue
		fi
		dev=cpu # its device step runs on the CPU; no GPU is in view
		wdevice=none
	fi
	args=("$pyd/workload.py" "$w" --device "$dev" --trace "$wd/trace.json" --profile-after $((win / 3)))
	if [ "${GPU_CHECK_LAUNCH:-0}" = 1 ]; then
		step "workload-$w" $((wl + 40)) "$wd/diagnose.json" "$gf" diagnose --device "$wdevice" "${profile[@]}" --duration "${win}s" -o json \
			--record "$wd/diagnose.gpufeed" --cmd-output "$wd/workload.log" -- "$py" "${args[@]}" --seconds "$wl"
	else
		rm -f "$wd/ready"
		"$py" "${args[@]}" --seconds "$wl" --ready "$wd/ready" >"$wd/workload.log" 2>&1 &
		wpid=$!
		for _ in $(seq 600); do { [ -f "$wd/ready" ] || ! kill -0 "$wpid" 2>/dev/null; } && break; sleep 0.1; done
		if [ -f "$wd/ready" ]; then
			step "workload-$w" $((win + 30)) "$wd/diagnose.json" "$gf" diagnose --device "$wdevice" "${profile[@]}" --pid "$wpid" --duration "${win}s" -o json \
				--record "$wd/diagnose.gpufeed"
		else
			record "workload-$w" failed 0 "the workload ended before it was warm: $(tail -c 300 "$wd/workload.log" | tr '\n\t' '  ')"
			failed=1
		fi
		wait "$wpid" 2>/dev/null
	fi
	[ -f "$wd/diagnose.gpufeed" ] && "$gf" report -v "$wd/diagnose.gpufeed" >"$wd/diagnose.txt" 2>&1
	if [ -f "$wd/trace.json" ]; then
		step "trace-$w" 60 "$wd/trace-report.json" "$gf" trace -o json "$wd/trace.json"
		"$gf" trace "$wd/trace.json" >"$wd/trace-report.txt" 2>&1
	else
		record "trace-$w" failed 0 "the workload wrote no profiler trace: $wd/workload.log"
		failed=1
	fi
done
"$py" "$pyd/compare.py" verdicts "$out" >/dev/null 2>"$out/verdicts.err" || failed=1
record verdicts ok 0 "$out/verdicts.txt"

# 4. Do uprobes on the CUDA driver attach here (what gpufeed's driver
# probes need)? A counting uprobe on cuLaunchKernel, over a launch loop.
if [ "$dry" = 1 ]; then
	lib=$("$py" -c 'import json, re, sys; print(re.search(r"(/\S+libgpufeed-simcuda\.so)", json.load(open(sys.argv[1]))["backend"]).group(1))' "$out/drills/copy.json" 2>/dev/null)
	probe_cmd=("$gf" drill jitter --driver "$driver" --kernels 200 --reps 1 -o json)
else
	lib=$("$py" -c 'import ctypes; ctypes.CDLL("libcuda.so.1"); print(next(l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l))' 2>/dev/null)
	probe_cmd=("$py" "$pyd/workload.py" launch --seconds 2 --warmup 0.2)
fi
if [ -n "$lib" ]; then
	step uprobe 150 "$out/uprobe.out" "$py" "$pyd/compare.py" uprobe "$lib" "$out/uprobe" -- "${probe_cmd[@]}"
else
	skip uprobe "the CUDA driver library could not be found"
fi

{
	cat "$out/facts.txt"
	for f in nvml/compare.txt drills/jitter.txt drills/copy.txt drills/cow.txt drills/syscalls.txt verdicts.txt uprobe.txt; do
		[ -f "$out/$f" ] && { printf '\n== %s\n' "$f"; cat "$out/$f"; }
	done
	printf '\n== steps (%s s of %s)\n' "$((SECONDS - t0))" "$budget"
	cat "$out/steps.tsv"
} >"$out/summary.txt"
printf 'gpu-check: %s s; results in %s (summary.txt)\n' "$((SECONDS - t0))" "$out" >&2
exit $failed

#!/usr/bin/env bash
# The agent's budget (docs/PERFORMANCE.md): gpufeed agent at its default
# settings (1 s samples, 1-minute windows, a 10-minute ring) watching 8 GPU
# processes of 200 threads each on simulated GPUs, for DURATION seconds
# (default 660: the ring is full for the last minute). Each process drives
# its GPU like a training loop (twenty 1 ms kernels, a synchronise, 5 ms
# of CPU) with 199 more threads asleep (DataLoader pools, intra-op pools,
# NCCL helpers). Prints the agent's peak and final RSS, its CPU share over
# the measured span (after a one-minute warm-up), and the ring's size.
#
#   scripts/bench-agent.sh [DURATION_SECONDS] [PROCESSES] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-660}
PROCS=${2:-8}
THREADS=${3:-200}
WARMUP=60
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

dir=$(mktemp -d /tmp/gpufeed-bench-agent.XXXXXX)
pids=()
cleanup() {
	# The agent and the jobs first, the device they use last.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
save_log() { [ -n "${AGENT_LOG:-}" ] && cp "$dir/agent.err" "$AGENT_LOG" || true; }

go build -o "$dir/gpufeed" ./cmd/gpufeed
go build -o "$dir/gpufeed-agent" ./cmd/gpufeed-agent
# AGENT=gpufeed measures "gpufeed agent" in the full binary instead.
agent_cmd=("$dir/gpufeed-agent")
[ "${AGENT:-}" = gpufeed ] && agent_cmd=("$dir/gpufeed" agent)
"$dir/gpufeed" simdev --socket "$dir/gpu.sock" --devices "$PROCS" 2>"$dir/simdev.err" &
pids+=($!)
for _ in $(seq 50); do [ -S "$dir/gpu.sock" ] && break; sleep 0.1; done

cat >"$dir/job.py" <<'PY'
import sys, threading, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect(device=int(sys.argv[2]))
stop = threading.Event()
for _ in range(int(sys.argv[3]) - 1):
    threading.Thread(target=stop.wait, daemon=True).start()
while True:
    for _ in range(20):
        dev.launch(1000)
    dev.synchronize()
    t = time.perf_counter()
    while time.perf_counter() - t < 0.005:
        pass
PY
cp python/gpufeed_simdev.py "$dir/"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
for i in $(seq 0 $((PROCS - 1))); do
	GPUFEED_SIMDEV="$dir/gpu.sock" "$py" "$dir/job.py" "$dir" "$i" "$THREADS" 2>>"$dir/jobs.err" &
	pids+=($!)
done
sleep 2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${agent_cmd[@]}" ${AGENT_ARGS:-} --device "sim:$dir/gpu.sock" --listen "127.0.0.1:$port" ${PROFILE:+--cpu-profile "$PROFILE"} 2>"$dir/agent.err" &
agent=$!
pids+=($agent)
clk=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$agent/stat"; }
sleep "$WARMUP"
c0=$(cpu); t0=$(date +%s.%N)
sleep $((DURATION - WARMUP))
c1=$(cpu); t1=$(date +%s.%N)
metrics=$(curl -s "127.0.0.1:$port/metrics")
jobs=$(printf '%s\n' "$metrics" | awk '/^gpufeed_jobs\{state="watched"\}/ {print $2}')
threads=$(for p in "${pids[@]:1:$PROCS}"; do ls "/proc/$p/task" | wc -l; done | paste -sd+ | bc)
ring=$(printf '%s\n' "$metrics" | awk '/^gpufeed_job_ring_bytes/ {s += $2} END {printf "%.1f", s / 1048576}')
ringsec=$(printf '%s\n' "$metrics" | awk '/^gpufeed_job_ring_seconds/ {if ($2 > m) m = $2} END {printf "%.0f", m}')
hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$agent/status")
rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$agent/status")
anon=$(awk '/RssAnon/ {printf "%.1f", $2 / 1024}' "/proc/$agent/status")
file=$(awk '/RssFile/ {printf "%.1f", $2 / 1024}' "/proc/$agent/status")
heap=$(printf '%s\n' "$metrics" | awk '/^go_memstats_heap_inuse_bytes/ {printf "%.1f", $2 / 1048576}')
share=$(echo "scale=3; ($c1 - $c0) / $clk * 100 / ($t1 - $t0)" | bc)
echo "${agent_cmd[*]##*/} at default settings, ${DURATION} s, ${jobs} jobs watched, ${threads} threads in them"
echo "  RSS peak ${hwm} MiB, at the end ${rss} MiB (anonymous ${anon}, file ${file}; Go heap in use ${heap}); ring ${ring} MiB compressed, covering ${ringsec} s per job"
echo "  CPU ${share} % of one core over the last $((DURATION - WARMUP)) s"
echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
kill -INT "$agent"; wait "$agent" 2>/dev/null || true
save_log

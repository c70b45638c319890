#!/usr/bin/env bash
# Benchmark `gpufeed trace` against Holistic Trace Analysis (HTA) on the same
# generated Kineto trace, and check that their idle breakdowns agree.
#
#   scripts/bench-trace.sh HTA_CHECKOUT [SIZE...]
#
# HTA_CHECKOUT is a checkout of github.com/facebookresearch/HolisticTraceAnalysis
# kept outside this repository (for example /work/hta). HTA runs with Debian's
# Python and its packages:
#   apt-get install -y python3-pandas python3-numpy python3-plotly \
#                      python3-networkx python3-psutil python3-yaml
# SIZE is one or more trace sizes (default: 1GB). STEPS (default 10) is the
# number of ProfilerSteps each trace holds, as a profiler schedule records a
# few steps: HTA's cost grows with rows x steps (it looks up each event's
# step in a Python loop over all steps), so STEPS=0 (as many short steps as
# fit) makes HTA much slower. HTA is skipped, with a note, for sizes above
# HTA_MAX_BYTES (default: no limit) or when it fails.
#
# For each size the script generates a trace (cmd/tracegen, all gap causes
# mixed, whole-microsecond timestamps so HTA's float rounding changes
# nothing), then runs both tools under /usr/bin/time -v and prints wall time,
# CPU time and peak RSS, and the idle-breakdown comparison. Results go to
# stdout; intermediate files to a temporary directory that is removed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
	echo "usage: $0 HTA_CHECKOUT [SIZE...]" >&2
	exit 2
fi
hta=$(cd "$1" && pwd)
shift
sizes=("${@:-1GB}")
[ -f "$hta/hta/trace_analysis.py" ] || { echo "$hta: not an HTA checkout" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install -y time)" >&2; exit 2; }
/usr/bin/python3 -c 'import pandas, numpy, plotly, networkx, psutil, yaml' 2>/dev/null ||
	{ echo "Debian python3 packages missing: apt-get install -y python3-pandas python3-numpy python3-plotly python3-networkx python3-psutil python3-yaml" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gpufeed" ./cmd/gpufeed
go build -o "$work/tracegen" ./cmd/tracegen

# measure NAME OUT CMD...: run CMD under /usr/bin/time -v, stdout to OUT.
measure() {
	local name=$1 out=$2
	shift 2
	if ! /usr/bin/time -v -o "$work/$name.time" "$@" >"$out" 2>"$work/$name.err"; then
		echo "  $name failed: $(tail -3 "$work/$name.err" | tr '\n' ' ')"
		return 1
	fi
	local wall user sys rss
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/$name.time")
	user=$(awk -F': ' '/User time/ {print $2}' "$work/$name.time")
	sys=$(awk -F': ' '/System time/ {print $2}' "$work/$name.time")
	rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/$name.time")
	printf '  %-8s wall %9s  user %8ss  sys %7ss  cpu %8ss  peak RSS %8.1f MiB\n' "$name" "$wall" "$user" "$sys" \
		"$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc -l)"
	echo "$wall $user $sys $rss" >"$work/$name.nums"
}

seconds() { # h:mm:ss.ss or m:ss.ss -> seconds
	echo "$1" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }'
}

echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "go: $(go version | cut -d' ' -f3), python: $(/usr/bin/python3 --version 2>&1), pandas $(/usr/bin/python3 -c 'import pandas; print(pandas.__version__)'), HTA $(git -C "$hta" rev-parse --short HEAD 2>/dev/null || echo '?')"

for size in "${sizes[@]}"; do
	dir="$work/trace-$size"
	mkdir -p "$dir"
	"$work/tracegen" -pattern mixed -size "$size" -steps "${STEPS:-10}" -rank 0 -o "$dir/rank-0.json" 2>"$work/gen.txt"
	bytes=$(stat -c %s "$dir/rank-0.json")
	echo
	echo "== trace $size: $bytes bytes, $(grep -o '[0-9]* steps, [0-9]* events' "$work/gen.txt")"
	measure gpufeed "$work/gpufeed.json" "$work/gpufeed" trace -o json "$dir" || continue
	read -r gwall _ _ grss <"$work/gpufeed.nums"
	gs=$(seconds "$gwall")
	printf '  gpufeed: %.0f MB/s end to end, peak RSS %.2f of the trace size\n' \
		"$(echo "$bytes / $gs / 1000000" | bc -l)" "$(echo "$grss * 1024 / $bytes" | bc -l)"
	if [ -n "${HTA_MAX_BYTES:-}" ] && [ "$bytes" -gt "$HTA_MAX_BYTES" ]; then
		echo "  hta: skipped (trace larger than HTA_MAX_BYTES=$HTA_MAX_BYTES)"
		continue
	fi
	measure hta "$work/hta.json" env PYTHONPATH="$hta" /usr/bin/python3 scripts/hta-reference.py "$dir" || continue
	read -r hwall huser hsys hrss <"$work/hta.nums"
	read -r _ guser gsys _ <"$work/gpufeed.nums"
	hs=$(seconds "$hwall")
	printf '  gpufeed vs hta: %.1fx faster (wall), %.1fx less CPU time, %.1fx less peak memory\n' \
		"$(echo "$hs / $gs" | bc -l)" "$(echo "($huser + $hsys) / ($guser + $gsys)" | bc -l)" "$(echo "$hrss / $grss" | bc -l)"
	/usr/bin/python3 - "$work/gpufeed.json" "$work/hta.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["reports"][0]
h = json.load(open(sys.argv[2]))["ranks"]["0"]
bad = 0
for s in g["idle_time_breakdown"]:
    want = h["idle_us"][str(s["stream"])]
    for ours, theirs in (("host_wait_ns", "host_wait"), ("kernel_wait_ns", "kernel_wait"), ("other_ns", "other")):
        a, b = s.get(ours, 0) / 1000, want.get(theirs, 0.0)
        if abs(a - b) > 1e-6:
            bad += 1
            print(f"  MISMATCH stream {s['stream']} {theirs}: gpufeed {a:.3f} us, hta {b:.3f} us")
t, ht = g["temporal_breakdown"], h["temporal_us"]
for ours, theirs in (("idle_ns", "idle"), ("compute_ns", "compute"), ("non_compute_ns", "non_compute"), ("span_ns", "span")):
    if t[ours] // 1000 != ht[theirs]:
        bad += 1
        print(f"  MISMATCH temporal {theirs}: gpufeed {t[ours] // 1000} us, hta {ht[theirs]} us")
streams = ", ".join(f"stream {s['stream']}: host_wait {s.get('host_wait_ns', 0)/1e6:.3f} ms, kernel_wait {s.get('kernel_wait_ns', 0)/1e6:.3f} ms, other {s.get('other_ns', 0)/1e6:.3f} ms" for s in g["idle_time_breakdown"])
print(f"  idle breakdown {'AGREES' if bad == 0 else 'DIFFERS'}: {streams}; temporal idle {t['idle_ns']/1e6:.3f} ms of {t['span_ns']/1e6:.3f} ms")
sys.exit(1 if bad else 0)
EOF
done

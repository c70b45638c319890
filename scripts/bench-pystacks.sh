#!/usr/bin/env bash
# Measure what sampling a Python target's stacks costs the target, side by
# side: two identical targets run at once, and in each window gpufeed
# diagnose --py-stacks samples one of them (at the default rate) while the
# other runs alone; the sampled one's throughput over the other's, in the
# same window, cancels the load that other work puts on a shared machine.
# The sampled target alternates between windows, so a difference between
# the two targets themselves cancels too. Also gpufeed's own CPU per window
# and the Python sampling rate it achieved.
#
#   scripts/bench-pystacks.sh [PYTHON] [SECONDS] [WINDOWS]
#     (defaults: Debian's /usr/bin/python3, 10 s windows, 6 windows)
#
# Each target (scripts/bench/pytarget.py) runs one busy thread 30 frames
# deep and 8 idle threads and prints its iterations each second.
#
# Each sampled window is followed by a control window of the same length in
# which nothing watches either target: the same ratio taken there is what
# the two targets differ by with no observer at all, so the spread of the
# control ratios is the smallest difference this run can resolve on this
# machine at this load (printed beside the sampled ones, with the load
# average at the start and the end).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-/usr/bin/python3}
SECS=${2:-10}
WINDOWS=${3:-6}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/gpufeed" ./cmd/gpufeed
for t in a b; do
	"$PY" -u scripts/bench/pytarget.py >"$work/rate.$t" 2>&1 &
	pids+=($!)
done
pid_a=${pids[0]} pid_b=${pids[1]}
sleep 3 # imports, threads started

mean() { # FILE FROM TO: mean of the reports FROM..TO
	sed -n "$2,$3p" "$1" | awk '{s+=$1; n++} END {if (n) printf "%.0f\n", s/n; else print 0}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$work/ratio"; : >"$work/cpu"; : >"$work/hz"; : >"$work/control"
for i in $(seq "$WINDOWS"); do
	if [ $((i % 2)) = 1 ]; then on=a off=b target=$pid_a; else on=b off=a target=$pid_b; fi
	( /usr/bin/time -f "%U %S" -o "$work/time.$i" "$work/gpufeed" diagnose --pid "$target" --device none --py-stacks \
		--duration "$((SECS + 2))s" -o json >"$work/report.$i.json" 2>/dev/null || true ) &
	gp=$!
	sleep 1 # start-up: opening the target, the first discovery
	from_on=$(($(wc -l <"$work/rate.$on") + 2)) from_off=$(($(wc -l <"$work/rate.$off") + 2))
	sleep "$SECS"
	to_on=$(wc -l <"$work/rate.$on") to_off=$(wc -l <"$work/rate.$off")
	wait "$gp"
	s=$(mean "$work/rate.$on" "$from_on" "$to_on") u=$(mean "$work/rate.$off" "$from_off" "$to_off")
	awk -v a="$s" -v b="$u" 'BEGIN {printf "%.4f\n", (b>0)? a/b : 0}' >>"$work/ratio"
	awk '{printf "%.3f\n", $1+$2}' "$work/time.$i" >>"$work/cpu"
	python3 - "$work/report.$i.json" >>"$work/hz" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
hz = "nan"
for f in r.get("findings", []):
    if f["id"] == "python-time":
        for e in f["evidence"]:
            if e.get("what") == "sampled thread":
                hz = e["window"].split(" at ")[1].split(" Hz")[0]
print(hz)
PY
	echo "window $i: sampled target $s it/s, the other $u it/s" >&2
	# the control window: the same two targets, the same roles, no observer
	from_on=$(($(wc -l <"$work/rate.$on") + 2)) from_off=$(($(wc -l <"$work/rate.$off") + 2))
	sleep "$SECS"
	to_on=$(wc -l <"$work/rate.$on") to_off=$(wc -l <"$work/rate.$off")
	s=$(mean "$work/rate.$on" "$from_on" "$to_on") u=$(mean "$work/rate.$off" "$from_off" "$to_off")
	awk -v a="$s" -v b="$u" 'BEGIN {printf "%.4f\n", (b>0)? a/b : 0}' >>"$work/control"
	echo "control $i: the same target unwatched $s it/s, the other $u it/s" >&2
done
echo "python: $("$PY" -V 2>&1), ${WINDOWS} windows of ${SECS} s, two targets side by side, each window followed by a control window"
echo "host: $(nproc) CPUs, load average (1/5/15 min) $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "sampled / unsampled throughput, median of windows: $(median <"$work/ratio") (all: $(paste -sd' ' "$work/ratio"))"
echo "the same ratio unwatched (control), median:        $(median <"$work/control") (all: $(paste -sd' ' "$work/control"))"
echo "gpufeed CPU per window (s), median:                $(median <"$work/cpu") (whole diagnose run, /proc sampling included, over $((SECS + 2)) s)"
echo "python sampling rate achieved (Hz), median:        $(median <"$work/hz")"

#!/usr/bin/env bash
# Measure what sampling a Python target's stacks costs the target: its
# throughput (iterations of a pure-Python loop per second) while gpufeed
# diagnose --py-stacks samples it at the default rate, against the same
# target left alone, alternating so that load from elsewhere lands on both
# sides; and gpufeed's own CPU for the window.
#
#   scripts/bench-pystacks.sh [PYTHON] [SECONDS] [PAIRS]
#     (defaults: Debian's /usr/bin/python3, 10 s windows, 5 pairs)
#
# The target (scripts/bench/pytarget.py) runs one busy thread 30 frames
# deep and 8 idle threads. Each pair measures one window without and one
# with sampling; the medians of each side and of their ratio are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-/usr/bin/python3}
SECS=${2:-10}
PAIRS=${3:-5}
work=$(mktemp -d)
tp=""
cleanup() { [ -n "$tp" ] && kill "$tp" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/gpufeed" ./cmd/gpufeed
"$PY" -u scripts/bench/pytarget.py >"$work/rate" 2>&1 &
tp=$!
sleep 3 # imports, threads started

# mean iterations per second over the next SECS reports
window() { # -> prints the mean of the reports that arrive in SECS seconds
	local before after
	before=$(wc -l <"$work/rate")
	sleep "$SECS"
	after=$(wc -l <"$work/rate")
	sed -n "$((before + 2)),$((after))p" "$work/rate" | awk '{s+=$1; n++} END {if (n) printf "%.0f\n", s/n; else print 0}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

: >"$work/off"; : >"$work/on"; : >"$work/ratio"; : >"$work/cpu"; : >"$work/hz"
for i in $(seq "$PAIRS"); do
	off=$(window)
	( /usr/bin/time -f "%U %S" -o "$work/time.$i" "$work/gpufeed" diagnose --pid "$tp" --device none --py-stacks \
		--duration "$((SECS + 1))s" -o json >"$work/report.$i.json" 2>/dev/null || true ) &
	gp=$!
	sleep 1 # start-up: opening the target, the first discovery
	on=$(window)
	wait "$gp"
	echo "$off" >>"$work/off"; echo "$on" >>"$work/on"
	awk -v a="$on" -v b="$off" 'BEGIN {printf "%.4f\n", (b>0)? a/b : 0}' >>"$work/ratio"
	awk '{printf "%.3f\n", $1+$2}' "$work/time.$i" >>"$work/cpu"
	python3 - "$work/report.$i.json" >>"$work/hz" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r.get("findings", []):
    if f["id"] == "python-time":
        for e in f["evidence"]:
            if e.get("what") == "sampled thread":
                print(e["window"].split(" at ")[1].split(" Hz")[0]); break
        break
else:
    print("nan")
PY
	echo "pair $i: alone $off it/s, sampled $on it/s" >&2
done
echo "python: $("$PY" -V 2>&1), window ${SECS} s, ${PAIRS} pairs"
echo "target alone, median it/s:        $(median <"$work/off")"
echo "target sampled, median it/s:      $(median <"$work/on")"
echo "sampled / alone, median of pairs: $(median <"$work/ratio")"
echo "gpufeed CPU per window (s):       $(median <"$work/cpu") (whole diagnose run: /proc sampling too)"
echo "python sampling rate (Hz):        $(median <"$work/hz")"

#!/usr/bin/env bash
# Measure what -o html costs: the file's size and the time to write it, for
# a live recording and for generated Kineto traces, beside the text report.
#
#   scripts/bench-html.sh RECORDING [TRACE_SIZE...]
#
# RECORDING is a gpufeed recording (diagnose or demo --record; a 10-minute
# one is what docs/PERFORMANCE.md reports): the script times `gpufeed report`
# with -o text and with -o html, three times each, and prints the difference
# (the HTML renderer's time) and the page's size. Each TRACE_SIZE (default
# 100MB) generates a Kineto trace (cmd/tracegen, all gap causes mixed) and
# does the same for `gpufeed trace`. Intermediate files go to a temporary
# directory that is removed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
	echo "usage: $0 RECORDING [TRACE_SIZE...]" >&2
	exit 2
fi
rec=$1
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100MB)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gpufeed" ./cmd/gpufeed
go build -o "$work/tracegen" ./cmd/tracegen

# best3 OUT CMD... prints the least wall time of three runs, in seconds,
# the output going to OUT.
best3() {
	local out=$1 best=""
	shift
	for _ in 1 2 3; do
		local s e
		s=$(date +%s.%N)
		"$@" >"$out" 2>/dev/null || true
		e=$(date +%s.%N)
		best=$(echo "$s $e $best" | awk '{d=$2-$1; if ($3=="" || d<$3) print d; else print $3}')
	done
	echo "$best"
}

measure() { # NAME CMD...
	local name=$1
	shift
	local plain with size
	plain=$(best3 "$work/out.txt" "$@" -o text)
	with=$(best3 "$work/out.html" "$@" -o html)
	size=$(stat -c %s "$work/out.html")
	printf '%-28s -o text %.2f s, -o html %.2f s: the page took %.2f s and is %.2f MiB (%d bytes, %d of them uPlot and its licence)\n' \
		"$name" "$plain" "$with" "$(echo "$with $plain" | awk '{print $1-$2}')" "$(echo "$size" | awk '{print $1/1048576}')" "$size" \
		"$(cat internal/render/htmlassets/uPlot.iife.min.js internal/render/htmlassets/uPlot.min.css internal/render/htmlassets/LICENSE.uPlot | wc -c)"
}

measure "recording $(basename "$rec")" "$work/gpufeed" report "$rec"
for size in "${sizes[@]}"; do
	"$work/tracegen" -pattern mixed -size "$size" -rank 0 -o "$work/trace.json" 2>/dev/null
	measure "trace $size ($(du -h "$work/trace.json" | cut -f1))" "$work/gpufeed" trace "$work/trace.json"
done

#!/usr/bin/env bash
# Measure what --perfetto costs: the file's size and the time to write it,
# for a live recording and for generated Kineto traces.
#
#   scripts/bench-perfetto.sh RECORDING [TRACE_SIZE...]
#
# RECORDING is a gpufeed recording (diagnose or demo --record; a 10-minute
# one is what docs/PERFORMANCE.md reports): the script times `gpufeed report`
# with and without --perfetto, three times each, and prints the difference
# (the Perfetto renderer's time) and the file's size. Each TRACE_SIZE
# (default 100MB) generates a Kineto trace (cmd/tracegen, all gap causes
# mixed) and does the same for `gpufeed trace`. Intermediate files go to a
# temporary directory that is removed.
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

# best3 CMD... prints the least wall time of three runs, in seconds.
best3() {
	local best=""
	for _ in 1 2 3; do
		local s e
		s=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		e=$(date +%s.%N)
		best=$(echo "$s $e $best" | awk '{d=$2-$1; if ($3=="" || d<$3) print d; else print $3}')
	done
	echo "$best"
}

measure() { # NAME CMD...
	local name=$1
	shift
	local plain with size
	plain=$(best3 "$@")
	with=$(best3 "$@" --perfetto "$work/out.pftrace")
	size=$(stat -c %s "$work/out.pftrace")
	printf '%-28s report %.2f s, with --perfetto %.2f s: the timeline took %.2f s and is %.1f MiB\n' \
		"$name" "$plain" "$with" "$(echo "$with $plain" | awk '{print $1-$2}')" "$(echo "$size" | awk '{print $1/1048576}')"
	"$@" --perfetto "$work/out.pftrace" 2>&1 >/dev/null | grep 'Perfetto' || true
}

measure "recording $(basename "$rec")" "$work/gpufeed" report "$rec"
for size in "${sizes[@]}"; do
	"$work/tracegen" -pattern mixed -size "$size" -rank 0 -o "$work/trace.json" 2>/dev/null
	measure "trace $size ($(du -h "$work/trace.json" | cut -f1))" "$work/gpufeed" trace "$work/trace.json"
done

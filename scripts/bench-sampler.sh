#!/usr/bin/env bash
# Measure the sampler's CPU cost per thread-sample against the floor,
# pidstat and top, on one machine and one target, in one go.
#
#   scripts/bench-sampler.sh [THREADS] [ROUNDS]     (defaults: 500 threads, 200 rounds)
#
# Everything reads the same target: a C process with THREADS threads, all idle
# (blocked in pause) for the per-thread comparisons. The 1,000-thread check
# uses a second target with 16 active threads (0.2 ms of work every 2 ms).
# CPU time is user+system of each tool's own process (bash `time` for the
# external tools; getrusage inside gpufeed), never wall time, so other load
# on the machine changes the numbers less than it changes wall clocks.
# Needs gcc and go; installs sysstat (pidstat) with apt-get when root, and
# skips a tool it cannot find.
#
# Then the scheduling sources side by side (diagnose --sched bpf and
# --sched proc, defaults otherwise, then --profile off too) on jobs of 100,
# 1,000 and 10,000 threads with 16 active, and what tracing the scheduler
# costs a context-switch-heavy job (scripts/bench/pingpong.c) against
# perf sched record and runqlat (Debian: linux-perf; libbpf-tools' runqlat,
# compiled once against BTF, else bpfcc-tools' runqlat-bpfcc, which compiles
# against the kernel's headers; libbpf-tools is installed when root).
# SKIP_PER_THREAD=1 skips the per-thread comparisons before them,
# SKIP_SOURCES=1 the 1,000-thread default run and the sources' table (each cell the median of
# REPEAT_SOURCES runs, default 3),
# SKIP_PINGPONG=1 the job's cost (the ping-pong, about 6 minutes) and what follows it, SKIP_STATS=1 the
# programs' own time per run (kernel statistics: watched, unwatched, runqlat's). Results vary run to run on a shared machine:
# compare ratios within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-500}
ROUNDS=${2:-200}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

need() { command -v "$1" >/dev/null 2>&1; }
if ! need pidstat && [ "$(id -u)" = 0 ] && need apt-get; then
	apt-get install -y sysstat >/dev/null 2>&1 || true
fi
if [ "${SKIP_PINGPONG:-0}" != 1 ] && ! [ -x /usr/sbin/runqlat ] && [ "$(id -u)" = 0 ] && need apt-get; then
	apt-get install -y libbpf-tools >/dev/null 2>&1 || true
fi
need gcc || { echo "gcc not found: cannot build the floor and the target" >&2; exit 1; }

gcc -O2 -o "$work/floor" scripts/bench/floor.c
gcc -O2 -pthread -o "$work/target" scripts/bench/target.c
gcc -O2 -pthread -o "$work/pingpong" scripts/bench/pingpong.c
go build -o "$work/gpufeed" ./cmd/gpufeed
go test -c -o "$work/sample.test" ./internal/sample
go test -c -o "$work/schedbpf.test" ./internal/schedbpf

REPEAT=${REPEAT:-5}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

start_target() { # THREADS ACTIVE -> sets TARGET (not in a subshell: cleanup must see the pid)
	"$work/target" "$1" "$2" >"$work/target.$1.$2" 2>/dev/null &
	TARGET=$!
	pids+=("$TARGET")
	for _ in $(seq 50); do [ -s "$work/target.$1.$2" ] && break; sleep 0.1; done
}

# cpu_s CMD...: user+system seconds the command used.
cpu_s() {
	local t
	t=$( { TIMEFORMAT='%3U %3S'; time "$@" >/dev/null 2>&1; } 2>&1 | tail -1)
	awk '{printf "%.3f", $1 + $2}' <<<"$t"
}
per_sample() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.2f", c * 1e6 / n }'; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), Linux $(uname -r)"
if [ "${SKIP_PER_THREAD:-0}" != 1 ]; then
echo "target: $THREADS idle threads; $ROUNDS rounds"
start_target "$THREADS" 0
pid=$TARGET
sleep 0.5

# The floor and gpufeed's benchmarks alternate, REPEAT times; the medians
# are reported, so a burst of load from elsewhere does not land on one side.
metric() { awk -v b="$1" -v m="$2" '$1 ~ b { for (i = 2; i < NF; i++) if ($(i+1) == m) print $i }' <<<"$3"; }
floors=() hots=() gofloors=() fasts=() slows=()
for _ in $(seq "$REPEAT"); do
	floors+=("$("$work/floor" "$pid" "$ROUNDS" | awk '{print $8}')")
	bench=$(GPUFEED_BENCH_PID=$pid "$work/sample.test" -test.run XXX -test.bench 'ThreadPath|Floor|FastTick|SlowTick' \
		-test.benchtime "${ROUNDS}x" 2>&1)
	hots+=("$(metric BenchmarkThreadPath cpu-us/thread-sample "$bench")")
	gofloors+=("$(metric BenchmarkFloor cpu-us/thread-sample "$bench")")
	fasts+=("$(metric BenchmarkFastTick cpu-us/thread-sample "$bench")")
	slows+=("$(metric BenchmarkSlowTick cpu-us/thread-sample "$bench")")
done
floor=$(printf '%s\n' "${floors[@]}" | median)
hot=$(printf '%s\n' "${hots[@]}" | median)
gofloor=$(printf '%s\n' "${gofloors[@]}" | median)
fast=$(printf '%s\n' "${fasts[@]}" | median)
slow=$(printf '%s\n' "${slows[@]}" | median)
echo "floor runs: ${floors[*]}; hot path runs: ${hots[*]}; Go floor runs: ${gofloors[*]}"

# gpufeed end to end at pidstat's 1 s interval and at its own 100 ms default.
diag() { # INTERVAL DURATION -> "cpu_percent us_per_thread_sample"
	"$work/gpufeed" diagnose --pid "$pid" --device none --interval "$1" --duration "$2" -o json |
		python3 -c 'import json,sys; o=json.load(sys.stdin)["observer"]; print("%.2f %.2f" % (o["cpu_of_one_core_percent"], o["per_thread_sample_ns"] / 1e3))'
}
read -r _ diag1s <<<"$(diag 1s 20s)" # 20 intervals: the least diagnose judges
read -r _ diag100 <<<"$(diag 100ms 10s)"

pidstat_us="-"
if need pidstat; then
	n=10
	c=$(cpu_s pidstat -t -w -p "$pid" 1 "$n")
	pidstat_us=$(per_sample "$c" $(( (n + 1) * THREADS )))
fi
top_us="-"
if need top; then
	n=50
	c=$(cpu_s top -H -b -d 0.2 -n "$n" -p "$pid")
	top_us=$(per_sample "$c" $(( n * THREADS )))
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
printf '\n%-58s %12s %10s\n' "CPU microseconds per thread-sample" "us" "x floor"
printf '%-58s %12s %10s\n' "floor (C: pread stat+schedstat on kept fds, no parsing)" "$floor" "1.00"
printf '%-58s %12s %10s\n' "gpufeed hot path (stat+schedstat, parsed)" "$hot" "$(ratio "$hot" "$floor")"
printf '%-58s %12s %10s\n' "floor in Go (same loop, raw pread; BenchmarkFloor)" "$gofloor" "$(ratio "$gofloor" "$floor")"
printf '%-58s %12s %10s\n' "gpufeed fast tick (idle threads: schedstat only)" "$fast" "$(ratio "$fast" "$floor")"
printf '%-58s %12s %10s\n' "gpufeed slow tick (status, blocked details, host files)" "$slow" "$(ratio "$slow" "$floor")"
printf '%-58s %12s %10s\n' "gpufeed diagnose end to end, 1 s interval" "$diag1s" "$(ratio "$diag1s" "$floor")"
printf '%-58s %12s %10s\n' "gpufeed diagnose end to end, 100 ms interval" "$diag100" "$(ratio "$diag100" "$floor")"
printf '%-58s %12s %10s\n' "pidstat -t -w -p PID 1 (1 s interval)" "$pidstat_us" "$(ratio "$pidstat_us" "$floor")"
printf '%-58s %12s %10s\n' "top -H -b -d 0.2 -p PID" "$top_us" "$(ratio "$top_us" "$floor")"
echo
echo "hot path / C floor: $(ratio "$hot" "$floor")x; hot path / Go floor: $(ratio "$hot" "$gofloor")x"
echo "pidstat / gpufeed diagnose (1 s): $(ratio "$pidstat_us" "$diag1s")x; top / gpufeed diagnose (100 ms): $(ratio "$top_us" "$diag100")x"

fi

if [ "${SKIP_SOURCES:-0}" != 1 ]; then
# The default-settings budget: a 1,000-thread job, 16 threads active.
[ -n "${pid:-}" ] && kill "$pid"
start_target 1000 16
big=$TARGET
sleep 0.5
out=$( { TIMEFORMAT='%3U %3S'; time "$work/gpufeed" diagnose --pid "$big" --device none -o json >"$work/big.json"; } 2>&1 | tail -1)
ext=$(awk '{printf "%.1f", ($1 + $2) / 10 * 100}' <<<"$out")
own=$(python3 -c 'import json; o=json.load(open("'"$work/big.json"'"))["observer"]; print("%.1f %% of one core (%.2f us per thread-sample, %d thread-samples, tick p50 %.2f ms)" % (o["cpu_of_one_core_percent"], o["per_thread_sample_ns"] / 1e3, o["thread_samples"], o["tick_p50_ns"] / 1e6))')
echo "1,000-thread job (16 active), defaults (100 ms, 10 s): gpufeed's own CPU $own; whole process including start-up: $ext % of one core"
kill "$big"

# The scheduling sources side by side: the same jobs (N threads, 16 active)
# watched at default settings (100 ms, 10 s, --profile auto) from the
# scheduler's events and from /proc, then with --profile off (the sampler
# alone). gpufeed's own CPU, from its getrusage (observer).
own_pct() { # JSON -> "cpu_percent us_per_thread_sample sched"
	python3 -c 'import json,sys; o=json.load(sys.stdin)["observer"]; print("%.2f %.2f %s" % (o["cpu_of_one_core_percent"], o["per_thread_sample_ns"] / 1e3, o.get("sched", "-")))'
}
printf '\n%-44s %8s %8s %8s %8s\n' "gpufeed's own CPU, % of one core (us/sample)" "100" "1,000" "10,000" "source"
declare -A cell
for n in 100 1000 10000; do
	start_target "$n" 16
	job=$TARGET
	sleep 1
	# Each cell is the median of REPEAT_SOURCES runs (default 3), the
	# configurations alternated: one run's noise on a shared machine is
	# as large as the differences measured.
	declare -A runs=()
	for _ in $(seq "${REPEAT_SOURCES:-3}"); do
		for prof in auto off; do
			for src in bpf proc; do
				r=$("$work/gpufeed" diagnose --pid "$job" --device none --sched "$src" --profile "$prof" -o json 2>/dev/null | own_pct || echo "- - -")
				read -r pc us got <<<"$r"
				runs[$prof.$src]+="$pc $us"$'\n'
				cell[$prof.$src.got]=$got
			done
		done
	done
	for prof in auto off; do
		for src in bpf proc; do
			cell[$prof.$src.$n]=$(sort -g <<<"${runs[$prof.$src]%$'\n'}" | awk '{ p[NR] = $1; u[NR] = $2 } END { m = int((NR + 1) / 2); printf "%s (%s)", p[m], u[m] }')
		done
	done
	kill "$job"
done
for prof in auto off; do
	for src in bpf proc; do
		printf '%-44s %8s %8s %8s %8s\n' "--sched $src --profile $prof" "${cell[$prof.$src.100]}" "${cell[$prof.$src.1000]}" "${cell[$prof.$src.10000]}" "${cell[$prof.$src.got]}"
	done
done

fi

# What tracing the scheduler costs the traced job: a two-thread pipe
# ping-pong (every round trip two wake-ups and two switches), both threads
# on one CPU (taskset), alone, under the programs alone (schedbpf.test
# holding them, reading every 100 ms: "events", the programs on every
# switch and wake-up, schedbpf's per-event mode; "counters", the kernel's
# counters read by the task iterator with the wake-up program attached one
# reading in ten, what --sched bpf uses), under gpufeed diagnose with either
# source, and under the anchors: perf sched record and runqlat. The cost is
# the job's own CPU per round trip (the programs run in its switches and
# wake-ups, so they are charged to it): other load on a shared machine moves
# it far less than the round trips per second, which are shown too.
# Alternated REPEAT times; medians.
[ "${SKIP_PINGPONG:-0}" = 1 ] && exit 0
PP_SECS=${PP_SECS:-5}
PP_CPU=${PP_CPU:-$(( $(nproc) - 1 ))}
# Each tracer gets PP_DELAY seconds to attach before the job counts (bcc
# compiles runqlat's program first: seconds).
PP_DELAY=${PP_DELAY:-6}
pp() { # KIND : runs pingpong under KIND, prints "round_trips/s cpu_ns/round_trip"
	local out="$work/pp.out"
	taskset -c "$PP_CPU" "$work/pingpong" "$PP_SECS" "$PP_DELAY" >"$out" &
	local p=$!
	for _ in $(seq 50); do [ -s "$out" ] && break; sleep 0.02; done
	local job
	job=$(head -1 "$out")
	case "$1" in
	none) ;;
	events|counters) GPUFEED_SCHEDBPF_MODE=$1 GPUFEED_SCHEDBPF_HOLD="$job,$((PP_SECS + PP_DELAY + 1))" "$work/schedbpf.test" >/dev/null 2>&1 & ;;
	bpf|proc) "$work/gpufeed" diagnose --pid "$job" --device none --profile off --sched "$1" --duration "$((PP_SECS + PP_DELAY + 1))s" -o json >/dev/null 2>&1 & ;;
	perf) perf sched record -a -o "$work/perf.data" -- sleep "$((PP_SECS + PP_DELAY + 1))" >/dev/null 2>&1 & ;;
	runqlat) "$runqlat" -p "$job" "$((PP_SECS + PP_DELAY + 1))" 1 >/dev/null 2>&1 & ;;
	esac
	local w=$!
	wait "$p"
	tail -1 "$out"
	[ "$1" = none ] || { kill "$w" 2>/dev/null; wait "$w" 2>/dev/null; } || true
	rm -f "$work/perf.data"
}
declare -A rts cpus
kinds="none events counters bpf proc"
need perf && kinds="$kinds perf"
# runqlat: libbpf-tools' (its program compiled once, relocated against the
# kernel's BTF: /sys/kernel/btf/vmlinux) where installed, else bcc's, which
# compiles its program against the running kernel's headers. Where neither
# can run (bcc without headers, as on these machines' kernel), its row would
# be the job alone, so it is left out, saying why.
runqlat_ok=0 runqlat=""
for r in /usr/sbin/runqlat runqlat-bpfcc; do
	need "$r" || continue
	if timeout 120 "$r" 1 1 >/dev/null 2>"$work/runqlat.err"; then
		runqlat_ok=1 runqlat=$r
		kinds="$kinds runqlat"
		printf 'runqlat: %s\n' "$r"
		break
	fi
	printf '%s cannot run here: %s\n' "$r" "$(grep -m1 -iE 'headers|error|exception|fail' "$work/runqlat.err" || echo "exit status $?")"
done
for _ in $(seq "$REPEAT"); do
	for k in $kinds; do
		read -r rt cpu <<<"$(pp "$k")"
		rts[$k]="${rts[$k]:-} $rt"
		cpus[$k]="${cpus[$k]:-} $cpu"
	done
done
base=$(printf '%s\n' ${cpus[none]} | median)
printf '\nping-pong on CPU %s, %s s, median of %s\n' "$PP_CPU" "$PP_SECS" "$REPEAT"
printf '%-10s %16s %8s %14s  %s\n' "" "CPU ns/round trip" "added" "round trips/s" "runs (CPU ns/round trip)"
for k in $kinds; do
	m=$(printf '%s\n' ${cpus[$k]} | median)
	r=$(printf '%s\n' ${rts[$k]} | median)
	printf '%-10s %16s %7s%% %14s  %s\n' "$k" "$m" "$(awk -v b="$base" -v m="$m" 'BEGIN { printf "%.1f", (m - b) / b * 100 }')" "$r" "${cpus[$k]}"
done

# The programs' own time per run, from the kernel's statistics (the holder
# turns them on while it holds: they add about 50 ns a run), on the same
# pinned ping-pong: the job watched; the job not watched (the holder watches
# a sleep: what every task of the host pays, the bitmap tests); and, where
# runqlat runs, its programs on the job beside an unwatching holder
# (printed as peer programs). SKIP_STATS=1 skips it.
[ "${SKIP_STATS:-0}" = 1 ] && exit 0
stats() { # KIND: watched, unwatched or runqlat
	local out="$work/pp.out"
	taskset -c "$PP_CPU" "$work/pingpong" "$PP_SECS" "$PP_DELAY" >"$out" &
	local p=$!
	for _ in $(seq 50); do [ -s "$out" ] && break; sleep 0.02; done
	local job target other="" rq=""
	job=$(head -1 "$out")
	target=$job
	if [ "$1" != watched ]; then
		sleep $((PP_SECS + PP_DELAY + 5)) &
		other=$!
		target=$other
	fi
	GPUFEED_SCHEDBPF_STATS=1 GPUFEED_SCHEDBPF_HOLD="$target,$((PP_SECS + PP_DELAY))" "$work/schedbpf.test" >"$work/stats.out" 2>&1 &
	local h=$!
	if [ "$1" = runqlat ]; then
		"$runqlat" -p "$job" "$((PP_SECS + PP_DELAY + 1))" 1 >/dev/null 2>&1 &
		rq=$!
	fi
	wait "$p"
	wait "$h" || true
	[ -z "$rq" ] || { kill "$rq" 2>/dev/null; wait "$rq" 2>/dev/null || true; }
	[ -z "$other" ] || { kill "$other" 2>/dev/null; wait "$other" 2>/dev/null || true; }
	printf '%s (round trips/s, CPU ns/round trip: %s)\n' "$1" "$(tail -1 "$out")"
	grep -E 'ns a run' "$work/stats.out" | sed 's/^/  /'
}
printf '\nthe programs'"'"' own time per run (kernel statistics), ping-pong on CPU %s\n' "$PP_CPU"
stats watched
stats unwatched
if [ "$runqlat_ok" = 1 ]; then stats runqlat; fi

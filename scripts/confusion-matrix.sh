#!/usr/bin/env bash
# Confusion matrix of gpufeed's verdicts over the built-in scenarios: runs
# every scenario (gpufeed demo NAME) RUNS times, one at a time, and prints
# which verdict each run got, per expected class, with the mean confidence;
# "demo passed" counts the runs whose class and required findings were right
# (gpufeed demo exited 0). docs/RULES.md holds measured matrices.
#
#   scripts/confusion-matrix.sh [--launch] [--duration D] [--sync MODE] [RUNS] [SCENARIO...]
#
# By default each scenario is observed once it is working, as diagnose --pid
# attaches to a running job; --launch observes it from its start, as
# diagnose -- COMMAND does. --duration sets the window (default 10s).
# --sync sets how the workloads' CUDA waits behave on the simulated driver
# (spin, yield, block or auto: GPUFEED_SIMDEV_SYNC) for the scenarios that
# do not set it themselves (sync-bound blocks, sync-bound-spin spins).
# Needs Go and python3. Exits 1 when any run did not pass.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=attach
demo_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--launch) mode=launch; demo_args+=(--launch); shift ;;
	--duration) demo_args+=(--duration "$2"); shift 2 ;;
	--sync) export GPUFEED_SIMDEV_SYNC=$2; shift 2 ;;
	*) break ;;
	esac
done
runs=${1:-5}
shift || true
bin=$(mktemp -d)/gpufeed
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/gpufeed
if [ $# -gt 0 ]; then
	scenarios=("$@")
else
	mapfile -t scenarios < <("$bin" demo --list | awk 'NR > 1 {print $1}')
fi
results=$(mktemp)
trap 'rm -rf "$(dirname "$bin")" "$results"' EXIT
echo "gpufeed confusion matrix ($mode mode${demo_args[*]:+, ${demo_args[*]}}, waits ${GPUFEED_SIMDEV_SYNC:-auto}): ${#scenarios[@]} scenarios x $runs runs on $(hostname) ($(nproc) CPUs, Linux $(uname -r)), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for s in "${scenarios[@]}"; do
	for i in $(seq "$runs"); do
		code=0
		json=$("$bin" demo "${demo_args[@]}" "$s" -o json 2>/dev/null) || code=$?
		printf '%s\n' "$json" | python3 -c '
import json, sys
scenario, code = sys.argv[1], sys.argv[2]
try:
    r = json.load(sys.stdin)
    v = r["verdict"]
    print(scenario, v["class"], v["confidence_percent"] / 100, code)
    if code != "0":  # say why in the log (stderr), not in the rows
        print("  %s: %s %s" % (scenario, v.get("summary", ""), v.get("missing", "")), file=sys.stderr)
except Exception as e:
    print(scenario, "error", 0, code)
' "$s" "$code" >>"$results"
		tail -n 1 "$results" >&2
	done
done
python3 - "$results" "$bin" <<'PY'
import collections, json, re, subprocess, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
expected = {}
for line in subprocess.run([sys.argv[2], "demo", "--list"], capture_output=True, text=True).stdout.splitlines()[1:]:
    # a name may carry a note in parentheses: "submission-bound (default, was launch-bound)"
    f = re.sub(r"^(\S+)\s+\([^)]*\)", r"\1", line).split()
    expected[f[0]] = f[1]
classes = ["submission-bound", "sync-bound", "preprocessing-bound", "storage-bound", "transfer-bound",
           "too-little-work", "gpu-bound", "stalled", "idle", "inconclusive", "error"]
short = {"submission-bound": "subm", "sync-bound": "sync", "preprocessing-bound": "prep", "storage-bound": "stor",
         "transfer-bound": "xfer", "too-little-work": "tlw", "gpu-bound": "gpu", "stalled": "stall", "idle": "idle",
         "inconclusive": "inc", "error": "err"}
count = collections.defaultdict(collections.Counter)
conf = collections.defaultdict(list)
passed = collections.Counter()
order = []
for s, c, p, code in rows:
    if s not in order:
        order.append(s)
    count[s][c] += 1
    conf[s].append(float(p))
    passed[s] += code == "0"
print("| scenario (expected) | " + " | ".join(short[c] for c in classes) + " | class right | demo passed | mean confidence |")
print("|---|" + "---|" * len(classes) + "---|---|---|")
missed = 0
for s in order:
    exp = expected.get(s, "?")
    n = sum(count[s].values())
    ok = count[s][exp]
    missed += n - passed[s]
    cells = [str(count[s][c]) if count[s][c] else "." for c in classes]
    print(f"| {s} ({exp}) | " + " | ".join(cells) + f" | {ok}/{n} | {passed[s]}/{n} | {sum(conf[s]) / len(conf[s]):.2f} |")
sys.exit(1 if missed else 0)
PY

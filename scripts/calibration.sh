#!/usr/bin/env bash
# Calibration of gpufeed's stated confidence: runs every built-in scenario
# (gpufeed demo NAME, attached to the running workload as diagnose --pid
# does, with the probes where the host allows: --profile auto) RUNS times
# at each window in WINDOWS, one run at a time, and prints
#
#   1. per scenario and window: the verdicts, how many were right (the demo
#      passed: the class the scenario expects, or the one it accepts on a
#      crowded host, and its required findings), and the stated confidence;
#   2. per stated-confidence band, over all runs: how often the verdict was
#      right (a stated 90 % must be right at least 9 times in 10);
#   3. per scenario and verdict: how far the mean confidence moved between
#      the shortest and the longest window (at most 15 points).
#
#   scripts/calibration.sh [--launch] [--windows "3s 5s 10s"] [RUNS] [SCENARIO...]
#
# An inconclusive verdict states 0 % and names no class: it is counted
# apart, neither right nor wrong about a class. docs/RULES.md holds a
# measured table. Needs Go and python3. Exits 1 when a band or a scenario
# breaks either rule.
set -euo pipefail
cd "$(dirname "$0")/.."
windows="3s 5s 10s"
demo_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--launch) demo_args+=(--launch); shift ;;
	--windows) windows=$2; shift 2 ;;
	*) break ;;
	esac
done
runs=${1:-3}
shift || true
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=$dir/gpufeed
go build -o "$bin" ./cmd/gpufeed
if [ $# -gt 0 ]; then
	scenarios=("$@")
else
	mapfile -t scenarios < <("$bin" demo --list | awk 'NR > 1 {print $1}')
fi
results=$dir/results
echo "gpufeed calibration (${demo_args[*]:-attach}, windows $windows, probes auto as $(id -un)): ${#scenarios[@]} scenarios x $runs runs on $(hostname) ($(nproc) CPUs, Linux $(uname -r)), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for s in "${scenarios[@]}"; do
	for w in $windows; do
		for i in $(seq "$runs"); do
			code=0
			json=$("$bin" demo "${demo_args[@]}" "$s" --duration "$w" -o json 2>"$dir/stderr") || code=$?
			printf '%s\n' "$json" | python3 -c '
import json, sys
scenario, window, code = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(sys.stdin)
    v = r["verdict"]
    probed = any((r.get(k) or {}).get("state") == "on" for k in ("cpu_profile", "driver_calls"))
    print(scenario, window, v["class"], v["confidence_percent"] / 100, code, int(probed))
except Exception:
    print(scenario, window, "error", 0, code, 0)
' "$s" "$w" "$code" >>"$results"
			tail -n 1 "$results" >&2
			[ "$code" = 0 ] || sed -n '$p' "$dir/stderr" >&2
		done
	done
done
cp "$results" "${CALIBRATION_RESULTS:-/dev/null}" 2>/dev/null || true
python3 - "$results" "$windows" <<'PY'
import collections, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
windows = sys.argv[2].split()
# scenario, window, class, confidence, exit code (0: right), probed
by = collections.defaultdict(list)
order = []
for s, w, c, p, code, probed in rows:
    if s not in order:
        order.append(s)
    by[(s, w)].append((c, float(p), code == "0", probed == "1"))
print("| scenario | window | verdicts (runs) | right | stated confidence (mean, min-max) |")
print("|---|---|---|---|---|")
for s in order:
    for w in windows:
        r = by[(s, w)]
        if not r:
            continue
        verdicts = collections.Counter(c for c, _, _, _ in r)
        confs = [p for c, p, _, _ in r if c != "inconclusive"]
        right = sum(ok for _, _, ok, _ in r)
        conf = f"{100 * sum(confs) / len(confs):.0f} % ({100 * min(confs):.0f}-{100 * max(confs):.0f})" if confs else "- (inconclusive: 0 %)"
        print(f"| {s} | {w} | " + ", ".join(f"{c} {n}" for c, n in verdicts.most_common()) + f" | {right}/{len(r)} | {conf} |")
print()
bands = [(0.9, 1.01, 0.9), (0.8, 0.9, 0.8), (0.6, 0.8, 0.6), (0.34, 0.6, 0.34), (0.01, 0.34, 0.01)]
print("| stated confidence | runs | right | rate | rule |")
print("|---|---|---|---|---|")
bad = False
for lo, hi, need in bands:
    r = [(p, ok) for (s, w), v in by.items() for c, p, ok, _ in v if c != "inconclusive" and lo <= p < hi]
    if not r:
        continue
    right = sum(ok for _, ok in r)
    rate = right / len(r)
    holds = rate >= need
    bad |= not holds
    print(f"| {100 * lo:.0f}-{min(100, 100 * hi):.0f} % | {len(r)} | {right} | {100 * rate:.0f} % | {'holds' if holds else 'BROKEN'}: at least {100 * need:.0f} % |")
inc = [ok for v in by.values() for c, _, ok, _ in v if c == "inconclusive"]
if inc:
    print(f"| inconclusive (0 %) | {len(inc)} | {sum(inc)} accepted by the scenario | - | names no class |")
print()
print("| scenario | verdict | mean confidence at " + " / ".join(windows) + " | moved | rule |")
print("|---|---|---|---|---|")
for s in order:
    classes = collections.Counter(c for w in windows for c, _, _, _ in by[(s, w)] if c != "inconclusive")
    for c, _ in classes.most_common():
        means = []
        for w in windows:
            ps = [p for cc, p, _, _ in by[(s, w)] if cc == c]
            means.append(sum(ps) / len(ps) if ps else None)
        have = [m for m in means if m is not None]
        if len(have) < 2:
            continue
        moved = 100 * (max(have) - min(have))
        holds = round(moved) <= 15
        bad |= not holds
        cells = " / ".join(f"{100 * m:.0f} %" if m is not None else "-" for m in means)
        print(f"| {s} | {c} | {cells} | {moved:.0f} points | {'holds' if holds else 'BROKEN'}: at most 15 |")
sys.exit(1 if bad else 0)
PY

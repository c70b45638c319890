#!/bin/sh
# Inside an allocation: one gpufeed check per node, and a diagnose of each
# node's GPU processes, side by side in one directory (one task per node).
#
#   srun --ntasks-per-node=1 --overlap deploy/slurm/collect.sh [DIR] [SECONDS]
#
# --overlap lets it run beside the job's own steps. Each node writes
# DIR/HOST.check.txt and .check.json, DIR/HOST.PID.diagnose.txt and the
# window's recording DIR/HOST.PID.gpufeed (DIR on a shared filesystem;
# default ./gpufeed-$SLURM_JOB_ID). Then, from any node:
#
#   gpufeed compare DIR/*.check.json     # what differs between the nodes
#   gpufeed compare DIR/*.gpufeed        # the straggler, who died first
dir=${1:-./gpufeed-${SLURM_JOB_ID:-job}}
secs=${2:-20}
host=$(hostname -s)
mkdir -p "$dir"
timeout 60 gpufeed check >"$dir/$host.check.txt" 2>&1
timeout 60 gpufeed check -o json >"$dir/$host.check.json" 2>/dev/null
# The job's GPU processes on this node, as the node's agent knows them by
# their slurm_job_id; without an agent, name them in GPUFEED_PIDS.
pids=$(timeout 5 curl -fsS "${GPUFEED_AGENT:-http://127.0.0.1:9847}/pids?slurm_job_id=${SLURM_JOB_ID:-none}" 2>/dev/null)
for pid in $pids ${GPUFEED_PIDS:-}; do
	timeout $((secs + 60)) gpufeed diagnose --pid "$pid" --duration "${secs}s" --record "$dir/$host.$pid.gpufeed" \
		>"$dir/$host.$pid.diagnose.txt" 2>&1
done
exit 0

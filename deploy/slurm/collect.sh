#!/bin/sh
# Inside an allocation: one gpufeed check per node, and a diagnose of each
# node's GPU processes, side by side in one directory (one task per node).
#
#   srun --ntasks-per-node=1 --overlap deploy/slurm/collect.sh [DIR] [SECONDS]
#
# --overlap lets it run beside the job's own steps. Each node writes
# DIR/HOST.check.txt and DIR/HOST.PID.diagnose.txt (DIR on a shared
# filesystem; default ./gpufeed-$SLURM_JOB_ID).
dir=${1:-./gpufeed-${SLURM_JOB_ID:-job}}
secs=${2:-20}
host=$(hostname -s)
mkdir -p "$dir"
timeout 60 gpufeed check >"$dir/$host.check.txt" 2>&1
# The job's GPU processes on this node, as the node's agent knows them by
# their slurm_job_id; without an agent, name them in GPUFEED_PIDS.
pids=$(timeout 5 curl -fsS "${GPUFEED_AGENT:-http://127.0.0.1:9847}/pids?slurm_job_id=${SLURM_JOB_ID:-none}" 2>/dev/null)
for pid in $pids ${GPUFEED_PIDS:-}; do
	timeout $((secs + 60)) gpufeed diagnose --pid "$pid" --duration "${secs}s" >"$dir/$host.$pid.diagnose.txt" 2>&1
done
exit 0

#!/bin/sh
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/epilog.d/gpufeed.sh), run as
# root on each node after a job ends. It saves what the node's gpufeed
# agent kept of the job's GPU processes (their last minutes, as reports
# and recordings gpufeed report reads), bounded in time, and always exits
# 0: an epilog failure drains the node.
#
# The agent labels each GPU process tree with its slurm_job_id and lists a
# job's roots at /pids?slurm_job_id=N. A job's report and recording are
# served on the agent's detail socket (gpufeed agent --detail-socket PATH;
# root, as the epilog runs, reads every job there): GPUFEED_AGENT_SOCKET is
# that path (default /run/gpufeed-agent.sock).
sock=${GPUFEED_AGENT_SOCKET:-/run/gpufeed-agent.sock}
agent=http://agent
job=${SLURM_JOB_ID:-}
[ -n "$job" ] || exit 0
# Undo the prolog's dcgm-exporter job mapping for this job's GPUs.
if [ -n "${DCGM_HPC_JOB_MAPPING_DIR:-}" ]; then
	for gpu in $(echo "${SLURM_JOB_GPUS:-}" | tr ',' ' '); do
		f="$DCGM_HPC_JOB_MAPPING_DIR/$gpu"
		[ -f "$f" ] && grep -vx "$job" "$f" >"$f.new" 2>/dev/null; mv -f "$f.new" "$f" 2>/dev/null
		[ -s "$f" ] || rm -f "$f"
	done
fi
dir=${GPUFEED_DIR:-/var/log/gpufeed}/$job
mkdir -p "$dir" 2>/dev/null || exit 0
host=$(hostname -s)
[ -S "$sock" ] || exit 0
pids=$(timeout 5 curl -fsS --unix-socket "$sock" "$agent/pids?slurm_job_id=$job" 2>/dev/null)
for pid in $pids; do
	timeout 10 curl -fsS --unix-socket "$sock" -o "$dir/$host.$pid.report.txt" "$agent/report?pid=$pid" 2>/dev/null
	timeout 10 curl -fsS --unix-socket "$sock" -o "$dir/$host.$pid.gpufeed" "$agent/recording?pid=$pid" 2>/dev/null
done
exit 0

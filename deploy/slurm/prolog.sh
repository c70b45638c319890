#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/gpufeed.sh), run as
# root on each node before a job starts. It records the node's platform
# facts for the job (PCIe links, NUMA, governor, limits, GPU health) with
# gpufeed check, bounded in time, and exits 0: a failing prolog drains the
# node, so a finding must not, unless the site opts in with
# GPUFEED_PROLOG_GATE=1 (then a failed check, exit status 1, holds the node).
#
# The report lands in GPUFEED_DIR/JOBID/HOST.check.txt (default
# /var/log/gpufeed), where the epilog adds the agent's last minutes.
# dcgm-exporter's HPC job mapping (--hpc-job-mapping-dir): one file per GPU
# index holding the ids of the jobs on it, so that its metrics carry the
# same job id (hpc_job) as gpufeed's slurm_job_id label.
if [ -n "${DCGM_HPC_JOB_MAPPING_DIR:-}" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
	for gpu in $(echo "${SLURM_JOB_GPUS:-}" | tr ',' ' '); do
		echo "$SLURM_JOB_ID" >>"$DCGM_HPC_JOB_MAPPING_DIR/$gpu" 2>/dev/null
	done
fi

dir=${GPUFEED_DIR:-/var/log/gpufeed}/${SLURM_JOB_ID:-unknown}
mkdir -p "$dir" 2>/dev/null || exit 0
out="$dir/$(hostname -s).check.txt"
timeout 20 gpufeed check >"$out" 2>&1
status=$?
if [ "${GPUFEED_PROLOG_GATE:-0}" = 1 ] && [ "$status" = 1 ]; then
	echo "gpufeed check failed on $(hostname -s): see $out" >&2
	exit 1
fi
exit 0

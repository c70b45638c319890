#!/bin/sh
# What the eBPF measurements of diagnose --profile cost a job, side by side
# in one run each (as root; docs/PERFORMANCE.md has the numbers):
#  - the CUDA driver probes on a launch-bound C program on the simulated
#    driver: launches per CPU second and per wall second of the launch thread
#    with no probes, the launch probes on all the time, in their default
#    bursts, and on the file with the process not watched (rotating phases
#    of GPUFEED_BENCH_PHASE_S seconds, default 2);
#  - the syscall summary on dd copying GPUFEED_BENCH_BYTES (default 2 MB) a
#    byte at a time, against strace -c -f and perf trace -s (rotating).
# Usage: scripts/bench-bpf.sh [ROUNDS]   (default 5)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-5}
go test -count=1 -run XXX -bench LaunchOverhead -benchtime "${rounds}x" -timeout 30m ./internal/profile/driverprobe/
go test -count=1 -run XXX -bench SyscallOverhead -benchtime "${rounds}x" -timeout 30m ./internal/profile/syscalls/

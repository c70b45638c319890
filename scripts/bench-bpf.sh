#!/bin/sh
# What the eBPF measurements of diagnose --profile cost a job, side by side
# in one run each (as root; docs/PERFORMANCE.md has the numbers):
#  - the CUDA driver probes on a launch-bound C program on the simulated
#    driver: launches per CPU second and per wall second of the launch thread
#    with no probes, the launch probes on all the time, in their default
#    bursts, and on the file with the process not watched (rotating phases
#    of GPUFEED_BENCH_PHASE_S seconds, default 2);
#  - the syscall summary on dd copying GPUFEED_BENCH_BYTES (default 2 MB) a
#    byte at a time, against the floor (programs that do nothing on
#    sys_enter/sys_exit: the kernel's tracepoint path alone), strace -c -f
#    and perf trace -s (rotating); wall and CPU time, and the programs' run
#    time per call from the kernel's statistics;
#  - the syscall summary on a real torch DataLoader with four workers under
#    Debian's /usr/bin/python3 (plain, floor, summary, rotating; per-round
#    ratios of the time to take GPUFEED_BENCH_BATCHES batches and of the
#    job's CPU time).
# Usage: scripts/bench-bpf.sh [ROUNDS]   (default 5)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-5}
go test -count=1 -run XXX -bench LaunchOverhead -benchtime "${rounds}x" -timeout 30m ./internal/driverprobe/
go test -count=1 -run XXX -bench 'SyscallOverhead$' -benchtime "${rounds}x" -timeout 30m ./internal/syscalls/
go test -count=1 -run XXX -bench 'SyscallOverheadDataLoader$' -benchtime "$((rounds * 2))x" -timeout 30m ./internal/syscalls/

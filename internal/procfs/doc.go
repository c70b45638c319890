// Package procfs reads what the kernel says of a machine and its processes
// through /proc and /sys, under injectable roots (FS: /proc and /sys are
// only the defaults), so the same read path runs over a live system, a
// container's /host/proc and fixture trees. One file here per kernel source:
// stat, schedstat, statm, status, limits, io, smaps_rollup, wchan, syscall,
// environ, cmdline, fd, maps, numa_maps, mountinfo and mountstats, cgroup,
// net (tcp, tcp6, unix) and the Unix sockets' peers (sock_diag), meminfo,
// pressure, diskstats, /proc/stat, interrupts, the kernel's command line,
// release and sysctls, and in sysfs the CPUs (cpufreq, topology), NUMA
// nodes, PCI devices and links, RDMA devices, transparent huge pages.
//
// Two kinds of readers live here:
//
//   - The hot path (per thread, every tick): a Kept file is opened once and
//     re-read with pread at offset 0 into a caller's reused buffer; the parsers
//     (ParseStat, ParseSchedstat, ParseStatm) are pure and allocate nothing.
//     A read failing with ESRCH or ENOENT means the task exited: callers skip
//     it and count it.
//   - Slow tiers and one-off reads open, read with the one capped reader and
//     close. Pseudo-files lie about their size: nothing here sizes a buffer
//     from stat. A method on FS reads; a pure ParseX function turns bytes
//     into values, and is fuzzed. Optional fields are pointers or carry a
//     Have flag: absent is never zero. Where prometheus/procfs already reads
//     a file well and the read is rare (mountinfo, mountstats, the NFS
//     client's RPC statistics, a process's command line) it is used.
//
// Every failure is one of one error set (errors.go): absent, vanished,
// denied with the privilege that would show it, a parse error naming the
// file, the line or byte and what was expected, or too large. Callers report
// "not visible", never zero.
package procfs

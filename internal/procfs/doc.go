// Package procfs reads the Linux /proc files gpufeed samples, under an
// injectable root (/proc is only the default), so the same read path runs
// over a live system, a container's /host/proc and fixture trees.
//
// Two kinds of readers live here:
//
//   - The hot path (per thread, every tick): a Kept file is opened once and
//     re-read with pread at offset 0 into a caller's reused buffer; the parsers
//     (ParseStat, ParseSchedstat, ParseStatm) are pure and allocate nothing.
//     A read failing with ESRCH or ENOENT means the task exited: callers skip
//     it and count it.
//   - Slow tiers and one-off reads (status, io, fd count, smaps_rollup,
//     wchan, syscall, environ, cmdline, limits, host files) open, read with a
//     capped buffer and close. Pseudo-files lie about their size: nothing here
//     sizes a buffer from stat.
//
// Errors are classified: IsVanished reports a task that went away; a
// *DeniedError names the file and the privilege that would show it, so that
// callers report "not visible", never zero.
package procfs

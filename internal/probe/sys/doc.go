// Package sys reads the platform facts gpufeed check needs from /proc and
// /sys: PCIe links, CPU frequency and topology, NUMA nodes, interrupts,
// memory, limits, mounts and NFS statistics.
//
// Every path lives under an injectable root (FS.Proc, FS.Sys), so the real
// read path runs over fixture trees in tests and over /host/proc in a
// container. Readers follow one shape: a method on FS reads capped bytes and
// a pure Parse function turns them into values. Optional files are pointer
// fields: nil means absent, never zero. Errors keep their cause, so callers
// tell an absent file (IsAbsent) from a denied one (IsDenied) from one that
// did not parse (*ParseError).
//
// Where prometheus/procfs already parses a file well (meminfo, pressure,
// mountinfo, mountstats, /proc/net/rpc/nfs) this package delegates to it.
package sys

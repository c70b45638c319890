package procfs

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Every parser of /proc text is fuzzed: a hostile or corrupt fixture (or a
// kernel change) must produce an error, never a panic. CI runs the seeds.

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(realStat))
	f.Add([]byte(trickyStat))
	f.Add([]byte("1 () R"))
	f.Add([]byte(kthreadStat))
	f.Add([]byte(zombieStat))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Stat
		_ = ParseStat(b, &s)
		_, _ = ParseStatLayout(b)
		_, _ = parseTask("stat", b)
	})
}

func FuzzParseSmallFiles(f *testing.F) {
	for _, s := range []string{realSchedstat, realStatm, realIO, realRollup, realLimits, realPressure,
		"Name:\tx\nvoluntary_ctxt_switches:\t1\nNSpid:\t1 2\n", "202 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8\n", "running\n", "0.34 2.23 2.76 3/1082 23556\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ss Schedstat
		_ = ParseSchedstat(b, &ss)
		var sm Statm
		_ = ParseStatm(b, &sm)
		_, _ = ParseStatus("status", b)
		_, _ = ParseIO("io", b)
		_, _ = ParseRollup("smaps_rollup", b)
		_, _ = ParseNoFile("limits", b)
		_, _ = ParsePressure("pressure", b)
		_, _ = ParseSyscall("syscall", b, "x86_64")
		_ = FilterEnv(b)
		if n, err := ParseLoadavgLastPID(b); err == nil && n < 0 {
			t.Fatalf("loadavg: negative last pid %d", n)
		}
		walkDirents(b, func(int) {})
	})
}

func FuzzParseHostFiles(f *testing.F) {
	f.Add([]byte("cpu0 1 2 3 4 5 6 7 8\nctxt 9\nprocs_running 1\nprocs_blocked 0\n"))
	f.Add([]byte(" 253 0 vda 1 2 3 4 5 6 7 8 9 10 11\n"))
	f.Add([]byte("MemTotal: 1 kB\nMemAvailable: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var hs HostStat
		_ = ParseProcStat("stat", b, &hs)
		_, _ = ParseDiskstats("diskstats", b, nil, nil)
		var m timeline.MemInfo
		_ = hostMeminfo("meminfo", b, &m)
		_, _ = ParseMeminfo("meminfo", b)
	})
}

package sample

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/probe/proc"
)

// benchTarget is the process the benchmarks sample: GPUFEED_BENCH_PID when
// set (scripts/bench-sampler.sh points it at its own target so every tool
// measures the same process), else a helper with 500 idle threads.
func benchTarget(b *testing.B) int {
	if v := os.Getenv("GPUFEED_BENCH_PID"); v != "" {
		pid, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		return pid
	}
	pid, _ := startLoad(b, "threads:500")
	return pid
}

// prepared returns a sampler that has taken its first (discovery) tick.
func prepared(b *testing.B, pid int) *Sampler {
	s, err := New(Config{PID: pid, Tool: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if s.procRoot, err = proc.OpenDir(s.fs.Root); err != nil {
		b.Fatal(err)
	}
	if s.host, err = proc.OpenHost(s.fs, "/sys"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.closeAll(); s.host.Close(); s.procRoot.Close() })
	st, err := proc.ReadStatOnce(s.fs.PidPath(pid, "stat"))
	if err != nil {
		b.Fatal(err)
	}
	s.start = time.Now()
	s.addProc(pid, st, 0)
	s.tick(0, true)
	return s
}

func cpuNS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tvNS(ru.Utime) + tvNS(ru.Stime)
}

// benchTicks runs one kind of tick per iteration and reports the CPU cost
// per thread-sample (process CPU time, so noise from other processes on the
// machine does not count, unlike ns/op).
func benchTicks(b *testing.B, slow bool) {
	pid := benchTarget(b)
	s := prepared(b, pid)
	threads := s.liveThreads()
	b.ReportAllocs()
	c0 := cpuNS()
	b.ResetTimer()
	for b.Loop() {
		if slow {
			s.lastSlow = -time.Hour
		}
		s.tick(time.Since(s.start), false)
		s.tl.Ticks = s.tl.Ticks[:0] // keep memory flat across iterations
	}
	b.StopTimer()
	cpu := float64(cpuNS()-c0) / 1e3
	b.ReportMetric(float64(threads), "threads")
	b.ReportMetric(cpu/float64(b.N*threads), "cpu-us/thread-sample")
}

// BenchmarkFastTick is one fast-tier sample of a 500-thread process: what
// every 100 ms tick costs (stat + schedstat per thread, statm, /proc/stat,
// process discovery).
func BenchmarkFastTick(b *testing.B) { benchTicks(b, false) }

// BenchmarkSlowTick is one sample with the slow tier too (status per
// thread, blocked-thread details, io, fd count, host PSI/meminfo/diskstats):
// what the tick once a second costs.
func BenchmarkSlowTick(b *testing.B) { benchTicks(b, true) }

func threadCPUNS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
	return tvNS(ru.Utime) + tvNS(ru.Stime)
}

// BenchmarkThreadPath is the per-thread hot path (two preads on kept files
// and the allocation-free parses) against the floor: the same two preads
// on its own kept descriptors, parsing nothing. Rounds alternate on one
// locked OS thread and each side's CPU time is that thread's (RUSAGE_THREAD),
// so load from other processes shifts both sides alike.
func BenchmarkThreadPath(b *testing.B) {
	pid := benchTarget(b)
	s := prepared(b, pid)
	p := s.procs[pid]
	threads := len(p.order)
	var floorFDs []int
	for _, th := range p.order {
		for _, name := range []string{"stat", "schedstat"} {
			fd, err := syscall.Open(s.fs.TaskPath(pid, th.tid, name), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			floorFDs = append(floorFDs, fd)
		}
	}
	b.Cleanup(func() {
		for _, fd := range floorFDs {
			syscall.Close(fd)
		}
	})
	buf := make([]byte, 4096)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ours, floor int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c0 := threadCPUNS()
		for _, fd := range floorFDs {
			syscall.Pread(fd, buf, 0)
		}
		c1 := threadCPUNS()
		for _, th := range p.order {
			if _, err := s.sampleThread(p, th, true); err != nil {
				b.Fatal(err)
			}
		}
		c2 := threadCPUNS()
		floor += c1 - c0
		ours += c2 - c1
	}
	b.StopTimer()
	n := float64(b.N * threads)
	b.ReportMetric(float64(threads), "threads")
	b.ReportMetric(float64(ours)/1e3/n, "cpu-us/thread-sample")
	b.ReportMetric(float64(floor)/1e3/n, "floor-cpu-us/thread-sample")
	b.ReportMetric(float64(ours)/float64(floor), "x-floor")
}

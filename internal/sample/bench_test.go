package sample

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gpufeed/gpufeed/internal/procfs"
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
	if s.procRoot, err = procfs.OpenDir(s.fs.Proc); err != nil {
		b.Fatal(err)
	}
	if s.host, err = procfs.OpenHost(s.fs); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.closeAll(); s.host.Close(); s.procRoot.Close() })
	st, err := procfs.ReadStatOnce(s.fs.PidPath(pid, "stat"))
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

// BenchmarkThreadPath is the per-thread hot path for a thread that ran:
// two raw preads on kept files and the allocation-free parses, on one locked
// OS thread, CPU time from RUSAGE_THREAD. Compare with BenchmarkFloor (and
// the C floor in scripts/bench-sampler.sh), measured the same way.
func BenchmarkThreadPath(b *testing.B) {
	pid := benchTarget(b)
	s := prepared(b, pid)
	p := s.procs[pid]
	threads := len(p.order)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := threadCPUNS()
	for b.Loop() {
		for _, th := range p.order {
			if _, err := s.sampleThread(p, th, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	c1 := threadCPUNS()
	b.StopTimer()
	b.ReportMetric(float64(threads), "threads")
	b.ReportMetric(float64(c1-c0)/1e3/float64(b.N*threads), "cpu-us/thread-sample")
}

// BenchmarkFloor is the floor in Go: the same two files per thread on kept
// descriptors, raw preads at offset 0 into one buffer, nothing parsed.
func BenchmarkFloor(b *testing.B) {
	pid := benchTarget(b)
	s := prepared(b, pid)
	p := s.procs[pid]
	var fds []int
	for _, th := range p.order {
		for _, name := range []string{"stat", "schedstat"} {
			fd, err := syscall.Open(s.fs.TaskPath(pid, th.tid, name), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			fds = append(fds, fd)
		}
	}
	b.Cleanup(func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	})
	// The sampler's own descriptors stay open but idle, as in a real run.
	buf := make([]byte, 4096)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := threadCPUNS()
	for b.Loop() {
		for _, fd := range fds {
			syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		}
	}
	c1 := threadCPUNS()
	b.StopTimer()
	b.ReportMetric(float64(len(p.order)), "threads")
	b.ReportMetric(float64(c1-c0)/1e3/float64(b.N*len(p.order)), "cpu-us/thread-sample")
}

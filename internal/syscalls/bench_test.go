//go:build amd64 || arm64

package syscalls

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// BenchmarkSyscallOverhead measures what counting costs a syscall-heavy
// job, side by side with strace -c -f and perf trace -s: dd copying
// GPUFEED_BENCH_BYTES (default 2 MB) one byte at a time (a read and a write
// per byte), run plain, with programs that do nothing attached to
// sys_enter and sys_exit (the floor: the kernel's syscall tracepoint path,
// which every task takes once a raw_syscalls program is attached, whatever
// it does), under the summary (this process watched, dd followed as its
// child), under strace -c -f and under perf trace -s, in rotating rounds so
// the host's load falls on all alike (GPUFEED_BENCH_NO_STRACE=1 leaves the
// last two out). It reports the median wall time and the median CPU time of
// dd (user and system: what the syscalls cost the job, less sensitive to
// other load than wall time) of each, their slowdowns against plain, and,
// from the kernel's run-time statistics in a separate pass (they add two
// clock reads to every run), the programs' own time per run. perf trace
// mounts tracefs when it is not: it is unmounted again after.
// scripts/bench-bpf.sh runs it; docs/PERFORMANCE.md has the numbers.
func BenchmarkSyscallOverhead(b *testing.B) {
	if err := Check(""); err != nil {
		b.Skip(err)
	}
	n := os.Getenv("GPUFEED_BENCH_BYTES")
	if n == "" {
		n = "2000000"
	}
	dd := []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=" + n}
	tracefs := mounted("/sys/kernel/tracing")
	defer func() {
		if !tracefs && mounted("/sys/kernel/tracing") {
			exec.Command("umount", "/sys/kernel/tracing").Run()
		}
	}()
	type sample struct{ wall, cpu time.Duration }
	run := func(argv ...string) sample {
		start := time.Now()
		c := exec.Command(argv[0], argv[1:]...)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return sample{time.Since(start), c.ProcessState.UserTime() + c.ProcessState.SystemTime()}
	}
	modes := []string{"plain", "floor", "summary", "strace -c -f", "perf trace -s"}
	if os.Getenv("GPUFEED_BENCH_NO_STRACE") != "" {
		modes = modes[:3]
	}
	times := map[string][]sample{}
	var counted uint64
	rounds := b.N // -benchtime Nx: go test runs it once with b.N 1 first
	for i := 0; i < rounds; i++ {
		for j := range modes {
			m := modes[(i+j)%len(modes)] // rotating order
			switch m {
			case "plain":
				times[m] = append(times[m], run(dd...))
			case "floor":
				done := floor(b)
				times[m] = append(times[m], run(dd...))
				done()
			case "summary":
				t, err := Start([]int{os.Getpid()}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				times[m] = append(times[m], run(dd...))
				s := t.Stop()
				for _, th := range s.Threads {
					if th.PID != os.Getpid() {
						counted += th.Stat("read").Calls
					}
				}
			case "strace -c -f":
				if _, err := exec.LookPath("strace"); err != nil {
					continue
				}
				times[m] = append(times[m], run(append([]string{"strace", "-c", "-f", "-o", "/dev/null"}, dd...)...))
			case "perf trace -s":
				if _, err := exec.LookPath("perf"); err != nil {
					continue
				}
				times[m] = append(times[m], run(append([]string{"perf", "trace", "-s", "-o", "/dev/null"}, dd...)...))
			}
		}
	}
	var lines []string
	wall := func(s sample) time.Duration { return s.wall }
	cpu := func(s sample) time.Duration { return s.cpu }
	baseW, baseC := median(times["plain"], wall), median(times["plain"], cpu)
	for _, m := range modes {
		if len(times[m]) == 0 {
			continue
		}
		w, c := median(times[m], wall), median(times[m], cpu)
		unit := strings.ReplaceAll(m, " ", "_")
		b.ReportMetric(w.Seconds(), "s-"+unit)
		if m != "plain" {
			b.ReportMetric(100*(w.Seconds()-baseW.Seconds())/baseW.Seconds(), "%slowdown-"+unit)
			b.ReportMetric(100*(c.Seconds()-baseC.Seconds())/baseC.Seconds(), "%cpu-"+unit)
		}
		var ws, cs []string
		for _, s := range times[m] {
			ws = append(ws, s.wall.Round(time.Millisecond).String())
			cs = append(cs, s.cpu.Round(time.Millisecond).String())
		}
		lines = append(lines, fmt.Sprintf("%s: wall %v (%s), dd's CPU %v (%s)", m, w.Round(time.Millisecond),
			strings.Join(ws, " "), c.Round(time.Millisecond), strings.Join(cs, " ")))
	}
	want, _ := strconv.Atoi(n)
	lines = append(lines, fmt.Sprintf("reads counted under the summary: %d (dd made %d per run)", counted, want+1))

	// The programs' own time per run.
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		perRun := func(progs []*ebpf.Program) []float64 {
			var out []float64
			for _, p := range progs {
				ps, err := p.Stats()
				if err != nil || ps.RunCount == 0 {
					return nil
				}
				out = append(out, float64(ps.Runtime.Nanoseconds())/float64(ps.RunCount))
			}
			return out
		}
		done := floor(b)
		run(dd...)
		fl := perRun(done())
		t, err := Start([]int{os.Getpid()}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		run(dd...)
		sm := perRun([]*ebpf.Program{t.objs.SysEnter, t.objs.SysExit})
		t.Stop()
		st.Close()
		if len(fl) == 2 && len(sm) == 2 {
			b.ReportMetric(sm[0], "ns/enter")
			b.ReportMetric(sm[1], "ns/exit")
			b.ReportMetric(fl[0]+fl[1], "ns/empty-pair")
			lines = append(lines, fmt.Sprintf("run time per call (kernel statistics): sys_enter %.0f ns, sys_exit %.0f ns; "+
				"the empty programs %.0f and %.0f ns (the statistics' own cost)", sm[0], sm[1], fl[0], fl[1]))
		}
	}
	b.Logf("%s", strings.Join(lines, "\n"))
}

// floor attaches programs that do nothing to sys_enter and sys_exit: what
// the kernel's syscall tracepoint path costs every task once a
// raw_syscalls program is attached, whatever the program does. The
// returned func detaches them and returns them (still loaded, for their
// statistics; closed when the benchmark's process ends).
func floor(b *testing.B) func() []*ebpf.Program {
	var links []link.Link
	var progs []*ebpf.Program
	for _, name := range []string{"sys_enter", "sys_exit"} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
		if err != nil {
			b.Fatal(err)
		}
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: prog})
		if err != nil {
			b.Fatal(err)
		}
		links = append(links, l)
		progs = append(progs, prog)
	}
	return func() []*ebpf.Program {
		for _, l := range links {
			l.Close()
		}
		return progs
	}
}

func median[T any](v []T, f func(T) time.Duration) time.Duration {
	var s []time.Duration
	for _, x := range v {
		s = append(s, f(x))
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == dir {
			return true
		}
	}
	return false
}

// dataLoaderJob is a syscall-heavy training input loop: a real torch
// DataLoader, four forked workers, small batches of a numpy dataset, the
// trainer taking each batch as soon as it comes (no step time: the queue's
// polls, reads and futexes as fast as the workers feed them). On each
// "go" line it takes GPUFEED_BENCH_BATCHES batches and prints the seconds
// it took and its own CPU seconds.
const dataLoaderJob = `
import os, sys, time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
class Items(Dataset):
    def __init__(self, n): self.data = np.arange(n, dtype=np.float64)
    def __len__(self): return len(self.data)
    def __getitem__(self, i): return self.data[i]
n = int(os.environ.get("GPUFEED_BENCH_BATCHES", "2000"))
loader = DataLoader(Items(1 << 22), batch_size=16, num_workers=4, multiprocessing_context="fork", persistent_workers=True)
def batches():
    while True:
        it = iter(loader)
        for b in it:
            yield it, b
g = batches()
it, _ = next(g)
print(" ".join(str(w.pid) for w in it._workers), flush=True)
for line in sys.stdin:
    t0, c0 = time.monotonic(), time.process_time()
    for _ in range(n):
        next(g)
    print(time.monotonic() - t0, time.process_time() - c0, flush=True)
`

// BenchmarkSyscallOverheadDataLoader measures the summary on a realistic
// syscall-heavy job, where the 5 % target applies: dataLoaderJob under
// Debian's /usr/bin/python3 (python3-torch), its trainer and workers
// watched, in rotating rounds of plain, the empty programs (the floor) and
// the summary. It reports the median time to take the batches in each mode,
// the slowdowns against plain, and the busiest thread's syscalls a second
// under the summary.
func BenchmarkSyscallOverheadDataLoader(b *testing.B) {
	if err := Check(""); err != nil {
		b.Skip(err)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		b.Skip(err)
	}
	c := exec.Command("/usr/bin/python3", "-c", dataLoaderJob)
	var stderr strings.Builder
	c.Stderr = &stderr // torch's warning about more workers than CPUs
	in, err := c.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outp, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); c.Process.Kill(); c.Wait() }()
	out := bufio.NewScanner(outp)
	if !out.Scan() {
		b.Fatalf("the DataLoader job did not start (python3-torch installed?): %s", stderr.String())
	}
	pids := []int{c.Process.Pid}
	for _, f := range strings.Fields(out.Text()) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	take := func() (wall, cpu float64) {
		io.WriteString(in, "go\n")
		if !out.Scan() {
			b.Fatal("the DataLoader job ended")
		}
		fmt.Sscan(out.Text(), &wall, &cpu)
		return wall, cpu
	}
	// The job's CPU time: every thread of the trainer and the workers
	// (schedstat's time on a CPU, in ns).
	jobCPU := func() time.Duration {
		var sum time.Duration
		for _, p := range pids {
			tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p))
			for _, f := range tasks {
				raw, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				if v := strings.Fields(string(raw)); len(v) > 0 {
					ns, _ := strconv.ParseInt(v[0], 10, 64)
					sum += time.Duration(ns)
				}
			}
		}
		return sum
	}
	take() // warm up
	modes := []string{"plain", "floor", "summary"}
	walls := map[string][]time.Duration{}
	cpus := map[string][]time.Duration{}
	var busiest, total []float64
	for i := 0; i < b.N; i++ {
		for j := range modes {
			m := modes[(i+j)%len(modes)]
			var w float64
			c0 := jobCPU()
			switch m {
			case "plain":
				w, _ = take()
			case "floor":
				done := floor(b)
				w, _ = take()
				done()
			case "summary":
				t, err := Start(pids, Options{})
				if err != nil {
					b.Fatal(err)
				}
				w, _ = take()
				s := t.Stop()
				var most, all uint64
				for _, th := range s.Threads {
					most = max(most, th.Calls)
					all += th.Calls
				}
				busiest = append(busiest, float64(most)/w)
				total = append(total, float64(all)/w)
			}
			cpus[m] = append(cpus[m], jobCPU()-c0)
			walls[m] = append(walls[m], time.Duration(w*float64(time.Second)))
		}
	}
	id := func(d time.Duration) time.Duration { return d }
	base, baseC := median(walls["plain"], id), median(cpus["plain"], id)
	var lines []string
	for _, m := range modes {
		md, mc := median(walls[m], id), median(cpus[m], id)
		b.ReportMetric(md.Seconds(), "s-"+m)
		if m != "plain" {
			b.ReportMetric(100*(md.Seconds()-base.Seconds())/base.Seconds(), "%slowdown-"+m)
			b.ReportMetric(100*(mc.Seconds()-baseC.Seconds())/baseC.Seconds(), "%cpu-"+m)
		}
		var ws, cs []string
		for k := range walls[m] {
			ws = append(ws, walls[m][k].Round(time.Millisecond).String())
			cs = append(cs, cpus[m][k].Round(time.Millisecond).String())
		}
		lines = append(lines, fmt.Sprintf("%s: wall %v (%s), the job's CPU %v (%s)", m, md.Round(time.Millisecond),
			strings.Join(ws, " "), mc.Round(time.Millisecond), strings.Join(cs, " ")))
	}
	// Each round's ratio against the same round's plain run (the load
	// changes less within a round than across the run).
	for _, m := range modes[1:] {
		var rw, rc []float64
		for k := range walls[m] {
			rw = append(rw, walls[m][k].Seconds()/walls["plain"][k].Seconds())
			rc = append(rc, cpus[m][k].Seconds()/cpus["plain"][k].Seconds())
		}
		sort.Float64s(rw)
		sort.Float64s(rc)
		b.ReportMetric(rw[len(rw)/2], "ratio-wall-"+m)
		b.ReportMetric(rc[len(rc)/2], "ratio-cpu-"+m)
		lines = append(lines, fmt.Sprintf("%s against plain, per round: wall median %.3f (%.3f to %.3f), the job's CPU median %.3f (%.3f to %.3f)",
			m, rw[len(rw)/2], rw[0], rw[len(rw)-1], rc[len(rc)/2], rc[0], rc[len(rc)-1]))
	}
	// The programs' own run time against the job's CPU time, in one more
	// round with the kernel's statistics on (they add their own cost).
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		t, err := Start(pids, Options{})
		if err != nil {
			b.Fatal(err)
		}
		c0 := jobCPU()
		take()
		job := jobCPU() - c0
		var run time.Duration
		var runs uint64
		for _, p := range []*ebpf.Program{t.objs.SysEnter, t.objs.SysExit} {
			if ps, err := p.Stats(); err == nil {
				run += ps.Runtime
				runs += ps.RunCount
			}
		}
		t.Stop()
		st.Close()
		if job > 0 && runs > 0 {
			b.ReportMetric(100*run.Seconds()/job.Seconds(), "%prog-of-job-cpu")
			lines = append(lines, fmt.Sprintf("the programs' run time (every syscall of the host, %d runs, %.0f ns each): %.2f %% of the job's CPU time",
				runs, float64(run.Nanoseconds())/float64(runs), 100*run.Seconds()/job.Seconds()))
		}
	}
	sort.Float64s(busiest)
	sort.Float64s(total)
	if len(busiest) > 0 {
		b.ReportMetric(busiest[len(busiest)/2], "syscalls/s-busiest")
		b.ReportMetric(total[len(total)/2], "syscalls/s-job")
	}
	b.Logf("%s", strings.Join(lines, "\n"))
}

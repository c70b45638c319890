package sample

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// loadHelper is set when this test binary runs as a load generator.
const loadHelper = "GPUFEED_TEST_LOAD"

// schedProbe is set when this test binary runs as an unprivileged sampler
// (sched_test.go).
const schedProbe = "GPUFEED_TEST_SCHED_PROBE"

// The leaver's thread must not be the process's main thread, which Go
// keeps (it does not exit with a goroutine locked to it): the main
// goroutine, locked to it from here, keeps it.
func init() {
	if strings.HasPrefix(os.Getenv(loadHelper), "leaver:") {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(loadHelper); mode != "" {
		runLoad(mode)
		return
	}
	if os.Getenv(schedProbe) != "" {
		runSchedProbe()
		return
	}
	os.Exit(m.Run())
}

// runLoad starts OS threads doing known things and prints "ROLE TID" per
// thread, then blocks until killed. Modes:
//
//	spin-sleep   one thread spinning, one asleep
//	compete:N    one "target" spinner and N other spinners, all pinned to CPU 0
//	threads:N    N idle threads (the benchmark's target)
//	leaver:PATH  one asleep, one that spins until PATH exists, then 300 ms, and exits as another starts
func runLoad(mode string) {
	// Every spinner needs its own P: with fewer Ps than spinning goroutines,
	// the runtime parks one (asleep, not runnable) and the numbers lie.
	runtime.GOMAXPROCS(64)
	started := make(chan string)
	thread := func(role string, cpu int, spin bool) {
		go func() {
			runtime.LockOSThread()
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					fmt.Fprintln(os.Stderr, "affinity:", err)
					os.Exit(3)
				}
			}
			started <- fmt.Sprintf("%s %d", role, unix.Gettid())
			if spin {
				for x := 0; ; x++ {
					_ = x
				}
			}
			select {}
		}()
	}
	n := 0
	switch {
	case mode == "spin-sleep":
		thread("spin", -1, true)
		thread("sleep", -1, false)
		n = 2
	case strings.HasPrefix(mode, "threads:"):
		k, _ := strconv.Atoi(strings.TrimPrefix(mode, "threads:"))
		for i := 0; i < k; i++ {
			thread("idle", -1, false)
		}
		n = k
	case strings.HasPrefix(mode, "leaver:"):
		// One thread that sleeps, and one that spins until the file named
		// exists, then 300 ms more, starts another thread and exits at
		// once: the thread count is the same before and after (a thread
		// gone, another come).
		thread("stay", -1, false)
		go func() {
			runtime.LockOSThread()
			started <- fmt.Sprintf("leaver %d", unix.Gettid())
			for {
				if _, err := os.Stat(strings.TrimPrefix(mode, "leaver:")); err == nil {
					break
				}
			}
			for t0 := time.Now(); time.Since(t0) < 300*time.Millisecond; {
			}
			up := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(up)
				select {}
			}()
			<-up
			runtime.Goexit() // locked: its thread exits with it
		}()
		n = 2
	case strings.HasPrefix(mode, "compete:"):
		k, _ := strconv.Atoi(strings.TrimPrefix(mode, "compete:"))
		thread("target", 0, true)
		for i := 0; i < k; i++ {
			thread("other", 0, true)
		}
		n = k + 1
	}
	for i := 0; i < n; i++ {
		fmt.Println(<-started)
	}
	fmt.Println("ready")
	select {}
}

// startLoad runs the helper and returns its pid and role -> TIDs.
func startLoad(t testing.TB, mode string) (int, map[string][]int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), loadHelper+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	tids := map[string][]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "ready" {
			return cmd.Process.Pid, tids
		}
		if len(f) == 2 {
			tid, _ := strconv.Atoi(f[1])
			tids[f[0]] = append(tids[f[0]], tid)
		}
	}
	t.Fatalf("load helper ended early: %v", sc.Err())
	return 0, nil
}

func sampleLive(t *testing.T, pid int, d time.Duration) (*timeline.Timeline, *derive.View) {
	t.Helper()
	s, err := New(Config{PID: pid, Duration: d, Interval: 100 * time.Millisecond, Tool: "test", Sched: testSched()})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkSched(t, tl)
	return tl, derive.New(tl)
}

func threadByTID(t *testing.T, a *derive.View, tid int) *derive.Thread {
	t.Helper()
	for _, th := range a.Threads {
		if th.Key.TID == tid {
			return th
		}
	}
	t.Fatalf("thread %d not sampled", tid)
	return nil
}

// The bounds are generous on purpose: other work shares this machine's two
// cores, so a spinner may get well under a full core. What cannot change is
// that a spinning thread is always running or runnable (CPU + run-queue wait
// ~ 100 % of wall time), that its CPU agrees with the kernel's utime+stime,
// and that a sleeping thread uses nothing.
func TestLiveSpinningAndSleepingThreads(t *testing.T) {
	livetest.Need(t)
	pid, tids := startLoad(t, "spin-sleep")
	tl, a := sampleLive(t, pid, 1500*time.Millisecond)
	spin := threadByTID(t, a, tids["spin"][0])
	sleep := threadByTID(t, a, tids["sleep"][0])

	t.Logf("spinner CPU %.1f%% wait %.1f%% user %.0f%%; sleeper CPU max %.2f%%", spin.CPU.Mean, spin.Wait.Mean, spin.UserShare, sleep.CPU.Max)
	if spin.CPU.N < 5 {
		t.Fatalf("only %d intervals sampled", spin.CPU.N)
	}
	busy := spin.CPU.Mean + spin.Wait.Mean
	// Steal time and IRQ time are not charged as run time: allow some.
	if busy < 70 || busy > 105 {
		t.Errorf("spinner: CPU %.1f%% + run-queue wait %.1f%% = %.1f%%, want ~100%%", spin.CPU.Mean, spin.Wait.Mean, busy)
	}
	if spin.CPU.Mean < 15 {
		t.Errorf("spinner CPU mean %.1f%%: far below any plausible share of a 2-core machine", spin.CPU.Mean)
	}
	// Cross-check against an independent counter: utime+stime (10 ms ticks).
	wall := float64(a.WindowNS) / 1e9
	ticksPct := (spin.UserSec + spin.SysSec) / wall * 100
	if d := ticksPct - spin.CPU.Mean; d < -20 || d > 20 {
		t.Errorf("schedstat CPU %.1f%% vs utime+stime %.1f%%: disagree", spin.CPU.Mean, ticksPct)
	}
	if spin.UserShare < 90 {
		t.Errorf("a pure user-space spin: user share %.1f%%", spin.UserShare)
	}
	// A parked thread is woken now and then (the Go runtime's own); on a
	// crowded machine one such wake can wait a few ms for a CPU, a few % of
	// one 100 ms interval (2.8 % seen in CI-like runs), but not on average.
	if sleep.CPU.Max > 2 || sleep.Wait.Mean > 1 {
		t.Errorf("sleeper: CPU max %.2f%%, wait mean %.2f%% (max %.2f%%), want ~0", sleep.CPU.Max, sleep.Wait.Mean, sleep.Wait.Max)
	}
	last, _ := sleep.Last()
	if last == nil || last.State != 'S' {
		t.Errorf("sleeper state: %+v", last)
	}
	if b, _ := sleep.LastBlocked(); b == nil || b.Syscall != "futex" {
		t.Errorf("sleeper blocked in futex (a parked Go thread): %+v", b)
	}
	if tl.Meta.Observer == nil || tl.Meta.Observer.ThreadSamples == 0 {
		t.Errorf("observer cost not measured: %+v", tl.Meta.Observer)
	}
}

func TestLiveRunQueueWaitOfPinnedCompetitor(t *testing.T) {
	livetest.Need(t)
	const others = 2
	pid, tids := startLoad(t, fmt.Sprintf("compete:%d", others))
	_, a := sampleLive(t, pid, 1500*time.Millisecond)
	target := threadByTID(t, a, tids["target"][0])
	t.Logf("target CPU %.1f%% wait %.1f%% involuntary %.1f/s", target.CPU.Mean, target.Wait.Mean, target.Invol)
	// Three spinners share CPU 0: each runs about a third of the time and
	// waits the rest. "Well above zero" with margin for a loaded machine:
	if target.Wait.Mean < 30 {
		t.Errorf("target run-queue wait %.1f%% (CPU %.1f%%), want well above zero with %d spinners on its CPU",
			target.Wait.Mean, target.CPU.Mean, others)
	}
	if busy := target.CPU.Mean + target.Wait.Mean; busy < 70 {
		t.Errorf("target always runnable: CPU + wait = %.1f%%, want ~100%%", busy)
	}
	if target.CPU.Mean > 60 {
		t.Errorf("target CPU %.1f%%: it shares one CPU with %d spinners", target.CPU.Mean, others)
	}
	if target.Invol < 1 {
		t.Errorf("target involuntary switches %.1f/s: preemption expected", target.Invol)
	}
	for _, other := range tids["other"] {
		o := threadByTID(t, a, other)
		if last, _ := o.Last(); last == nil || last.CPU != 0 {
			t.Errorf("spinner %d last ran on CPU %v, pinned to 0", other, last)
		}
	}
}

// A child caught between fork and exec of a program with the same name shows
// its parent's command line and environment; the exec keeps the comm, so
// only re-reading the command line reveals it (a torchrun-style launcher
// starting python3 ranks).
func TestLiveExecKeepingTheNameIsSeen(t *testing.T) {
	livetest.Need(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	const script = `
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(0.4)
    env = dict(os.environ, RANK="1")
    os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(5)", "rank-after-exec"], env)
print("ready", flush=True)
os.waitpid(pid, 0)
`
	cmd := exec.Command(python, "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	tl, _ := sampleLive(t, cmd.Process.Pid, 2500*time.Millisecond)
	var child *timeline.ProcInfo
	for _, p := range tl.Procs {
		if p.PPID == cmd.Process.Pid {
			child = p
		}
	}
	if child == nil {
		t.Fatal("the forked child was not followed")
	}
	if len(child.Cmdline) == 0 || child.Cmdline[len(child.Cmdline)-1] != "rank-after-exec" {
		t.Errorf("child command line %q: the exec was missed", child.Cmdline)
	}
	if child.Env["RANK"] != "1" {
		t.Errorf("child environment %v: want the RANK it was exec'd with", child.Env)
	}
}

// A launched command that exited before the first read is a run that ended
// at once: sampled as such, not refused as a missing pid.
func TestLaunchedTargetGoneBeforeTheFirstRead(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("true:", err)
	}
	pid := cmd.Process.Pid // reaped: gone
	if _, err := New(Config{PID: pid, Duration: time.Second, Tool: "test"}); err == nil {
		t.Fatal("an attached pid that does not exist must be refused")
	}
	s, err := New(Config{PID: pid, Duration: time.Second, Launched: true, Command: []string{"true"}, Tool: "test"})
	if err != nil {
		t.Fatalf("launched: %v", err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tl.Meta.Ended != "target exited" || len(tl.Procs) != 0 {
		t.Errorf("ended %q with %d processes: want an empty run that ended with the target", tl.Meta.Ended, len(tl.Procs))
	}
}

// A child forked without exec has what it copied of its parent's anonymous
// mappings read (both smaps, on the rollup tier, at the window's ends at
// least); a child that exec'd has not, nor has the target.
func TestLiveForkedChildCopiesRead(t *testing.T) {
	livetest.Need(t)
	cmd := startForking(t, 1, true)
	tl, _ := sampleLive(t, cmd.Process.Pid, 2*time.Second)
	read := map[string]*timeline.Inherited{}
	for _, p := range tl.Procs {
		for _, tk := range tl.Ticks {
			for _, s := range tk.Procs {
				if s.PID == p.Key.PID && s.Inherited != nil {
					read[p.Comm] = s.Inherited
				}
			}
		}
	}
	in := read["python3"]
	if in == nil || in.CopiedBytes < 6<<20 || in.Mappings == 0 || in.ParentRSSBytes < in.CopiedBytes {
		t.Errorf("the forked child's copies: %+v, want at least the 6 MiB of floats it read", in)
	}
	if s := read["sleep"]; s != nil {
		t.Errorf("an exec'd child inherits nothing to copy: %+v", s)
	}
	if len(read) != 1 {
		t.Errorf("read for %d processes, want the forked child alone: %v", len(read), read)
	}
}

// testSched is the scheduling source the live tests sample with:
// GPUFEED_TEST_SCHED (auto, bpf or proc; unset: proc), so that the same
// tests run against both sources.
func testSched() string { return os.Getenv("GPUFEED_TEST_SCHED") }

// checkSched fails a run whose source is not the one asked for.
func checkSched(t *testing.T, tl *timeline.Timeline) {
	t.Helper()
	want := timeline.SchedProc
	if testSched() == SchedBPF {
		want = timeline.SchedBPF
	}
	if o := tl.Meta.Observer; testSched() != SchedAuto && (o == nil || o.Sched != want) {
		t.Fatalf("scheduling source %+v, want %s", o, want)
	}
}

// The memory readings of a job's processes share one CPU budget between
// the window's ends: with a budget too small for any reading between them,
// each of a parent and its 8 forked workers is still read at the first and
// the last tick (what each worker copied, and its change), the readings
// between are held back and counted; with room, every process is read on
// every rollup tick.
func TestLiveMemoryReadingsShareTheJobBudget(t *testing.T) {
	livetest.Need(t)
	cmd := startForking(t, 8, false)
	// readings counts, per process, the ticks that read its USS, whether
	// the first and the last did, and whether the last read its copies.
	type readings struct {
		n, first, last int
		copied         uint64
	}
	run := func(budget float64) (map[int]*readings, *timeline.Timeline) {
		s, err := New(Config{PID: cmd.Process.Pid, Duration: 3 * time.Second, Interval: 100 * time.Millisecond, RollupEvery: 300 * time.Millisecond,
			RollupBudget: 1, RollupJobBudget: budget, Tool: "test", Sched: testSched()})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]*readings{}
		for i, tk := range tl.Ticks {
			for _, ps := range tk.Procs {
				r := got[ps.PID]
				if r == nil {
					r = &readings{}
					got[ps.PID] = r
				}
				if ps.USSBytes == nil {
					continue
				}
				r.n++
				if i == 0 {
					r.first++
				}
				if i == len(tl.Ticks)-1 {
					r.last++
					if ps.Inherited != nil {
						r.copied = ps.Inherited.CopiedBytes
					}
				}
			}
		}
		if len(got) != 9 {
			t.Fatalf("%d processes sampled, want the parent and its 8 workers", len(got))
		}
		return got, tl
	}
	tight, tl := run(1e-6)
	between := 0
	for pid, r := range tight {
		if r.first != 1 || r.last != 1 {
			t.Errorf("pid %d, budget too small for any reading between the ends: read at the first tick %d, the last %d times; want both", pid, r.first, r.last)
		}
		if pid != cmd.Process.Pid && r.copied < 6<<20 {
			t.Errorf("worker %d: %d bytes copied at the last tick, want the 6 MiB of floats it read", pid, r.copied)
		}
		between += r.n - r.first - r.last
	}
	// The first reading between the ends may be taken before the budget
	// counts the first tick's cost: at most one.
	if between > 1 || tl.Counts.RollupSkipped < 8 {
		t.Errorf("budget too small: %d readings between the ends, %d held back; want none (at most one) and each process's held back", between, tl.Counts.RollupSkipped)
	}
	roomy, tl := run(1)
	for pid, r := range roomy {
		// 3 s at a reading every 300 ms: the ends and 8 or 9 between.
		if r.n < 8 {
			t.Errorf("pid %d, budget with room: %d readings in 3 s, want one every 300 ms", pid, r.n)
		}
	}
	if tl.Counts.RollupSkipped != 0 {
		t.Errorf("budget with room: %d readings held back", tl.Counts.RollupSkipped)
	}
}

// forkingJob is a parent holding about 7 MiB of float objects that forks
// argv[1] workers; each reads every object (reading writes its reference
// count: copy-on-write), says so, and sleeps. Once all have, the parent
// starts an exec'd child (sleep) when argv[2] is "exec", prints "ready"
// and sleeps.
const forkingJob = `
import os, subprocess, sys, time
data = [float(i) for i in range(300000)]
r, w = os.pipe()
workers = int(sys.argv[1])
for _ in range(workers):
    if os.fork() == 0:
        s = 0.0
        for x in data:
            s += x
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
for _ in range(workers):
    os.read(r, 1)
if sys.argv[2] == "exec":
    subprocess.Popen(["sleep", "60"])
print("ready", flush=True)
time.sleep(60)
`

// startForking runs forkingJob with its workers, and an exec'd child when
// withExec, in a process group of its own (the group is killed at the
// test's end), and waits for its "ready"; the test is skipped without
// python3.
func startForking(t *testing.T, workers int, withExec bool) *exec.Cmd {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	mode := "fork-only"
	if withExec {
		mode = "exec"
	}
	cmd := exec.Command(python, "-c", forkingJob, strconv.Itoa(workers), mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return cmd
}

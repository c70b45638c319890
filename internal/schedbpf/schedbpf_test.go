//go:build amd64 || arm64

package schedbpf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The workloads: the test binary run again with GPUFEED_SCHEDBPF_CHILD
// naming one. Each prints its threads' ids ("tid N" lines), then "ready",
// and runs until its standard input closes.
func TestMain(m *testing.M) {
	if mode := os.Getenv("GPUFEED_SCHEDBPF_CHILD"); mode != "" {
		child(mode)
		return
	}
	if v := os.Getenv("GPUFEED_SCHEDBPF_HOLD"); v != "" {
		hold(v)
		return
	}
	os.Exit(m.Run())
}

func child(mode string) {
	if mode != "unprivileged" && mode != "forker" && mode != "dsleep" {
		go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	}
	switch mode {
	case "spin":
		// Four threads, each spinning 5 ms and sleeping 2 ms, on a host
		// with fewer CPUs than that or not: they run and wait on run
		// queues, and sleep.
		runtime.GOMAXPROCS(8)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				runtime.LockOSThread()
				fmt.Println("tid", unix.Gettid())
				wg.Done()
				for {
					for t0 := time.Now(); time.Since(t0) < 5*time.Millisecond; {
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
	case "pingpong":
		// Two threads passing a byte back and forth over two blocking
		// pipes: each wakes the other.
		var ab, ba [2]int
		if unix.Pipe(ab[:]) != nil || unix.Pipe(ba[:]) != nil {
			os.Exit(2)
		}
		var wg sync.WaitGroup
		side := func(in, out int, first bool) {
			runtime.LockOSThread()
			fmt.Println("tid", unix.Gettid())
			wg.Done()
			wg.Wait()
			b := []byte{1}
			if first {
				unix.Write(out, b)
			}
			for {
				if n, _ := unix.Read(in, b); n != 1 {
					os.Exit(3)
				}
				unix.Write(out, b)
			}
		}
		wg.Add(2)
		go side(ab[0], ba[1], true)
		go side(ba[0], ab[1], false)
		wg.Wait()
	case "relay":
		// Three threads: C is woken in turn by A and by B (each writes it a
		// byte, then waits for C's reply), so C's last waker changes at
		// every wake-up.
		var toA, toB, toC [2]int
		if unix.Pipe(toA[:]) != nil || unix.Pipe(toB[:]) != nil || unix.Pipe(toC[:]) != nil {
			os.Exit(2)
		}
		var wg sync.WaitGroup
		wg.Add(3)
		hop := func(name string, f func(b []byte)) {
			runtime.LockOSThread()
			fmt.Println(name, unix.Gettid())
			wg.Done()
			wg.Wait()
			b := []byte{1}
			for {
				f(b)
			}
		}
		read := func(fd int, b []byte) {
			if n, _ := unix.Read(fd, b); n != 1 {
				os.Exit(3)
			}
		}
		go hop("a", func(b []byte) { unix.Write(toC[1], b); read(toA[0], b) })
		go hop("b", func(b []byte) { read(toB[0], b); unix.Write(toC[1], b) })
		go hop("c", func(b []byte) { read(toC[0], b); unix.Write(toB[1], b); read(toC[0], b); unix.Write(toA[1], b) })
		wg.Wait()
	case "dsleep":
		// One thread in uninterruptible sleep: on a line read it clones
		// a child with CLONE_VFORK (not sharing memory) and waits for it,
		// killable but not interruptible (D), while the child sleeps 3 s
		// and exits.
		runtime.LockOSThread()
		fmt.Println("tid", unix.Gettid())
		fmt.Println("ready")
		in := bufio.NewScanner(os.Stdin)
		if !in.Scan() {
			os.Exit(0)
		}
		// From here the end of stdin ends it, as it does the other workloads.
		go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
		ts := unix.Timespec{Sec: 3}
		pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, syscall.CLONE_VFORK|uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if errno != 0 {
			os.Exit(4)
		}
		if pid == 0 { // the child: raw system calls only
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafePointer(&ts)), 0, 0)
			syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(int(pid), &ws, 0, nil)
		fmt.Println("done")
		select {}
	case "forker":
		// Starts a child (the spin workload) on each line read.
		in := bufio.NewScanner(os.Stdin)
		fmt.Println("ready")
		for in.Scan() {
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), "GPUFEED_SCHEDBPF_CHILD=spin")
			out, _ := c.StdoutPipe()
			stdin, _ := c.StdinPipe()
			if err := c.Start(); err != nil {
				os.Exit(5)
			}
			fmt.Println("child", c.Process.Pid)
			sc := bufio.NewScanner(out)
			for sc.Scan() && sc.Text() != "ready" {
			}
			time.Sleep(500 * time.Millisecond)
			stdin.Close()
			c.Wait()
			fmt.Println("done")
		}
		os.Exit(0)
	case "unprivileged":
		_, err := Start([]int{os.Getpid()}, Options{})
		var u *bpfcap.Unavailable
		switch {
		case err == nil:
			fmt.Println("loaded")
		case errors.As(err, &u):
			fmt.Println("unavailable:", u.Missing)
		default:
			fmt.Println("error:", err)
		}
		os.Exit(0)
	}
	fmt.Println("ready")
	select {}
}

type workload struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	tids []int
	// named are the threads a workload printed as "NAME TID".
	named map[string]int
}

func start(t *testing.T, mode string) *workload {
	t.Helper()
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "GPUFEED_SCHEDBPF_CHILD="+mode)
	in, out := livetest.Start(t, c)
	w := &workload{cmd: c, in: in, out: out, named: map[string]int{}}
	for w.out.Scan() && w.out.Text() != "ready" {
		if v, ok := strings.CutPrefix(w.out.Text(), "tid "); ok {
			n, _ := strconv.Atoi(v)
			w.tids = append(w.tids, n)
		} else if name, v, ok := strings.Cut(w.out.Text(), " "); ok && len(name) == 1 {
			n, _ := strconv.Atoi(v)
			w.named[name] = n
		}
	}
	return w
}

func (w *workload) line(t *testing.T) string {
	t.Helper()
	if !w.out.Scan() {
		t.Fatalf("workload ended: %v", w.out.Err())
	}
	return w.out.Text()
}

func need(t *testing.T) {
	t.Helper()
	livetest.Need(t)
	if err := Check(""); err != nil {
		t.Skipf("not allowed here: %v", err)
	}
}

func startTracer(t *testing.T, pids ...int) *Tracer {
	t.Helper()
	tr, err := Start(pids, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// pair is one thread's BPF row, its schedstat read right after, and its
// schedstat and status counters read right before and right after: the
// counts the row holds lie between those (on a loaded host the test can
// wait 100 ms for a CPU between two reads, 25 switches of a thread that
// switches 250 times a second).
type pair struct {
	bpf          Thread
	sched        procfs.Schedstat
	before       procfs.Schedstat
	swBefore, sw [2]uint64
}

func readPairs(t *testing.T, tr *Tracer, pid int, tids []int) map[int]pair {
	t.Helper()
	out := map[int]pair{}
	sw0 := switches(t, pid, tids)
	for _, tid := range tids {
		out[tid] = pair{before: threadSchedstat(t, pid, tid), swBefore: sw0[tid]}
	}
	var s Snapshot
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		p := out[tid]
		p.sched = threadSchedstat(t, pid, tid)
		r := s.Get(tid)
		if r == nil {
			t.Fatalf("thread %d: no row", tid)
		}
		p.bpf = *r
		out[tid] = p
	}
	sw1 := switches(t, pid, tids)
	for _, tid := range tids {
		p := out[tid]
		p.sw = sw1[tid]
		out[tid] = p
	}
	return out
}

// within says whether a count taken between two readings a and b of a
// counter (a read before, then b after, each bracketed) lies between the
// least and the most the counter can have moved, give or take slack.
func within(got, aBefore, aAfter, bBefore, bAfter, slack uint64) bool {
	lo, hi := bBefore-min(bBefore, aAfter), bAfter-aBefore
	return got+slack >= lo && got <= hi+slack
}

// Time on CPU and on run queues, over 2 s (longer where a loaded host has
// not let each thread run 200 ms in that time) of four threads that spin and
// sleep, agree with the kernel's own schedstat for the same threads: within
// 3 % of the time plus 5 ms for CPU (the two are read a moment apart, and
// the kernel's sum_exec_runtime starts a slice at a slightly different
// point than the switch), within 10 % plus 10 ms for the run-queue wait.
// Voluntary and involuntary switches follow status's counters. The counts
// are compared with schedstat's and status's read right before and right
// after the programs' maps (a loaded host delays the test between reads).
//
// The kernel's sum_exec_runtime runs on the run queue's task clock, which
// leaves out the time the CPU spent in interrupts and, in a virtual
// machine, the time the hypervisor gave the CPU to another guest (steal):
// the programs' clock does not. So the programs' CPU may exceed
// schedstat's by as much of that time as the host saw in the window (all
// CPUs' irq, softirq and steal in /proc/stat): a loaded host's steal put
// them 2 to 4 % apart, every thread the same way.
func TestAgreesWithSchedstat(t *testing.T) {
	need(t)
	w := start(t, "spin")
	tr := startTracer(t, w.cmd.Process.Pid)
	time.Sleep(200 * time.Millisecond)
	lost0 := notTaskTime(t)
	a0 := tr.Missed()
	a := readPairs(t, tr, w.cmd.Process.Pid, w.tids)
	// 2 s, longer on a host so loaded that a thread has not run 200 ms
	// (up to 20 s): the comparison wants each thread to have switched
	// hundreds of times.
	for deadline := time.Now().Add(20 * time.Second); ; {
		time.Sleep(2 * time.Second)
		if time.Now().After(deadline) || ranAtLeast(t, w.cmd.Process.Pid, w.tids, a, 200*time.Millisecond) {
			break
		}
	}
	b := readPairs(t, tr, w.cmd.Process.Pid, w.tids)
	lost := notTaskTime(t) - lost0
	t.Logf("the host's irq, softirq and steal time in the window: %v", time.Duration(lost))
	// Events the kernel did not run the programs for (Tracer.Missed):
	// each loses at most one slice or one switch from a row.
	missed := tr.missedSince(t, a0)
	if missed > 0 {
		t.Logf("the kernel skipped the programs %d times in the window", missed)
	}
	var waited uint64
	for _, tid := range w.tids {
		run := b[tid].bpf.RunNS - a[tid].bpf.RunNS
		wantRun := b[tid].sched.RunNS - a[tid].sched.RunNS
		wait := b[tid].bpf.WaitNS - a[tid].bpf.WaitNS
		wantWait := b[tid].sched.WaitNS - a[tid].sched.WaitNS
		slices := b[tid].bpf.Slices - a[tid].bpf.Slices
		wantSlices := b[tid].sched.Slices - a[tid].sched.Slices
		t.Logf("thread %d: run %v (schedstat %v), wait %v (schedstat %v), slices %d (%d)", tid,
			time.Duration(run), time.Duration(wantRun), time.Duration(wait), time.Duration(wantWait), slices, wantSlices)
		if wantRun < uint64(200*time.Millisecond) {
			t.Errorf("thread %d ran %v in 20 s: the workload did not spin", tid, time.Duration(wantRun))
		}
		allowed := wantRun*3/100 + uint64(5*time.Millisecond)
		if run > wantRun {
			allowed += lost
		}
		if d := absDiff(run, wantRun); d > allowed {
			t.Errorf("thread %d: CPU %v, schedstat says %v", tid, time.Duration(run), time.Duration(wantRun))
		}
		if d := absDiff(wait, wantWait); d > wantWait/10+uint64(10*time.Millisecond) {
			t.Errorf("thread %d: run-queue wait %v, schedstat says %v", tid, time.Duration(wait), time.Duration(wantWait))
		}
		pa, pb := a[tid], b[tid]
		if !within(slices, pa.before.Slices, pa.sched.Slices, pb.before.Slices, pb.sched.Slices, wantSlices/50+2+missed) {
			t.Errorf("thread %d: %d slices, schedstat says %d to %d", tid, slices,
				pb.before.Slices-min(pb.before.Slices, pa.sched.Slices), pb.sched.Slices-pa.before.Slices)
		}
		vol, invol := pb.bpf.Voluntary-pa.bpf.Voluntary, pb.bpf.Involuntary-pa.bpf.Involuntary
		wantVol, wantInvol := pb.sw[0]-pa.swBefore[0], pb.sw[1]-pa.swBefore[1]
		if !within(vol, pa.swBefore[0], pa.sw[0], pb.swBefore[0], pb.sw[0], wantVol/50+2) ||
			!within(invol, pa.swBefore[1], pa.sw[1], pb.swBefore[1], pb.sw[1], wantInvol/50+2) {
			t.Errorf("thread %d: switches %d voluntary, %d involuntary; status says at most %d, %d (at least %d, %d)", tid, vol, invol,
				wantVol, wantInvol, pb.swBefore[0]-min(pb.swBefore[0], pa.sw[0]), pb.swBefore[1]-min(pb.swBefore[1], pa.sw[1]))
		}
		if vol+invol != slices && absDiff(vol+invol, slices) > 2+missed {
			t.Errorf("thread %d: %d switches out, %d in", tid, vol+invol, slices)
		}
		waited += wantWait
	}
	if waited == 0 {
		t.Log("no run-queue wait on this host: only the zero was compared")
	}
}

// threadSchedstat reads one thread's schedstat.
func threadSchedstat(t *testing.T, pid, tid int) procfs.Schedstat {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	var ss procfs.Schedstat
	if err := procfs.ParseSchedstat(b, &ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

// ranAtLeast says whether each thread's schedstat run time grew by d since
// the readings in a.
func ranAtLeast(t *testing.T, pid int, tids []int, a map[int]pair, d time.Duration) bool {
	t.Helper()
	for _, tid := range tids {
		ss := threadSchedstat(t, pid, tid)
		if ss.RunNS-a[tid].sched.RunNS < uint64(d) {
			return false
		}
	}
	return true
}

// missedSince is Tracer.Missed's growth since a reading of it.
func (tr *Tracer) missedSince(t *testing.T, from uint64) uint64 {
	t.Helper()
	n := tr.Missed()
	if n < from {
		t.Fatalf("the programs' recursion misses went back from %d to %d", from, n)
	}
	return n - from
}

func switches(t *testing.T, pid int, tids []int) map[int][2]uint64 {
	out := map[int][2]uint64{}
	for _, tid := range tids {
		st, err := procfs.ReadStatus(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			t.Fatal(err)
		}
		out[tid] = [2]uint64{st.VoluntaryCtxt, st.NonvoluntaryCtxt}
	}
	return out
}

// notTaskTime is the host's time in interrupts and stolen by the
// hypervisor, all CPUs, from /proc/stat's first line (irq, softirq, steal),
// in nanoseconds (USER_HZ ticks of 10 ms).
func notTaskTime(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		t.Fatalf("/proc/stat: first line %q", line)
	}
	var ticks uint64
	for _, v := range f[6:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("/proc/stat: %q: %v", line, err)
		}
		ticks += n
	}
	return ticks * uint64(10*time.Millisecond)
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// Two threads passing a byte back and forth each wake the other: the
// waker table holds both edges, each about as many times as the other
// thread was woken.
func TestPingPongWakers(t *testing.T) {
	need(t)
	w := start(t, "pingpong")
	tr := startTracer(t, w.cmd.Process.Pid)
	time.Sleep(time.Second)
	edges, dropped, err := tr.Wakers()
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 0 {
		t.Errorf("%d wake-ups dropped", dropped)
	}
	a, b := w.tids[0], w.tids[1]
	var s Snapshot
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	for _, e := range [][2]int{{a, b}, {b, a}} {
		var n, total uint64
		for _, x := range edges {
			if x.Wakee == e[0] {
				total += x.Count
				if x.Waker == e[1] {
					n = x.Count
					if x.WakerPID != w.cmd.Process.Pid {
						t.Errorf("waker %d: process %d, want %d", x.Waker, x.WakerPID, w.cmd.Process.Pid)
					}
				}
			}
		}
		t.Logf("thread %d woken %d times, %d of them by %d", e[0], total, n, e[1])
		if n < 1000 {
			t.Errorf("thread %d woken by %d only %d times in 1 s of ping-pong", e[0], e[1], n)
		}
		if n < total*9/10 {
			t.Errorf("thread %d: %d of its %d wake-ups by %d, want nearly all", e[0], n, total, e[1])
		}
		if r := s.Get(e[0]); r == nil || r.Wakeups < total {
			t.Errorf("thread %d: row %+v, want at least %d wake-ups", e[0], r, total)
		}
	}
}

// TestAlternatingWakers: a thread woken in turn by two others. Its row
// holds its last waker's run of wake-ups, which moves to the wakers' table
// at every change of waker: both edges are counted, each about half of
// its wake-ups, with the wakers' process and name, and together they add
// up to its wake-ups as its row counts them.
func TestAlternatingWakers(t *testing.T) {
	need(t)
	w := start(t, "relay")
	tr := startTracer(t, w.cmd.Process.Pid)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", w.cmd.Process.Pid))
	a, b, c := w.named["a"], w.named["b"], w.named["c"]
	// Read until each waker has woken C a thousand times: a second on an
	// idle host, longer when the CPUs are shared (CI ran 1,438 round trips
	// in its first second beside the end-to-end tests).
	var by map[int]uint64
	var total, dropped uint64
	var s Snapshot
	start := time.Now()
	for {
		time.Sleep(500 * time.Millisecond)
		edges, d, err := tr.Wakers()
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Read(&s); err != nil {
			t.Fatal(err)
		}
		by, total, dropped = map[int]uint64{}, 0, d
		for _, e := range edges {
			if e.Wakee != c {
				continue
			}
			by[e.Waker] += e.Count
			total += e.Count
			if (e.Waker == a || e.Waker == b) && (e.WakerPID != w.cmd.Process.Pid || e.WakerComm != strings.TrimSpace(string(comm))) {
				t.Errorf("edge %+v: want waker process %d named %q", e, w.cmd.Process.Pid, strings.TrimSpace(string(comm)))
			}
		}
		if by[a] >= 1000 && by[b] >= 1000 || time.Since(start) > 10*time.Second {
			break
		}
	}
	if dropped != 0 {
		t.Errorf("%d wake-ups dropped", dropped)
	}
	t.Logf("thread %d woken %d times in %v: %d by %d, %d by %d", c, total, time.Since(start).Round(time.Millisecond), by[a], a, by[b], b)
	if by[a] < 1000 || by[b] < 1000 {
		t.Fatalf("thread %d woken by %d %d times and by %d %d times in %v", c, a, by[a], b, by[b], time.Since(start).Round(time.Millisecond))
	}
	for _, n := range []uint64{by[a], by[b]} {
		if n < total*4/10 {
			t.Errorf("%d of %d wake-ups: want about half by each waker", n, total)
		}
	}
	// The row was read after the edges: it counts the wake-ups since.
	if r := s.Get(c); r == nil || r.Wakeups < total || r.Wakeups > total+total/10 {
		t.Errorf("thread %d: row %+v, want about %d wake-ups (its edges' sum)", c, r, total)
	}
}

// A thread waiting for a vfork child is in uninterruptible sleep (D) for
// the child's 3 s: the row says D while it waits, then counts the time.
func TestUninterruptibleSleep(t *testing.T) {
	need(t)
	w := start(t, "dsleep")
	tid := w.tids[0]
	tr := startTracer(t, w.cmd.Process.Pid)
	// The wait begins once the tracer is there (its start takes a second
	// or more on a loaded host), and the reading is taken once /proc shows
	// the thread in D: 3 s of it are left to read it in.
	fmt.Fprintln(w.in, "go")
	stat := fmt.Sprintf("/proc/%d/task/%d/stat", w.cmd.Process.Pid, tid)
	var st procfs.Stat
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if st, err = procfs.ReadStatOnce(stat); err != nil {
			t.Fatal(err)
		}
		if st.State == 'D' || time.Now().After(deadline) {
			break
		}
	}
	if st.State != 'D' {
		t.Fatalf("the workload's thread is not in D 2 s after it was told to wait (state %c)", st.State)
	}
	var s Snapshot
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	r := s.Get(tid)
	if r == nil || r.State != 'D' {
		t.Fatalf("mid-wait: row %+v; want state D, as /proc showed", r)
	}
	if line := w.line(t); line != "done" {
		t.Fatalf("workload: %q", line)
	}
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	r = s.Get(tid)
	t.Logf("row after: %+v", r)
	if r == nil || r.DNS < uint64(2800*time.Millisecond) || r.DNS > uint64(4500*time.Millisecond) {
		t.Errorf("D time: row %+v, want about 3 s", r)
	}
	if r != nil && r.State == 'D' {
		t.Errorf("after the wait: still D")
	}
}

// A child forked after the start is counted without being added, its
// threads' CPU included; at its exit its rows go once read.
func TestFollowsForks(t *testing.T) {
	need(t)
	w := start(t, "forker")
	tr := startTracer(t, w.cmd.Process.Pid)
	if !tr.Following() {
		t.Skip("this kernel cannot follow forks")
	}
	fmt.Fprintln(w.in, "go")
	var child int
	if _, err := fmt.Sscanf(w.line(t), "child %d", &child); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var s Snapshot
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	var run uint64
	rows := 0
	for _, r := range s.Threads {
		if r.PID == child {
			run += r.RunNS
			rows++
		}
	}
	if run < uint64(100*time.Millisecond) {
		t.Errorf("child %d: %d rows, %v on CPU; want its spinning threads counted", child, rows, time.Duration(run))
	}
	if tr.Forked() == 0 {
		t.Error("no fork counted")
	}
	if line := w.line(t); line != "done" {
		t.Fatalf("workload: %q", line)
	}
	exited := 0
	for range 2 {
		if err := tr.Read(&s); err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Threads {
			if r.PID == child && r.Exited {
				exited++
			}
		}
	}
	if exited < rows {
		t.Errorf("child %d: %d rows, %d read as exited", child, rows, exited)
	}
	for _, r := range s.Threads {
		if r.PID == child {
			t.Errorf("child %d: row %+v still there after its exit was read", child, r)
		}
	}
}

// A thread already spinning when it is watched, and not switched out
// since, is counted from the start (the seed iterator), not from its
// next switch-in.
func TestSeedsRunningThreads(t *testing.T) {
	need(t)
	w := start(t, "spin")
	tr := startTracer(t, w.cmd.Process.Pid)
	var s Snapshot
	if err := tr.Read(&s); err != nil {
		t.Fatal(err)
	}
	for _, tid := range w.tids {
		if s.Get(tid) == nil {
			t.Errorf("thread %d: no row right after the start", tid)
		}
	}
	// Every thread of the process has a row, asleep ones too.
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", w.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if r := s.Get(tid); r == nil || r.State == 0 {
			t.Errorf("thread %d: row %+v, want one with a state", tid, r)
		}
	}
}

// Without the capabilities (run as nobody) the tracer is not available,
// with the reason, and nothing is read.
func TestUnprivileged(t *testing.T) {
	livetest.Need(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to run the check as another user")
	}
	dir, err := os.MkdirTemp("", "schedbpf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin)
	c.Env = append(os.Environ(), "GPUFEED_SCHEDBPF_CHILD=unprivileged")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "unavailable: loading eBPF programs needs CAP_BPF and CAP_PERFMON") {
		t.Errorf("as nobody: %q, want not available naming the capabilities", got)
	}
}

// hold is the benchmark's "programs only" load (scripts/bench-sampler.sh),
// the events or the counters (GPUFEED_SCHEDBPF_MODE):
// GPUFEED_SCHEDBPF_HOLD=PID,SECONDS watches PID for SECONDS, reading the
// table every 100 ms as the sampler does, and prints the rows it read.
func hold(v string) {
	var pid int
	var secs float64
	if _, err := fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%d %g", &pid, &secs); err != nil {
		fmt.Fprintln(os.Stderr, "GPUFEED_SCHEDBPF_HOLD: want PID,SECONDS:", err)
		os.Exit(2)
	}
	// GPUFEED_SCHEDBPF_STATS=1: the kernel's run-time statistics on
	// (they add two clock reads to every run), each program's mean run
	// time printed at the end.
	if os.Getenv("GPUFEED_SCHEDBPF_STATS") == "1" {
		if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
			defer st.Close()
		}
	}
	// GPUFEED_SCHEDBPF_MODE=counters: the kernel's counters read by the
	// iterator, the wake-up program attached for one reading in ten, as
	// the sampler does at its defaults (never with
	// GPUFEED_SCHEDBPF_WAKERS=0); else the events.
	counters := os.Getenv("GPUFEED_SCHEDBPF_MODE") == "counters"
	tr, err := Start([]int{pid}, Options{NoFollow: true, Counters: counters})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer tr.Close()
	if os.Getenv("GPUFEED_SCHEDBPF_STATS") == "1" {
		defer func() {
			for name, p := range map[string]*ebpf.Program{"sched_switch": tr.objs.SchedSwitch, "sched_waking": tr.objs.SchedWaking,
				"sched_wakeup_new": tr.objs.SchedWakeupNew, "sched_process_exit": tr.objs.ThreadExit} {
				if ps, err := p.Stats(); err == nil && ps.RunCount > 0 {
					fmt.Printf("%s: %d runs, %.0f ns a run\n", name, ps.RunCount, float64(ps.Runtime.Nanoseconds())/float64(ps.RunCount))
				}
			}
		}()
	}
	// With the statistics on, every other program of the host that ran
	// during the hold is printed too (a peer tracer's, such as runqlat's,
	// started after this one): its runs and mean run time over the hold.
	var peers0 map[ebpf.ProgramID]progRuns
	if os.Getenv("GPUFEED_SCHEDBPF_STATS") == "1" {
		peers0 = hostPrograms()
	}
	var s Snapshot
	reads := 0
	for end := time.Now().Add(time.Duration(secs * float64(time.Second))); time.Now().Before(end); reads++ {
		if err := tr.Read(&s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := tr.SampleWakers(reads%10 == 0 && os.Getenv("GPUFEED_SCHEDBPF_WAKERS") != "0"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println(reads, "readings,", len(s.Threads), "rows")
	if peers0 != nil {
		ours := map[ebpf.ProgramID]bool{}
		for _, p := range []*ebpf.Program{tr.objs.SchedSwitch, tr.objs.SchedWaking, tr.objs.SchedWakeupNew, tr.objs.ThreadExit, tr.objs.Fork, tr.objs.Seed} {
			if p == nil {
				continue
			}
			if info, err := p.Info(); err == nil {
				if id, ok := info.ID(); ok {
					ours[id] = true
				}
			}
		}
		for id, r := range hostPrograms() {
			r0 := peers0[id]
			if ours[id] || r.runs <= r0.runs {
				continue
			}
			n := r.runs - r0.runs
			fmt.Printf("peer program %s (id %d): %d runs, %.0f ns a run\n", r.name, id, n, float64(r.ns-r0.ns)/float64(n))
		}
	}
}

type progRuns struct {
	name     string
	runs, ns uint64
}

// hostPrograms reads every loaded program's run statistics.
func hostPrograms() map[ebpf.ProgramID]progRuns {
	out := map[ebpf.ProgramID]progRuns{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return out
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		if ierr == nil && serr == nil {
			out[id] = progRuns{name: info.Name, runs: st.RunCount, ns: uint64(st.Runtime.Nanoseconds())}
		}
		p.Close()
	}
}

//go:build amd64 || arm64

package schedbpf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

func startCounters(t *testing.T, pids ...int) *Tracer {
	t.Helper()
	tr, err := Start(pids, Options{NoFollow: true, Counters: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// The counters are the kernel's own: each thread's run time, run-queue
// wait and slices lie between its schedstat read right before and right
// after the reading, with no slack; its switches between its status's; its
// CPU is one of the host's, and its state one /proc shows. Nothing is
// attached to the scheduler: no program ran on a context switch.
func TestCountersAreSchedstat(t *testing.T) {
	need(t)
	w := start(t, "spin")
	pid := w.cmd.Process.Pid
	tr := startCounters(t, pid)
	time.Sleep(300 * time.Millisecond)
	for range 3 {
		p := readPairs(t, tr, pid, w.tids)
		for _, tid := range w.tids {
			r := p[tid]
			if r.bpf.PID != pid || r.bpf.TID != tid {
				t.Fatalf("thread %d: row %+v", tid, r.bpf)
			}
			if !between(r.bpf.RunNS, r.before.RunNS, r.sched.RunNS) || !between(r.bpf.WaitNS, r.before.WaitNS, r.sched.WaitNS) ||
				!between(r.bpf.Slices, r.before.Slices, r.sched.Slices) {
				t.Errorf("thread %d: counters %+v, schedstat %+v before and %+v after", tid, r.bpf, r.before, r.sched)
			}
			if !between(r.bpf.Voluntary, r.swBefore[0], r.sw[0]) || !between(r.bpf.Involuntary, r.swBefore[1], r.sw[1]) {
				t.Errorf("thread %d: switches %d, %d; status %v before and %v after", tid, r.bpf.Voluntary, r.bpf.Involuntary, r.swBefore, r.sw)
			}
			if r.bpf.CPU < 0 || r.bpf.CPU >= 4096 {
				t.Errorf("thread %d: CPU %d", tid, r.bpf.CPU)
			}
			if !strings.ContainsRune("RS", rune(r.bpf.State)) {
				t.Errorf("thread %d: state %q, want R or S (it spins and sleeps)", tid, r.bpf.State)
			}
			if r.sched.RunNS == 0 {
				t.Errorf("thread %d never ran", tid)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tr.links != nil || tr.wake != nil {
		t.Errorf("programs attached to the scheduler: %d links, wake-ups %v", len(tr.links), tr.wake != nil)
	}
	if st, err := tr.objs.SchedWaking.Stats(); err == nil && st.RunCount > 0 {
		t.Errorf("the wake-up program ran %d times, never attached", st.RunCount)
	}
}

func between(v, lo, hi uint64) bool { return v >= lo && v <= hi }

// The faster reader walks a process's thread list only when its threads
// changed: a reading of the same threads goes through the references the
// last walk took. A thread started, one ended, and one ended as another
// started (the count unchanged) each make the next reading walk; every
// reading made while the threads held still holds exactly the process's
// threads.
func TestCountersHeldThreads(t *testing.T) {
	need(t)
	if !kernelAtLeast(t, 6, 7) {
		t.Skip("the task iterator kfuncs came with Linux 6.7")
	}
	// Python's threads are the OS's, one each, and it starts none of its
	// own: "+" starts one asleep (it prints "tid N"), "-" ends the last
	// one started, "-+" both at once (the thread count unchanged).
	pid, in, out := livetest.StartPython(t, `
import sys, threading
stops = []
def begin():
    stop, up, tid = threading.Event(), threading.Event(), []
    def run():
        tid.append(threading.get_native_id()); up.set(); stop.wait()
    threading.Thread(target=run, daemon=True).start()
    up.wait(); stops.append(stop)
    return tid[0]
print("ready", flush=True)
for line in sys.stdin:
    s = line.strip()
    if s.startswith("-"):
        stops.pop().set()
    print("tid %d" % begin() if s.endswith("+") else "ended", flush=True)
`)
	line := func() string {
		t.Helper()
		if !out.Scan() {
			t.Fatalf("the job ended: %v", out.Err())
		}
		return out.Text()
	}
	if l := line(); l != "ready" {
		t.Fatalf("the job said %q", l)
	}
	tr := startCounters(t, pid)
	if got := tr.Reader(); got != "per process" {
		t.Fatalf("reader %q (the faster one not used: %v)", got, tr.fastErr)
	}
	// read reads the counters and says whether it walked; the threads
	// listed before and after it must be the same, and the reading's.
	read := func(what string) (walked, stable bool) {
		t.Helper()
		before := listTIDs(t, pid)
		walks := tr.walks
		var s Snapshot
		if err := tr.Read(&s); err != nil {
			t.Fatal(err)
		}
		after := listTIDs(t, pid)
		if fmt.Sprint(before) != fmt.Sprint(after) {
			return tr.walks > walks, false // a thread came or went meanwhile: nothing to compare
		}
		var got []int
		for _, r := range s.Threads {
			if r.PID == pid {
				got = append(got, r.TID)
			}
		}
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(after) {
			t.Errorf("%s: the reading holds threads %v, the process %v", what, got, after)
		}
		return tr.walks > walks, true
	}
	// settled reads until a reading of unchanged threads, which read
	// checks.
	settled := func(what string) {
		t.Helper()
		for range 20 {
			if _, stable := read(what); stable {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: the process's threads never held still", what)
	}
	read("first reading")
	held := 0
	for range 5 {
		if walked, stable := read("same threads"); stable && !walked {
			held++
		}
	}
	if held == 0 {
		t.Errorf("five readings of unchanged threads all walked the thread list")
	}
	var mine []int // the threads started, in order
	for _, step := range []string{"+", "+", "-", "-+"} {
		fmt.Fprintln(in, step)
		var gone int
		if strings.HasPrefix(step, "-") {
			gone, mine = mine[len(mine)-1], mine[:len(mine)-1]
		}
		if l := line(); strings.HasPrefix(l, "tid ") {
			n, _ := strconv.Atoi(strings.TrimPrefix(l, "tid "))
			mine = append(mine, n)
		}
		// The ended thread's exit follows its goroutine's return.
		for i := 0; gone != 0 && slices.Contains(listTIDs(t, pid), gone); i++ {
			if i == 100 {
				t.Fatalf("thread %d still there 5 s after it was ended", gone)
			}
			time.Sleep(50 * time.Millisecond)
		}
		walked, stable := read("after " + step)
		if !walked {
			t.Errorf("the reading after %q did not walk the thread list", step)
		}
		if !stable {
			settled("after " + step)
		}
		if !settledAgain(read) {
			t.Errorf("the readings after %q keep walking the thread list", step)
		}
	}
}

// settledAgain reads up to five times more and says whether one of them,
// of unchanged threads, went through the references.
func settledAgain(read func(string) (bool, bool)) bool {
	for range 5 {
		if walked, stable := read("again"); stable && !walked {
			return true
		}
	}
	return false
}

// listTIDs lists the process's threads, sorted.
func listTIDs(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// A reading holds every thread of the watched processes and no other: a
// process added is read from then on, a process removed no longer is; an
// asleep thread is read as well as a running one.
//
// Every way: the program walking each process's threads (6.7 and later),
// an iterator step per thread (6.1 and later), one iterator over every
// task of the host filtered by the watched bitmap (before 6.1), and the
// walk with too few rows for the threads, which gives way to the steps.
func TestCountersWatchProcesses(t *testing.T) {
	need(t)
	for _, c := range []struct {
		name, reader string
		o            Options
		after        string // the reader after the readings
	}{
		{"per process", "per process", Options{}, "per process"},
		{"per thread", "per thread", Options{stepPerThread: true}, "per thread"},
		{"every task", "every task", Options{everyTask: true}, "every task"},
		{"rows full", "per process", Options{MaxThreads: 3}, "per thread"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.reader == "per process" && !kernelAtLeast(t, 6, 7) {
				t.Skip("the task iterator kfuncs came with Linux 6.7")
			}
			watchProcesses(t, c.reader, c.o, c.after)
		})
	}
}

// kernelAtLeast says the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}

func watchProcesses(t *testing.T, reader string, o Options, after string) {
	a, b := start(t, "spin"), start(t, "pingpong")
	pa, pb := a.cmd.Process.Pid, b.cmd.Process.Pid
	o.NoFollow, o.Counters = true, true
	tr, err := Start([]int{pa}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	if got := tr.Reader(); got != reader {
		t.Fatalf("reader %q (the faster one not used: %v), want %q", got, tr.fastErr, reader)
	}
	every := reader == "every task"
	if (tr.allIter != nil) != every || every && len(tr.procIters) != 0 {
		t.Fatalf("every task %v: %d iterators per process, one over every task %v", every, len(tr.procIters), tr.allIter != nil)
	}
	defer func() {
		if got := tr.Reader(); got != after {
			t.Errorf("reader %q after the readings (%v), want %q", got, tr.fastErr, after)
		}
		if after != reader && !errors.Is(tr.fastErr, errRowsFull) {
			t.Errorf("the faster reader given up for %v, want its rows full", tr.fastErr)
		}
	}()
	tids := func(pid int) map[int]bool {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		m := map[int]bool{}
		for _, e := range ents {
			n, _ := strconv.Atoi(e.Name())
			m[n] = true
		}
		return m
	}
	check := func(what string, want ...int) {
		t.Helper()
		var s Snapshot
		if err := tr.Read(&s); err != nil {
			t.Fatal(err)
		}
		if !s.Complete {
			t.Errorf("%s: reading not complete", what)
		}
		got := map[int]map[int]bool{}
		for _, r := range s.Threads {
			if got[r.PID] == nil {
				got[r.PID] = map[int]bool{}
			}
			got[r.PID][r.TID] = true
			if r.State == 0 {
				t.Errorf("%s: thread %d without a state", what, r.TID)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: processes %v, want %v", what, keys(got), want)
		}
		for _, pid := range want {
			for tid := range tids(pid) {
				if !got[pid][tid] {
					t.Errorf("%s: pid %d's thread %d not read", what, pid, tid)
				}
			}
		}
	}
	check("one process", pa)
	if err := tr.Add(pb); err != nil {
		t.Fatal(err)
	}
	check("two processes", pa, pb)
	tr.Remove(pa)
	check("the first removed", pb)
}

func keys(m map[int]map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The waker graph is counted only while SampleWakers has the program
// attached: a ping-pong's edges grow while it is, and not after; the time
// attached is what WakersSampled says.
func TestCountersSampleWakers(t *testing.T) {
	need(t)
	w := start(t, "pingpong")
	tr := startCounters(t, w.cmd.Process.Pid)
	count := func() uint64 {
		edges, _, err := tr.Wakers()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, e := range edges {
			if e.WakerPID == w.cmd.Process.Pid && (e.Wakee == w.tids[0] && e.Waker == w.tids[1] || e.Wakee == w.tids[1] && e.Waker == w.tids[0]) {
				n += e.Count
			}
		}
		return n
	}
	time.Sleep(200 * time.Millisecond)
	if n := count(); n != 0 {
		t.Errorf("%d wake-ups counted before the program was attached", n)
	}
	t0 := time.Now()
	if err := tr.SampleWakers(true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := tr.SampleWakers(false); err != nil {
		t.Fatal(err)
	}
	held := time.Since(t0)
	n1 := count()
	time.Sleep(300 * time.Millisecond)
	n2 := count()
	t.Logf("%d wake-ups counted in %v attached, %d after 300 ms detached", n1, tr.WakersSampled(), n2)
	if n1 < 100 {
		t.Errorf("%d wake-ups of the ping-pong counted in 300 ms", n1)
	}
	if n2 != n1 {
		t.Errorf("counted %d more wake-ups detached", n2-n1)
	}
	if d := tr.WakersSampled(); d < 300*time.Millisecond || d > held {
		t.Errorf("sampled %v, want 300 ms to %v", d, held)
	}
}

// GetAt finds a row where it was, and one that moved through the index,
// updating where to look next; a thread not in the reading is nil.
func TestGetAtFollowsMovedRows(t *testing.T) {
	s := Snapshot{Threads: []Thread{{TID: 10}, {TID: 11}, {TID: 12}}}
	at := 1
	if r := s.GetAt(11, &at); r == nil || r.TID != 11 || at != 1 || s.indexed {
		t.Errorf("in place: %+v at %d (indexed %v)", r, at, s.indexed)
	}
	// The next reading: thread 10 gone, 13 new; 11 moved to the front.
	s.Threads, s.indexed = []Thread{{TID: 11}, {TID: 12}, {TID: 13}}, false
	if r := s.GetAt(11, &at); r == nil || r.TID != 11 || at != 0 {
		t.Errorf("moved: %+v at %d", r, at)
	}
	gone := 0
	if r := s.GetAt(10, &gone); r != nil {
		t.Errorf("a thread not in the reading: %+v", r)
	}
	if r := s.Get(13); r == nil || r.TID != 13 {
		t.Errorf("Get: %+v", r)
	}
}

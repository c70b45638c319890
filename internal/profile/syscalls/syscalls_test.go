//go:build amd64 || arm64

package syscalls

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// The workload: the test binary run again with GPUFEED_SYSCALLS_CHILD set.
// On each line read from stdin ("N M K") it makes N getppid calls, M
// close(-1) calls (each fails with EBADF) and, when K > 0, runs itself
// again as a grandchild making K getppid calls; then it says "done".
func TestMain(m *testing.M) {
	if os.Getenv("GPUFEED_SYSCALLS_CHILD") != "" {
		child()
		return
	}
	os.Exit(m.Run())
}

func child() {
	if n, err := strconv.Atoi(os.Getenv("GPUFEED_SYSCALLS_GRANDCHILD")); err == nil {
		for i := 0; i < n; i++ {
			syscall.Getppid()
		}
		return
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n, m, k int
		if _, err := fmt.Sscan(in.Text(), &n, &m, &k); err != nil {
			os.Exit(2)
		}
		for i := 0; i < n; i++ {
			syscall.Getppid()
		}
		for i := 0; i < m; i++ {
			syscall.Close(-1)
		}
		if k > 0 {
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), "GPUFEED_SYSCALLS_GRANDCHILD="+strconv.Itoa(k))
			if err := c.Run(); err != nil {
				os.Exit(3)
			}
		}
		fmt.Println("done")
	}
}

type workload struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startWorkload(t *testing.T) *workload {
	t.Helper()
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "GPUFEED_SYSCALLS_CHILD=1")
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workload{cmd: c, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { in.Close(); c.Wait() })
	return w
}

func (w *workload) do(t *testing.T, n, m, k int) {
	t.Helper()
	fmt.Fprintf(w.in, "%d %d %d\n", n, m, k)
	if !w.out.Scan() || w.out.Text() != "done" {
		t.Fatalf("workload: want done, got %q (%v)", w.out.Text(), w.out.Err())
	}
}

func need(t *testing.T) {
	t.Helper()
	if err := Check(""); err != nil {
		t.Skipf("not allowed here: %v", err)
	}
}

// calls sums the rows of syscall name over the threads of pid.
func calls(s *profile.SyscallSummary, pid int, name string) (n, errs uint64) {
	for _, th := range s.Threads {
		if th.PID == pid {
			r := th.Stat(name)
			n += r.Calls
			errs += r.Errors
		}
	}
	return n, errs
}

// The counts are the workload's, exactly, each time: the calls it made
// in the window, its failed calls as errors, nothing before the window.
func TestCountsMatchTheWorkload(t *testing.T) {
	need(t)
	t.Run("slots", func(t *testing.T) { countsMatch(t, Options{}) })
	// Every thread in one slot: the workload's threads (the Go runtime's
	// and the one making the calls) take turns in it or go through the
	// starts hash; nothing is lost or counted twice either way.
	t.Run("one-slot", func(t *testing.T) { countsMatch(t, Options{oneSlot: true}) })
}

func countsMatch(t *testing.T, o Options) {
	w := startWorkload(t)
	w.do(t, 1000, 0, 0) // before the window: not counted
	var holder *workload
	if o.oneSlot {
		// Another process's thread takes the one slot first (and keeps it:
		// it does not exit), so that the workload's calls go through the
		// starts hash, whatever its idle runtime threads do.
		holder = startWorkload(t)
	}
	for round := 0; round < 3; round++ {
		pids := []int{w.cmd.Process.Pid}
		if holder != nil {
			pids = append(pids, holder.cmd.Process.Pid)
		}
		tr, err := Start(pids, o)
		if err != nil {
			t.Fatal(err)
		}
		if holder != nil {
			holder.do(t, 0, 1, 0) // a close(-1): the table's getppid total stays the workload's
		}
		n := 5000 + 1000*round
		w.do(t, n, 700, 0)
		hashed := hashedThreads(tr)
		s := tr.Stop()
		if o.oneSlot && hashed == 0 {
			t.Errorf("round %d: one slot, and no thread went through the starts hash", round)
		}
		if s.State != profile.StateOn {
			t.Fatalf("state %q", s.State)
		}
		if got, errs := calls(s, w.cmd.Process.Pid, "getppid"); got != uint64(n) || errs != 0 {
			t.Errorf("round %d: getppid: %d calls, %d errors; want %d, 0", round, got, errs, n)
		}
		if got, errs := calls(s, w.cmd.Process.Pid, "close"); got != 700 || errs != 700 {
			t.Errorf("round %d: close(-1): %d calls, %d errors; want 700, 700", round, got, errs)
		}
		if tot := s.Total("getppid"); tot.Calls != uint64(n) || tot.TimeNS <= 0 {
			t.Errorf("round %d: total getppid %+v", round, tot)
		}
		if s.Dropped != 0 {
			t.Errorf("dropped %d", s.Dropped)
		}
	}
}

// A child forked in the window is counted under its own pid, without
// being added, where the kernel has BTF.
func TestFollowsChildren(t *testing.T) {
	need(t)
	w := startWorkload(t)
	tr, err := Start([]int{w.cmd.Process.Pid}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Following() {
		tr.Stop()
		t.Skip("no kernel BTF: children are not followed")
	}
	w.do(t, 10, 0, 4321)
	s := tr.Stop()
	var got uint64
	for _, th := range s.Threads {
		if th.PID != w.cmd.Process.Pid {
			got += th.Stat("getppid").Calls
		}
	}
	if got != 4321 {
		t.Errorf("grandchild's getppid: %d, want 4321 (pids %v)", got, s.PIDs)
	}
	if len(s.PIDs) < 2 {
		t.Errorf("pids %v: the child was not added", s.PIDs)
	}
}

// A thread blocked in a syscall through the whole window returned
// nothing, but its wait shows as in progress.
func TestBlockedThreadInProgress(t *testing.T) {
	need(t)
	t.Run("slots", func(t *testing.T) { blockedInProgress(t, Options{}) })
	t.Run("one-slot", func(t *testing.T) { blockedInProgress(t, Options{oneSlot: true}) })
}

func blockedInProgress(t *testing.T, o Options) {
	// A call entered in the window and still running is reported (one
	// entered before it is not seen at all).
	c2 := exec.Command("sh", "-c", "read x")
	c2in, _ := c2.StdinPipe()
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c2in.Close(); c2.Wait() }()
	pids := []int{c2.Process.Pid}
	var w *workload
	if o.oneSlot {
		// A busy multi-threaded process takes the one slot first, so that
		// sh's call in progress is in the starts hash.
		w = startWorkload(t)
		pids = append(pids, w.cmd.Process.Pid)
	}
	tr, err := Start(pids, o)
	if err != nil {
		t.Fatal(err)
	}
	if w != nil {
		w.do(t, 100, 0, 0)
	}
	// sh is already blocked in read(0); the first byte wakes it, it reads
	// again and blocks inside the window.
	c2in.Write([]byte("a"))
	time.Sleep(300 * time.Millisecond)
	hashed := hashedThreads(tr)
	s := tr.Stop()
	if o.oneSlot && hashed == 0 {
		t.Errorf("one slot, and no thread went through the starts hash")
	}
	th, ok := s.Thread(c2.Process.Pid)
	if !ok || th.InProgress == nil || th.InProgress.Name != "read" || th.InProgress.SinceNS < int64(200*time.Millisecond) {
		t.Errorf("sh blocked in read: %+v", th)
	}
}

// hashedThreads is how many threads found their slot held by another
// thread and went through the starts hash.
func hashedThreads(tr *Tracer) uint64 {
	var c uint64
	tr.objs.Counters.Lookup(uint32(3), &c)
	return c
}

func TestUnavailableNamesTheCapability(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir+"/self", 0o755)
	os.WriteFile(dir+"/self/status", []byte("Name:\tx\nCapEff:\t0000000000000000\n"), 0o644)
	err := Check(dir)
	var u *bpfcap.Unavailable
	if !errors.As(err, &u) || u.Missing != "loading eBPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root)" {
		t.Fatalf("got %v", err)
	}
	os.WriteFile(dir+"/self/status", []byte("CapEff:\t000000c000000000\n"), 0o644) // CAP_PERFMON|CAP_BPF
	if err := Check(dir); err != nil {
		t.Fatalf("CAP_BPF and CAP_PERFMON: %v", err)
	}
}

// Who waits on whom: a Python consumer thread blocked on a queue the main
// thread feeds waits on one futex word that the main thread wakes.
func TestFutexWaiterAndWaker(t *testing.T) {
	need(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	const script = `
import queue, sys, threading, time
q = queue.Queue()
def consume():
    print(threading.get_native_id(), flush=True)
    while True:
        q.get()
threading.Thread(target=consume, daemon=True).start()
sys.stdin.readline()
for _ in range(200):
    q.put(1)
    time.sleep(0.002)
print("done", flush=True)
sys.stdin.readline()
`
	c := exec.Command(py, "-c", script)
	in, _ := c.StdinPipe()
	outp, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); c.Process.Kill(); c.Wait() }()
	out := bufio.NewScanner(outp)
	if !out.Scan() {
		t.Fatal("no consumer tid")
	}
	consumer, _ := strconv.Atoi(out.Text())
	tr, err := Start([]int{c.Process.Pid}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	if !out.Scan() || out.Text() != "done" {
		t.Fatal("the script did not finish")
	}
	s := tr.Stop()
	for _, w := range s.Futexes {
		if len(w.Waiters) > 0 && w.Waiters[0].TID == consumer && slices.ContainsFunc(w.Wakers, func(f profile.FutexThread) bool { return f.TID == c.Process.Pid }) {
			if w.Waiters[0].Calls < 100 || w.WaitNS < int64(200*time.Millisecond) {
				t.Errorf("the consumer's waits: %+v", w)
			}
			return
		}
	}
	t.Errorf("no futex word the consumer %d waits on and the main thread %d wakes: %+v", consumer, c.Process.Pid, s.Futexes)
}

package sample

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// TestDiscoverEvery: a child forked 300 ms into a 1.5 s window is found at
// the next tick by default, and only at the next listing when the tree is
// listed every second.
func TestDiscoverEvery(t *testing.T) {
	livetest.Need(t)
	for _, c := range []struct {
		every            time.Duration
		minSeen, maxSeen time.Duration
	}{
		{0, 250 * time.Millisecond, 600 * time.Millisecond},
		{time.Second, 900 * time.Millisecond, 1400 * time.Millisecond},
	} {
		cmd := exec.Command("sh", "-c", "sleep 0.3; sleep 5 & wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fs, err := procfs.NewFS("", "")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{FS: fs, PID: cmd.Process.Pid, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond,
			DiscoverEvery: c.every})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := s.Run(context.Background())
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		var seen time.Duration = -1
		for k, p := range tl.Procs {
			// the second sleep (the first one runs from the start)
			if k.PID != cmd.Process.Pid && p.Comm == "sleep" && time.Duration(p.FirstSeen) > seen {
				seen = time.Duration(p.FirstSeen)
			}
		}
		if seen < c.minSeen || seen > c.maxSeen {
			t.Errorf("DiscoverEvery %v: the child first seen at %v, want within %v..%v", c.every, seen, c.minSeen, c.maxSeen)
		}
	}
}

// TestListingOnlyWhenAPidWasHandedOut: between slow ticks, the tree is
// listed again only when loadavg's last pid moved (a process or thread was
// created on the host). With a loadavg that never moves, a 1.5 s window at
// 50 ms lists it at the first tick, the slow tick and the last one, not at
// each of its thirty ticks.
func TestListingOnlyWhenAPidWasHandedOut(t *testing.T) {
	livetest.Need(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	still := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(still, []byte("0.50 0.40 0.30 1/200 31337\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, tl := runSampler(t, Config{PID: cmd.Process.Pid, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond,
		SlowEvery: time.Second}, func(s *Sampler) {
		var err error
		if s.loadavg, err = procfs.OpenKept(still, ""); err != nil {
			t.Fatal(err)
		}
	})
	if len(tl.Ticks) < 20 {
		t.Fatalf("only %d ticks in 1.5 s at 50 ms", len(tl.Ticks))
	}
	if s.gen > 4 {
		t.Errorf("the tree was listed %d times in %d ticks while no pid was handed out; want the first, slow and last ticks only", s.gen, len(tl.Ticks))
	}
	// Its task/ is listed when it is first tracked and at the last tick:
	// no thread can have come (the count did not change, no pid was handed
	// out), so the slow ticks do not list it.
	if s.taskScans > 2 {
		t.Errorf("the target's threads were listed %d times while no pid was handed out; want 2", s.taskScans)
	}
	if _, ok := tl.Procs[timeline.ProcKey{PID: cmd.Process.Pid, StartTime: tl.Meta.Target.StartTime}]; !ok {
		t.Errorf("the target is missing from the timeline")
	}
}

// TestSameCountThreadChurnIsSeen: a process whose worker thread is replaced
// by a new one in a moment, so that ticks count the same number of threads,
// still has each new worker found, now that the slow tier lists task/ again
// only when a pid was handed out (a new thread is a new pid). The tick that
// finds the old worker gone lists task/ too (the count it keeps then
// differs); either catches the new one.
func TestSameCountThreadChurnIsSeen(t *testing.T) {
	livetest.Need(t)
	ids := filepath.Join(t.TempDir(), "tids")
	py := exec.Command("python3", "-c", `import sys, threading, time
out = open(sys.argv[1], "w")
stop = None
for i in range(8):
    ev = threading.Event()
    def work(ev=ev):
        out.write("%d\n" % threading.get_native_id()); out.flush()
        ev.wait()
    threading.Thread(target=work).start()
    if stop:
        stop.set()
    stop = ev
    time.sleep(0.4)
stop.set()
time.sleep(5)`, ids)
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = py.Process.Kill(); _ = py.Wait() }()
	// The window begins with the first worker: on a crowded host the
	// interpreter's start took long enough that the last worker came after
	// a window begun at the fork.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(ids); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job started no worker within 30 s")
		}
	}
	s, tl := runSampler(t, Config{PID: py.Process.Pid, Interval: 100 * time.Millisecond, Duration: 3500 * time.Millisecond,
		SlowEvery: 300 * time.Millisecond}, nil)
	seen := map[int]bool{}
	for k := range tl.Threads {
		seen[k.TID] = true
	}
	b, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	tids := strings.Fields(string(b))
	if len(tids) != 8 {
		t.Fatalf("the job started %d workers, want 8", len(tids))
	}
	// Each worker lives 400 ms: at least one slow tick (300 ms) falls in it.
	// The first may be gone before the first tick (python's start-up).
	for i, id := range tids[1:] {
		tid, _ := strconv.Atoi(id)
		if !seen[tid] {
			t.Errorf("worker %d (thread %d) never seen (%d listings of task/)", i+1, tid, s.taskScans)
		}
	}
}

// runSampler samples the host's /proc with cfg (its FS set here), after
// setup (nil: none) has adjusted the sampler, and returns both.
func runSampler(t *testing.T, cfg Config, setup func(*Sampler)) (*Sampler, *timeline.Timeline) {
	t.Helper()
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.FS = fs
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, tl
}

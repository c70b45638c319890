package sample

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	still := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(still, []byte("0.50 0.40 0.30 1/200 31337\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{FS: fs, PID: cmd.Process.Pid, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond,
		SlowEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s.loadavg, err = procfs.OpenKept(still, ""); err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Ticks) < 20 {
		t.Fatalf("only %d ticks in 1.5 s at 50 ms", len(tl.Ticks))
	}
	if s.gen > 4 {
		t.Errorf("the tree was listed %d times in %d ticks while no pid was handed out; want the first, slow and last ticks only", s.gen, len(tl.Ticks))
	}
	if _, ok := tl.Procs[timeline.ProcKey{PID: cmd.Process.Pid, StartTime: tl.Meta.Target.StartTime}]; !ok {
		t.Errorf("the target is missing from the timeline")
	}
}

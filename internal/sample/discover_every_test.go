package sample

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
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

package diagnose

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/cpusample"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// Attached to a running Python loop with --profile auto, the window holds
// the profile of its main thread, in the interpreter; a child of another
// tree is not kept.
func TestRunAttachedProfilesTheTree(t *testing.T) {
	livetest.Need(t)
	fsys := fsOrSkip(t)
	if err := cpusample.Check(""); err != nil {
		t.Skip(err)
	}
	job := exec.Command("/usr/bin/python3", "-c", "while True: sum(i * i for i in range(1000))")
	if err := job.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { job.Process.Kill(); job.Wait() }()
	time.Sleep(300 * time.Millisecond)
	res, err := Run(context.Background(), Options{FS: fsys, PID: job.Process.Pid, Interval: 100 * time.Millisecond,
		Duration: 1500 * time.Millisecond, Profile: ProfileAuto})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Timeline.Meta.CPUProfile
	if p == nil || p.State != profile.StateOn {
		t.Fatalf("want a profile taken, got %+v", p)
	}
	th, ok := p.Thread(job.Process.Pid)
	if !ok || th.Share(profile.Interpreter) < 0.6 {
		t.Fatalf("main thread: %+v", th)
	}
	for _, o := range p.Threads {
		if o.PID != job.Process.Pid {
			t.Errorf("a thread outside the tree kept: %+v", o)
		}
	}
}

// With perf_event_paranoid 2 and no capability (a fixture /proc), auto
// says what is missing and what it cannot tell apart; on fails early.
func TestProfileNotAllowed(t *testing.T) {
	root := t.TempDir()
	for rel, s := range map[string]string{"self/status": "CapEff:\t0000000000000000\n", "sys/kernel/perf_event_paranoid": "2\n"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), []byte(s), 0o644)
	}
	fsys := procfs.FS{Proc: root, Sys: root}
	start, err := profileStarter(fsys, ProfileAuto, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := start().Stop()
	if p.State != profile.StateUnavailable || !strings.Contains(p.Missing, "CAP_PERFMON") || !strings.Contains(p.CannotTell, "driver syncs") {
		t.Fatalf("auto: %+v", p)
	}
	if _, err := profileStarter(fsys, ProfileOn, 1); err == nil || !strings.Contains(err.Error(), "perf_event_paranoid at 0 or below (it is 2)") {
		t.Fatalf("on: %v", err)
	}
	if err := CheckProfile(fsys, ProfileOn); err == nil {
		t.Fatal("on: CheckProfile passed")
	}
	if err := CheckProfile(fsys, "sometimes"); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Fatalf("bad mode: %v", err)
	}
}

package diagnose

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sample"
)

// The pipeline runs here without the binary: attached to a running
// process, and launching a command, as gpufeed diagnose does.

func fsOrSkip(t *testing.T) procfs.FS {
	t.Helper()
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Skip(err)
	}
	return fs
}

func TestRunAttachedJudgesTheWindow(t *testing.T) {
	livetest.Need(t)
	job := exec.Command("sh", "-c", "while :; do :; done")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	res, err := Run(t.Context(), Options{FS: fsOrSkip(t), PID: job.Process.Pid, Interval: 50 * time.Millisecond, Duration: 1500 * time.Millisecond, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Command != nil || res.Timeline == nil || res.Report == nil {
		t.Fatalf("result %+v", res)
	}
	if res.Report.Target.PID != job.Process.Pid || len(res.Timeline.Ticks) < 20 {
		t.Errorf("target %+v, %d ticks", res.Report.Target, len(res.Timeline.Ticks))
	}
	if res.Report.Verdict == nil || res.Report.Verdict.Class == finding.Stalled {
		t.Errorf("a busy loop is judged, and it is not stalled: %+v", res.Report.Verdict)
	}
	if res.Timeline.Meta.Checks == nil {
		t.Error("the platform checks run at the end of the window")
	}
}

func TestRunLaunchedGivesTheCommandsStatus(t *testing.T) {
	livetest.Need(t)
	var out strings.Builder
	res, err := Run(t.Context(), Options{FS: fsOrSkip(t), Command: []string{"sh", "-c", "echo hello; sleep 1; exit 3"},
		CommandOutput: &out, Interval: 50 * time.Millisecond, Duration: 3 * time.Second, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Command == nil || res.Report == nil {
		t.Fatalf("result %+v", res)
	}
	if code := res.Command.Wait(); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	if ec := res.Timeline.Meta.Target.ExitCode; ec == nil || *ec != 3 || res.Timeline.Meta.Ended != "target exited" {
		t.Errorf("the command ended inside the window, with 3: ended %q, exit %v", res.Timeline.Meta.Ended, ec)
	}
	if out.String() != "hello\n" {
		t.Errorf("the command's output went elsewhere: %q", out.String())
	}
}

func TestRunCommandThatCannotStart(t *testing.T) {
	_, err := Run(t.Context(), Options{FS: fsOrSkip(t), Command: []string{"/nonexistent/gpufeed-test"}, Interval: 50 * time.Millisecond, Duration: time.Second})
	var se *StartError
	if !errors.As(err, &se) || se.ExitCode != ExitNotFound || !strings.Contains(se.Error(), "command not found") {
		t.Errorf("got %v, want a StartError with status %d", err, ExitNotFound)
	}
	_, err = Run(t.Context(), Options{FS: fsOrSkip(t), Command: []string{t.TempDir()}, Interval: 50 * time.Millisecond, Duration: time.Second})
	if !errors.As(err, &se) || se.ExitCode != ExitNotExecutable {
		t.Errorf("a directory: got %v, want a StartError with status %d", err, ExitNotExecutable)
	}
}

func TestRunNoSuchProcess(t *testing.T) {
	_, err := Run(t.Context(), Options{FS: fsOrSkip(t), PID: 1 << 30, Interval: 50 * time.Millisecond, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("got %v", err)
	}
	if _, err := Run(t.Context(), Options{FS: fsOrSkip(t), Interval: 50 * time.Millisecond, Duration: time.Second}); err == nil {
		t.Error("neither a PID nor a command: want an error")
	}
}

// TestRunLaunchedIsHeldUntilTheWindow: a launched command runs its first
// instruction at the window's first reading, however long gpufeed takes
// to get ready (here a consumer of the samples that takes 400 ms to set
// up, as loading the probes takes on a loaded host): its start-up is in
// the window. Without the hold the command read the clock 400 ms before
// the window began.
func TestRunLaunchedIsHeldUntilTheWindow(t *testing.T) {
	livetest.Need(t)
	first := filepath.Join(t.TempDir(), "first")
	res, err := Run(t.Context(), Options{FS: fsOrSkip(t),
		Command:  []string{"sh", "-c", `cut -d' ' -f1 /proc/uptime > "$0"; sleep 3`, first},
		Interval: 50 * time.Millisecond, Duration: 2 * time.Second, Tool: "test",
		Tap: func(next sample.Recorder) sample.Recorder { time.Sleep(400 * time.Millisecond); return next }})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Command.Wait()
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	ran, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Timeline.Meta
	window := float64(m.UptimeNS) / 1e9
	forked := float64(m.Target.StartTime) / float64(m.ClockTick)
	t.Logf("forked at %.2f s, first reading of the clock %.2f s, window from %.2f s (uptime)", forked, ran, window)
	if !m.Target.Held {
		t.Error("the launched command is not marked as held")
	}
	if forked > window-0.3 {
		t.Errorf("forked at %.2f s, the window began at %.2f s: the set-up's 400 ms did not come between them", forked, window)
	}
	// uptime has a 10 ms grain; the release comes just before the
	// window's clock is read.
	if ran < window-0.05 {
		t.Errorf("the command read the clock at %.2f s, %.0f ms before the window began at %.2f s: it was not held", ran, (window-ran)*1000, window)
	}
	for _, n := range m.Notes {
		if strings.Contains(n, "could not hold") {
			t.Errorf("a held command's report says it was not held: %s", n)
		}
	}
}

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

// TestHeldCommandCancelledNeverRuns: a held command that gpufeed cancels
// (an error before the window) never runs; one let go runs as the
// command, under the held child's pid; one whose execve fails is a
// StartError with the shell's status.
func TestHeldCommandCancelledNeverRuns(t *testing.T) {
	livetest.Need(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	newCmd := func() *exec.Cmd { return exec.Command("sh", "-c", `echo $$ > "$0"`, mark) }
	cmd, h, err := startHeld(newCmd())
	if err != nil || !h.held {
		t.Fatalf("held %v, err %v", h != nil && h.held, err)
	}
	time.Sleep(200 * time.Millisecond)
	h.cancel(cmd.Process)
	if code := ExitStatus(cmd.Wait()); code != holdCancelled {
		t.Errorf("cancelled: exit %d, want %d", code, holdCancelled)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("a cancelled command ran")
	}

	cmd, h, err = startHeld(newCmd())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the command ran before it was let go")
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	if code := ExitStatus(cmd.Wait()); code != 0 {
		t.Errorf("let go: exit %d", code)
	}
	if b, err := os.ReadFile(mark); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the command ran as %q (%v), want the held child's pid %d", b, err, cmd.Process.Pid)
	}

	bad := filepath.Join(dir, "garbage")
	if err := os.WriteFile(bad, []byte("not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, h, err = startHeld(exec.Command(bad))
	if err != nil {
		t.Fatal(err)
	}
	var se *StartError
	if err := h.release(); !errors.As(err, &se) || se.ExitCode != ExitNotExecutable || !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("an execve that fails: %v, want a StartError with status %d", err, ExitNotExecutable)
	}
	cmd.Wait()
}

// TestUnheldCommandSaysHowLongItRan: where the held child cannot be
// started, the command starts at once, and the report's note says how
// long it ran before the window and why.
func TestUnheldCommandSaysHowLongItRan(t *testing.T) {
	livetest.Need(t)
	defer func(e string) { gateExe = e }(gateExe)
	gateExe = filepath.Join(t.TempDir(), "no-gpufeed")
	res, err := Run(t.Context(), Options{FS: fsOrSkip(t), Command: []string{"sh", "-c", "sleep 3"},
		Interval: 50 * time.Millisecond, Duration: 2 * time.Second, Tool: "test",
		Tap: func(next sample.Recorder) sample.Recorder { time.Sleep(300 * time.Millisecond); return next }})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Command.Wait()
	if res.Timeline.Meta.Target.Held {
		t.Error("marked held")
	}
	said := ""
	for _, n := range res.Timeline.Meta.Notes {
		if strings.Contains(n, "before the window's first reading") {
			said = n
		}
	}
	if !strings.Contains(said, "could not start its own binary to hold the command") || strings.Contains(said, "ran 0.0 s") {
		t.Errorf("note %q: want how long it ran before the window and why", said)
	}
}

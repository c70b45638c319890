package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/sim"
)

// simDevice serves a simulated GPU for the test on a socket of its own.
func simDevice(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(sock, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); srv.Close(); <-served })
	return sock
}

// phases is the command line of the two-phase workload: GPU-bound for p1
// seconds, then launch-bound for p2.
func phases(t *testing.T, p1, p2 int) []string {
	t.Helper()
	// The interpreter itself, not a launcher in front of it (pyenv's
	// shim is a shell script that, on a loaded host, runs for seconds
	// before it becomes Python: its own start-up is tested elsewhere).
	python := interpreter(t)
	pydir, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("testdata/phases.py")
	if err != nil {
		t.Fatal(err)
	}
	return []string{python, script, pydir, strconv.Itoa(p1), strconv.Itoa(p2)}
}

// tmuxSession runs command in a detached tmux session of its own server
// (its own socket name, so that tests running at once never meet) and
// returns a function capturing the pane (with escapes when esc).
type tmuxSession struct {
	t      *testing.T
	server string
}

func newTmux(t *testing.T, width, height int, env []string, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("GPUFEED_REQUIRE_TMUX") != "" {
			t.Fatal("tmux not found")
		}
		t.Skip("tmux not found: the live view's terminal test needs it")
	}
	s := &tmuxSession{t: t, server: fmt.Sprintf("gpufeed-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	args := []string{"-L", s.server, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height)}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, command)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.server, "kill-server").Run() })
	return s
}

func (s *tmuxSession) capture(esc bool) string {
	args := []string{"-L", s.server, "capture-pane", "-p", "-t", "top"}
	if esc {
		args = append(args, "-e")
	}
	out, err := exec.Command("tmux", args...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

func (s *tmuxSession) keys(k ...string) {
	args := append([]string{"-L", s.server, "send-keys", "-t", "top"}, k...)
	if out, err := exec.Command("tmux", args...).CombinedOutput(); err != nil {
		s.t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// waitFor polls the pane until re matches, and returns the match.
func (s *tmuxSession) waitFor(re *regexp.Regexp, within time.Duration) []string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var screen string
	for time.Now().Before(deadline) {
		screen = s.capture(false)
		if m := re.FindStringSubmatch(screen); m != nil {
			return m
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("the pane never showed %s in %v; it shows:\n%s", re, within, screen)
	return nil
}

// The full-screen view in a real terminal: a job GPU-bound for its first
// seconds and then launch-bound shows the verdict change from gpu-bound to
// submission-bound; p pauses the view (its clock stops) and resumes it; q
// quits, ending the command top started; NO_COLOR leaves no colour.
func TestTopInTmuxSeesThePhaseChange(t *testing.T) {
	livetest.Need(t)
	sock := simDevice(t)
	cmdline := phases(t, 8, 60)
	exit := "gpufeed-top-exit="
	command := fmt.Sprintf("%s top --interval 100ms --refresh 500ms --window 4s -- %s; echo %s$?; sleep 60",
		gpufeed(t), strings.Join(cmdline, " "), exit)
	s := newTmux(t, 120, 24, []string{"GPUFEED_SIMDEV=" + sock, "NO_COLOR=1"}, command)

	m := s.waitFor(regexp.MustCompile(`gpufeed top  \d+\.\d s  pid (\d+)`), 20*time.Second)
	child, _ := strconv.Atoi(m[1])
	s.waitFor(regexp.MustCompile(`VERDICT gpu-bound`), 30*time.Second)
	first := time.Now()
	s.waitFor(regexp.MustCompile(`VERDICT submission-bound`), 40*time.Second)
	t.Logf("gpu-bound, then submission-bound %.1f s later", time.Since(first).Seconds())
	if esc := s.capture(true); regexp.MustCompile(`\x1b\[[0-9;]*(3[0-7]|38;|9[0-7])[0-9;]*m`).MatchString(esc) {
		t.Errorf("NO_COLOR is set but the view is coloured:\n%q", esc)
	}

	elapsed := regexp.MustCompile(`gpufeed top  (\d+\.\d) s  pid`)
	s.keys("p")
	s.waitFor(regexp.MustCompile(`PAUSED`), 5*time.Second)
	a := s.waitFor(elapsed, 2*time.Second)[1]
	time.Sleep(1500 * time.Millisecond)
	if b := s.waitFor(elapsed, 2*time.Second)[1]; a != b {
		t.Errorf("paused, the view still moved from %s s to %s s", a, b)
	}
	s.keys("Space")
	s.waitFor(regexp.MustCompile(`p pause · q quit`), 5*time.Second)

	s.keys("q")
	s.waitFor(regexp.MustCompile(exit+`0`), 10*time.Second)
	// The command top started is ended with it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil || strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload (pid %d) outlived top", child)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Attached to a job already running (--pid), with standard output a pipe:
// one plain line per refresh, and the verdict over the last window goes
// from gpu-bound to submission-bound when the job changes phase.
func TestTopPlainAttachedSeesThePhaseChange(t *testing.T) {
	livetest.Need(t)
	sock := simDevice(t)
	cmdline := phases(t, 8, 60)
	job := exec.Command(cmdline[0], cmdline[1:]...)
	job.Env = append(os.Environ(), "GPUFEED_SIMDEV="+sock)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = job.Process.Kill(); _ = job.Wait() })

	top := exec.Command(gpufeed(t), "top", "--pid", strconv.Itoa(job.Process.Pid), "--interval", "100ms", "--refresh", "500ms", "--window", "4s")
	out, err := top.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	top.Stderr = &stderr
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want := []string{"| gpu-bound ", "| submission-bound "}
	var seen []string
	timeout := time.After(60 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("top ended before showing %q: %s\n%s", want[0], strings.Join(seen, "\n"), stderr.String())
			}
			seen = append(seen, l)
			if strings.Contains(l, "\x1b") || !regexp.MustCompile(`^\d+\.\d s gpu `).MatchString(l) {
				t.Errorf("not a plain line: %q", l)
			}
			if strings.Contains(l, want[0]) {
				want = want[1:]
			}
		case <-timeout:
			t.Fatalf("no %q in 60 s:\n%s", want[0], strings.Join(seen, "\n"))
		}
	}
	_ = top.Process.Signal(syscall.SIGINT)
	for range lines {
	}
	if err := top.Wait(); err != nil {
		t.Errorf("top after SIGINT: %v\n%s", err, stderr.String())
	}
	t.Logf("%d lines; last: %s", len(seen), seen[len(seen)-1])
}

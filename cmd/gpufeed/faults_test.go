package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
)

// Faults around the job: outputs that cannot be written, signals sent to
// gpufeed alone, gpufeed's own descriptors running out, a fork storm.

// threadsJob is a Python job of eight threads that wake every millisecond
// (a recording of it grows by kilobytes a second) and then exits with
// status 7 after the seconds given (forever when none).
const threadsJob = `
import sys, threading, time
def f():
    while True:
        time.sleep(0.001)
for _ in range(8):
    threading.Thread(target=f, daemon=True).start()
print("ready", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 1e9)
sys.exit(7)
`

// tinyDisk mounts a 16 KiB tmpfs in a temporary directory and fills all
// but free bytes of it (rounded to pages); it is unmounted at cleanup.
func tinyDisk(t *testing.T, free int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 16<<10-free), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOutputsThatCannotBeWrittenFail: a --record, --perfetto or report on a
// disk that fills during the window is gpufeed's failure, said after the
// report with the path and the reason: exit 3 attached, 125 with a command
// (after the command ended, its status said). The recording was cut to 4
// KiB and diagnose exited 0 with a warning.
func TestOutputsThatCannotBeWrittenFail(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	bin := gpufeed(t)
	t.Run("attached", func(t *testing.T) {
		disk := tinyDisk(t, 4<<10)
		job := startWorkload(t, os.Environ(), true, py, "-c", threadsJob)
		rec := filepath.Join(disk, "run.gpufeed")
		r := clitest.Run(t, bin, clitest.Cmd{Args: []string{"diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "3s",
			"--device", "none", "--profile", "off", "--record", rec}})
		if r.Code != exitRuntime || !strings.Contains(r.Stderr, "--record "+rec+": the recording could not be written in full") ||
			!strings.Contains(r.Stderr, "no space left on device") {
			t.Errorf("exit %d, stderr %q; want %d naming %s and the reason", r.Code, r.Stderr, exitRuntime, rec)
		}
		if !strings.Contains(r.Stdout, "VERDICT:") {
			t.Errorf("the report must still be printed:\n%s", r.Stdout)
		}
	})
	t.Run("jsonl goes on", func(t *testing.T) {
		// The live stream in front of the recording goes on to the end of
		// the window when the file fills (it stopped halfway).
		disk := tinyDisk(t, 4<<10)
		job := startWorkload(t, os.Environ(), true, py, "-c", threadsJob)
		rec := filepath.Join(disk, "run.gpufeed")
		r := clitest.Run(t, bin, clitest.Cmd{Args: []string{"diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "4s",
			"--device", "none", "--profile", "off", "-o", "jsonl", "--record", rec}})
		if r.Code != exitRuntime || !strings.Contains(r.Stderr, "--record "+rec+": ") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		var last int64
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var iv struct {
				Type  string `json:"type"`
				EndNS int64  `json:"end_ns"`
			}
			if json.Unmarshal([]byte(line), &iv) == nil && iv.Type == "interval" {
				last = max(last, iv.EndNS)
			}
		}
		if last < int64(3500*time.Millisecond) {
			t.Errorf("the stream's last interval ends at %v of a 4 s window:\n%.2000s", time.Duration(last), r.Stdout)
		}
	})
	t.Run("command", func(t *testing.T) {
		disk := tinyDisk(t, 4<<10)
		rec := filepath.Join(disk, "run.gpufeed")
		r := clitest.Run(t, bin, clitest.Cmd{Args: []string{"diagnose", "--duration", "3s", "--device", "none", "--profile", "off",
			"--record", rec, "--", py, "-c", threadsJob, "3.5"}})
		if r.Code != exitWrapperFailed || !strings.Contains(r.Stderr, "--record "+rec+": the recording could not be written in full") ||
			!strings.Contains(r.Stderr, "the command exited with status 7") {
			t.Errorf("exit %d, stderr %q; want %d, the path and the command's status", r.Code, r.Stderr, exitWrapperFailed)
		}
	})
	t.Run("perfetto and report", func(t *testing.T) {
		disk := tinyDisk(t, 0)
		out, err := os.Create(filepath.Join(disk, "report.html"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		perf := filepath.Join(disk, "p.json")
		cmd := exec.Command(bin, "diagnose", "--duration", "2s", "--device", "none", "--profile", "off", "-o", "html",
			"--perfetto", perf, "--", "sh", "-c", "sleep 2.5; exit 7")
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = out, &stderr
		t0 := time.Now()
		err = cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatal(err)
		}
		if code != exitWrapperFailed || !strings.Contains(stderr.String(), "writing the report: ") ||
			!strings.Contains(stderr.String(), "--perfetto "+perf+": ") || !strings.Contains(stderr.String(), "the command exited with status 7") {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
		if time.Since(t0) < 2500*time.Millisecond {
			t.Errorf("gpufeed exited after %v, before its command", time.Since(t0))
		}
	})
}

// TestOutOfDescriptorsIsGpufeedsFailure: gpufeed under a tiny open-file
// limit (prlimit --nofile) cannot read the job; that is its own failure,
// never "the target exited" (it said "target exited after 0 s" and exited
// 0 on a job that ran on). Before the window, in the middle of it (a job
// that starts ten processes after a second, each costing two kept files)
// and with a command (waited for, its status said, exit 125).
func TestOutOfDescriptorsIsGpufeedsFailure(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit")
	}
	bin := gpufeed(t)
	const want = "this is gpufeed's own failure, not the job's"
	for _, tc := range []struct {
		name, limit, job, when string
	}{
		{"before the window", "14", "sleep 60", "before the window started"},
		{"in the window", "20", "sleep 1; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 60 & done; wait", "s into the window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := startWorkload(t, os.Environ(), false, "sh", "-c", tc.job)
			r := clitest.Run(t, prlimit, clitest.Cmd{Args: []string{"--nofile=" + tc.limit + ":" + tc.limit, bin, "diagnose",
				"--pid", strconv.Itoa(job.Process.Pid), "--duration", "3s", "--device", "none", "--profile", "off"}})
			if r.Code != exitRuntime || !strings.Contains(r.Stderr, "out of file descriptors ") || !strings.Contains(r.Stderr, tc.when) ||
				!strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "ulimit -n; it is "+tc.limit) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.Code, r.Stderr, exitRuntime, want)
			}
			if strings.Contains(r.Stdout, "target exited") || strings.Contains(r.Stdout, "VERDICT") {
				t.Errorf("a report was given on what could not be read:\n%s", r.Stdout)
			}
			if job.ProcessState != nil {
				t.Fatal("the job ended: the test proves nothing")
			}
		})
	}
	t.Run("command", func(t *testing.T) {
		t0 := time.Now()
		r := clitest.Run(t, prlimit, clitest.Cmd{Args: []string{"--nofile=16:16", bin, "diagnose", "--duration", "2s",
			"--device", "none", "--profile", "off", "--", "sh", "-c", "sleep 3; exit 7"}})
		if r.Code != exitWrapperFailed || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "the command exited with status 7") {
			t.Errorf("exit %d, stderr %q; want %d, %q and the command's status", r.Code, r.Stderr, exitWrapperFailed, want)
		}
		if took := time.Since(t0); took < 3*time.Second {
			t.Errorf("gpufeed exited after %v, before its command", took)
		}
	})
}

// trapJob traps SIGTERM, SIGINT and SIGUSR1, says each on stderr, exits 42
// on SIGTERM or SIGINT and goes on after SIGUSR1.
const trapJob = `trap 'echo got USR1 >&2' USR1; trap 'echo got TERM >&2; exit 42' TERM; trap 'echo got INT >&2; exit 42' INT; echo ready >&2; while :; do sleep 0.05; done`

// startDiagnose starts gpufeed diagnose with args, its stdout and stderr
// kept, in a process group of its own (as a scheduler's step runs it: no
// terminal), and returns it once its command has said "ready".
func startDiagnose(t *testing.T, args ...string) (*exec.Cmd, *lockedBuf, *lockedBuf) {
	t.Helper()
	cmd := exec.Command(gpufeed(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, errb := &lockedBuf{}, &lockedBuf{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, out, errb
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until f holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !f(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not after %v", what, d)
		}
	}
}

// TestSignalsArePassedOnToTheCommand: SIGTERM sent to gpufeed's pid alone
// (as timeout, kill, scancel and a container runtime send it) reaches the
// command, which traps it and exits 42; gpufeed exits at once with that
// status, and the report says the run was stopped, by which signal and
// when. SIGUSR1 is passed on without ending the window. Before, the window
// ended, the report came, and gpufeed waited for a command that never heard
// the signal.
func TestSignalsArePassedOnToTheCommand(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	t.Run("SIGTERM", func(t *testing.T) {
		g, out, stderr := startDiagnose(t, "diagnose", "--duration", "60s", "--device", "none", "--profile", "off", "--", "sh", "-c", trapJob)
		waitFor(t, 10*time.Second, "the command's ready", func() bool { return strings.Contains(stderr.String(), "ready") })
		time.Sleep(2500 * time.Millisecond)
		if err := g.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		done := make(chan struct{})
		go func() { _ = g.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("gpufeed did not end 15 s after SIGTERM; stderr: %s", stderr.String())
		}
		took := time.Since(t0)
		if code := g.ProcessState.ExitCode(); code != 42 || !strings.Contains(stderr.String(), "got TERM") {
			t.Errorf("exit %d, stderr %q; want the command's 42 after it got SIGTERM", code, stderr.String())
		}
		if took > 5*time.Second {
			t.Errorf("gpufeed took %v to end after SIGTERM", took)
		}
		if want := "note: the run was stopped: SIGTERM reached gpufeed "; !strings.Contains(out.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, out.String())
		}
	})
	t.Run("SIGUSR1", func(t *testing.T) {
		g, out, stderr := startDiagnose(t, "diagnose", "--duration", "3s", "--device", "none", "--profile", "off", "-o", "json", "--", "sh", "-c", trapJob)
		waitFor(t, 10*time.Second, "the command's ready", func() bool { return strings.Contains(stderr.String(), "ready") })
		time.Sleep(time.Second)
		if err := g.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the command's USR1", func() bool { return strings.Contains(stderr.String(), "got USR1") })
		waitFor(t, 15*time.Second, "the report", func() bool { return strings.Contains(out.String(), `"ended": "duration"`) })
		if g.ProcessState != nil {
			t.Fatalf("gpufeed ended (%v) before its command", g.ProcessState)
		}
		_ = g.Process.Signal(syscall.SIGTERM)
		_ = g.Wait()
		if code := g.ProcessState.ExitCode(); code != 42 {
			t.Errorf("exit %d after SIGTERM past the report; want the command's 42; stderr %q", code, stderr.String())
		}
	})
	t.Run("ignored stays ignored", func(t *testing.T) {
		// Under nohup (SIGHUP ignored) the command keeps SIGHUP ignored:
		// gpufeed does not catch what its caller turned off.
		nohup, err := exec.LookPath("nohup")
		if err != nil {
			t.Skip("no nohup")
		}
		dir := t.TempDir()
		r := clitest.Run(t, nohup, clitest.Cmd{Dir: dir, Args: []string{gpufeed(t), "diagnose", "--duration", "2s", "--device", "none", "--profile", "off",
			"--cmd-output", filepath.Join(dir, "cmd.txt"), "--", "sh", "-c", "grep SigIgn /proc/self/status; sleep 2.5"}})
		b, err := os.ReadFile(filepath.Join(dir, "cmd.txt"))
		if err != nil {
			t.Fatalf("exit %d %s: %v", r.Code, r.Stderr, err)
		}
		var mask uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "SigIgn:\t%x", &mask); err != nil || mask&1 == 0 {
			t.Errorf("the command under nohup must keep SIGHUP ignored: %q (%v)", b, err)
		}
	})
	t.Run("attached", func(t *testing.T) {
		job := startWorkload(t, os.Environ(), false, "sh", "-c", trapJob)
		g, out, stderr := startDiagnose(t, "diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "60s", "--device", "none", "--profile", "off")
		time.Sleep(3 * time.Second)
		_ = g.Process.Signal(syscall.SIGTERM)
		_ = g.Wait()
		if code := g.ProcessState.ExitCode(); code != 0 || !strings.Contains(out.String(), "note: the run was stopped: SIGTERM reached gpufeed ") {
			t.Errorf("exit %d, stderr %q; want 0 and the report saying it was stopped:\n%s", code, stderr.String(), out.String())
		}
		if err := syscall.Kill(job.Process.Pid, 0); err != nil {
			t.Errorf("attached, gpufeed must not pass the signal on to a job it did not start: %v", err)
		}
	})
}

// ptyCtrlC runs gpufeed ARGS... on a new terminal (python3's pty), waits
// for "ready", types Ctrl-C, waits a second, then sends SIGTERM to gpufeed
// and prints everything the terminal showed. gpufeed starts with SIGINT and
// SIGQUIT at their defaults, as an interactive shell starts its foreground
// job, whatever the test itself inherited (go tool test2json, for one,
// ignores SIGINT, and a command started with it ignored keeps it so).
const ptyCtrlC = `
import os, pty, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    os.execv(sys.argv[1], sys.argv[1:])
buf = b""
def pump(secs):
    global buf
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                return
pump(0)
for _ in range(200):
    if b"ready" in buf:
        break
    pump(0.05)
pump(2)
os.write(fd, b"\x03")
pump(3)
os.kill(pid, signal.SIGTERM)
pump(5)
_, status = os.waitpid(pid, 0)
sys.stdout.write(buf.decode(errors="replace"))
print("\nexit", os.waitstatus_to_exitcode(status))
`

// countJob counts the SIGINTs it gets (exits 42 on SIGTERM).
const countJob = `n=0; trap 'n=$((n+1)); echo "got INT $n" >&2' INT; trap 'exit 42' TERM; echo ready >&2; while :; do sleep 0.05; done`

// TestCtrlCReachesTheCommandOnce: a terminal's Ctrl-C reaches its whole
// foreground process group, the command with gpufeed: gpufeed does not pass
// that SIGINT on again (a second KeyboardInterrupt would break a Python
// job's clean-up). The window still ends on it, and SIGTERM afterwards is
// passed on.
func TestCtrlCReachesTheCommandOnce(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	r := clitest.Run(t, py, clitest.Cmd{Args: []string{"-c", ptyCtrlC, gpufeed(t), "diagnose", "--duration", "60s",
		"--device", "none", "--profile", "off", "-o", "json", "--", "sh", "-c", countJob}, Timeout: time.Minute})
	if r.Code != 0 {
		t.Fatalf("the terminal harness failed: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "got INT 1") || strings.Contains(r.Stdout, "got INT 2") || !strings.Contains(r.Stdout, "exit 42") {
		t.Errorf("want the command to get one SIGINT from Ctrl-C and gpufeed to exit with its 42:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stdout, `"ended": "stopped by SIGINT"`) || !strings.Contains(r.Stdout, "SIGINT reached gpufeed") ||
		!strings.Contains(r.Stdout, "the terminal sent it there too") {
		t.Errorf("the report must say the run was stopped by SIGINT, not passed on:\n%s", r.Stdout)
	}
}

// stormC forks a child that exits at once, reaps it and sleeps 1/RATE s,
// for SECONDS (forever when not given), then exits 0.
const stormC = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
	int rate = atoi(argv[1]);
	double secs = argc > 2 ? atof(argv[2]) : 1e9;
	struct timespec gap = {0, 1000000000L / rate}, t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		pid_t p = fork();
		if (p == 0) _exit(0);
		waitpid(p, NULL, 0);
		nanosleep(&gap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs) return 0;
	}
}
`

// buildStorm compiles stormC.
func buildStorm(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler for the fork storm")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "storm.c")
	if err := os.WriteFile(src, []byte(stormC), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "storm")
	if out, err := exec.Command(cc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v %s", err, out)
	}
	return bin
}

// TestForkStormIsProgress: a process forking 500 children a second, each
// exiting at once, keeps working: it is neither stalled nor idle (it was
// judged idle, "nothing in the job moved", and stalled elsewhere), and
// job-forks says it keeps starting processes, with the rate seen, the CPU
// of the children it reaped and the host's forks. Attached and launched.
func TestForkStormIsProgress(t *testing.T) {
	livetest.Need(t)
	storm := buildStorm(t)
	check := func(t *testing.T, out string) {
		t.Helper()
		var rep render.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%.300s", err, out)
		}
		if v := rep.Verdict; v == nil || v.Class == finding.Stalled || v.Class == finding.Idle {
			t.Errorf("a fork storm judged %+v", rep.Verdict)
		}
		var forks *finding.Finding
		for i, f := range rep.Findings {
			if f.ID == "job-stalled" || f.ID == "job-idle" {
				t.Errorf("%s: %s", f.ID, f.Claim)
			}
			if f.ID == "job-forks" {
				forks = &rep.Findings[i]
			}
		}
		if forks == nil {
			t.Fatalf("no job-forks finding: %v", findingIDs(rep.Findings))
		}
		if !strings.Contains(forks.Claim, "keeps starting processes that end at once: at least") ||
			!strings.Contains(forks.Claim, "a second (all of the host's forks)") {
			t.Errorf("job-forks claim: %s", forks.Claim)
		}
		t.Logf("%s: %s", rep.Verdict.Class, forks.Claim)
	}
	t.Run("attached", func(t *testing.T) {
		job := startWorkload(t, os.Environ(), true, storm, "500")
		r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: []string{"diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "6s",
			"--device", "none", "--profile", "off", "-o", "json"}})
		if r.Code != 0 {
			t.Fatalf("exit %d: %s", r.Code, r.Stderr)
		}
		check(t, r.Stdout)
	})
	t.Run("command", func(t *testing.T) {
		r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: []string{"diagnose", "--duration", "6s",
			"--device", "none", "--profile", "off", "-o", "json", "--", storm, "500", "7"}})
		if r.Code != 0 {
			t.Fatalf("exit %d: %s", r.Code, r.Stderr)
		}
		check(t, r.Stdout)
	})
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
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

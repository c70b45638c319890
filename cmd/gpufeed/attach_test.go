package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/cpusample"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// Live verdicts in attach mode: `gpufeed diagnose --pid` on a job already
// running, with short windows, repeated. A healthy or idle job must never be
// called stalled: a false "CRITICAL: stalled" costs more than a missed
// finding.

// syncLoopWorkload is a healthy GPU-bound loop: fifty 1 ms kernels, then a
// synchronise, forever. The GPU is about 98 % busy; the host thread sleeps
// in the synchronise and wakes about twenty times a second. It prints
// "ready" once the loop runs.
const syncLoopWorkload = `
import sys
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
for _ in range(50):
    dev.launch(1000)
dev.synchronize()
print("ready", flush=True)
while True:
    for _ in range(50):
        dev.launch(1000)
    dev.synchronize()
`

// idleServerWorkload is an inference server waiting for requests: it warms
// the model up on the GPU (one kernel, a synchronise), listens on a TCP
// port and blocks in accept(); nobody connects, so the GPU stays idle.
const idleServerWorkload = `
import socket, sys
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
dev.launch(100)
dev.synchronize()
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print("ready", s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.close()
`

// startSimdev serves a simulated device in this process for the test. Its
// clients load a copy of the simulated driver library of the test's own:
// diagnose --profile places uprobes on the driver file a job maps, and a
// uprobe traps every process that maps that file (its inode), so the
// shared cached library would slow other packages' tests running at the
// same time.
func startSimdev(t *testing.T) string {
	t.Helper()
	sock, stop, err := serveSimdev(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return sock
}

// serveSimdev serves a simulated device on a socket in dir (with its own
// copy of the simulated driver library there) until stop is called.
func serveSimdev(dir string) (sock string, stop func(), err error) {
	lib, err := simcuda.Path()
	if err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile(lib)
	if err != nil {
		return "", nil, err
	}
	own := filepath.Join(dir, simcuda.LibName)
	if err := os.WriteFile(own, b, 0o755); err != nil {
		return "", nil, err
	}
	sock = filepath.Join(dir, "gpu.sock")
	srv, err := sim.Listen(sock, sim.Options{Library: func() (string, error) { return own, nil }})
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx) }()
	return sock, func() { cancel(); srv.Close(); <-served }, nil
}

// startWorkload starts a command and, when ready is set, waits for its
// first output line to start with "ready". The process is killed at cleanup.
func startWorkload(t *testing.T, env []string, ready bool, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if !ready {
		return cmd
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "ready") {
			t.Fatalf("%s did not start: %q", name, s)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready after 60 s", name)
	}
	return cmd
}

// attachRun is one diagnose --pid of a window.
type attachRun struct {
	window time.Duration
	rep    render.Report
	text   string
	err    string
}

// attachRepeatedly runs `diagnose --pid PID -o json` runs times for each
// window, the runs of one window in parallel (each is a separate observer
// reading /proc; the target's own behaviour is what is measured), and
// returns them all.
func attachRepeatedly(t *testing.T, pid int, runs int, windows []time.Duration, extra ...string) []attachRun {
	t.Helper()
	return attachRepeatedlyAs(t, nil, pid, runs, windows, extra...)
}

// attachRepeatedlyAs is attachRepeatedly with the observers run as cred
// (nil: as the test).
func attachRepeatedlyAs(t *testing.T, cred *syscall.Credential, pid int, runs int, windows []time.Duration, extra ...string) []attachRun {
	t.Helper()
	var out []attachRun
	bin := gpufeed(t)
	for _, w := range windows {
		res := make([]attachRun, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := append([]string{"diagnose", "--pid", strconv.Itoa(pid), "--duration", w.String(), "-o", "json"}, extra...)
				cmd := exec.Command(bin, args...)
				if cred != nil {
					cmd.Dir, cmd.SysProcAttr = filepath.Dir(bin), &syscall.SysProcAttr{Credential: cred}
				}
				var stderr strings.Builder
				cmd.Stderr = &stderr
				b, err := cmd.Output()
				res[i] = attachRun{window: w, text: string(b)}
				if err != nil {
					res[i].err = fmt.Sprintf("%v: %s", err, stderr.String())
					return
				}
				if err := json.Unmarshal(b, &res[i].rep); err != nil {
					res[i].err = err.Error()
				}
			}()
		}
		wg.Wait()
		out = append(out, res...)
	}
	return out
}

func findingIDs(fs []finding.Finding) []string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID+"/"+f.Severity.String())
	}
	return ids
}

// crowdedOut says a report names no class because the launch thread of a
// spinning sync loop waited for a CPU: the host crowded by processes
// outside the job (launch-thread-descheduled, a warning) and the CPU
// profile saying the spin is too little to have idled the GPU, a CPU of
// its own first. On a loaded 2-CPU host that is the honest answer, and no
// wrong class.
func crowdedOut(r render.Report) bool {
	if r.Verdict == nil || r.Verdict.Class != finding.Inconclusive {
		return false
	}
	split := findingsWith(r, "launch-thread-cpu-split")
	return descheduledByOutsiders(r) && len(split) == 1 && strings.Contains(split[0].Claim, "a CPU of its own comes first")
}

// descheduledByOutsiders says the launch thread waited for a CPU behind
// processes outside the job (a launch-thread-descheduled warning).
func descheduledByOutsiders(r render.Report) bool {
	desched := findingsWith(r, "launch-thread-descheduled")
	return len(desched) == 1 && desched[0].Severity >= finding.Warning && strings.Contains(desched[0].Claim, "competing with processes outside the job")
}

// requireNeverStalled fails for any run that was judged stalled, said the
// job was stalled, or raised a critical finding.
func requireNeverStalled(t *testing.T, what string, runs []attachRun) {
	t.Helper()
	for i, r := range runs {
		if r.err != "" {
			t.Errorf("%s run %d (%v): %s", what, i, r.window, r.err)
			continue
		}
		v := r.rep.Verdict
		if v == nil {
			t.Errorf("%s run %d (%v): no verdict", what, i, r.window)
			continue
		}
		t.Logf("%s, %v window: %s (%.0f%%): %s", what, r.window, v.Class, v.Confidence*100, v.Summary)
		if v.Class == finding.Stalled {
			t.Errorf("%s run %d (%v window): judged stalled: %s", what, i, r.window, v.Summary)
		}
		for _, f := range r.rep.Findings {
			if f.ID == "job-stalled" || f.Severity == finding.Critical {
				t.Errorf("%s run %d (%v window): %s %s: %s (findings %v)", what, i, r.window, f.Severity, f.ID, f.Claim, findingIDs(r.rep.Findings))
			}
		}
	}
}

// TestAttachGPUBoundSyncLoopNeverStalled: the healthy loop attached with 3 s
// and 4 s windows, five runs each, is never stalled, with blocking
// synchronisation (its host thread asleep in the synchronise most of the
// time, woken twenty times a second, while the device completes its
// kernels) and with CUDA's spinning one (the thread on a CPU throughout).
func TestAttachGPUBoundSyncLoopNeverStalled(t *testing.T) {
	livetest.Need(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	pydir, _ := filepath.Abs("../../python")
	for _, mode := range []string{"block", "spin"} {
		t.Run(mode, func(t *testing.T) {
			sock := startSimdev(t)
			w := startWorkload(t, []string{"GPUFEED_SIMDEV=" + sock, "GPUFEED_SIMDEV_SYNC=" + mode}, true, python, "-c", syncLoopWorkload, pydir)
			time.Sleep(500 * time.Millisecond) // a few synchronises into the loop
			runs := attachRepeatedly(t, w.Process.Pid, 5, []time.Duration{3 * time.Second, 4 * time.Second})
			requireNeverStalled(t, "GPU-bound synchronise loop ("+mode+")", runs)
			for i, r := range runs {
				v := r.rep.Verdict
				if v == nil || r.err != "" {
					continue
				}
				// Blocking, the GPU stays 98 % busy: GPU-bound. Spinning, the
				// thread is on a CPU throughout, and on a crowded host a
				// spinning thread is preempted more than a sleeper woken
				// from the synchronise, so the GPU may idle 10 %: the verdict
				// may then name no class (a spin cannot be told from
				// launching, nor an unread wait from a cause), but it never
				// names a CPU-side class for a GPU kept this busy.
				// On a crowded host the spinning thread can also wait for a
				// CPU at each relaunch long enough to idle the GPU: that is
				// submission-bound with the thread descheduled.
				// Blocking, on a crowded host (a load of 13 on 2 CPUs), the
				// thread woken from each synchronise waits for a CPU before
				// it relaunches, and the GPU measured 87-89 % busy: the
				// per-batch synchronise drains the queue, so that idle is
				// the synchronise's, and sync-bound is then right. Only
				// while the GPU measured at least 90 % busy must it be
				// GPU-bound.
				util := -1.0
				if len(r.rep.GPUs) > 0 && r.rep.GPUs[0].UtilMean != nil {
					util = *r.rep.GPUs[0].UtilMean
				}
				switch {
				case v.Class == finding.GPUBound:
				case mode == "block" && v.Class == finding.SyncBound && util >= 0 && util < 100-thresholds.GPUBoundIdleMaxPct:
					t.Logf("run %d (%v window): blocking on a crowded host, the GPU %.0f %% busy: %s", i, r.window, util, v.Summary)
				case mode == "spin" && v.Class == finding.SubmissionBound && slices.Contains(v.Because, "launch-thread-descheduled"):
					t.Logf("run %d (%v window): spinning on a crowded host, descheduled: %s", i, r.window, v.Summary)
				case mode == "spin" && v.Class == finding.Inconclusive:
					t.Logf("run %d (%v window): spinning, GPU idle just over 10 %%: %s", i, r.window, v.Summary)
				default:
					t.Errorf("run %d (%v window): a GPU kept about 98 %% busy (measured %.0f %%) judged %s: %s (missing: %s)", i, r.window, util, v.Class, v.Summary, v.Missing)
				}
			}
		})
	}
}

// syncBoundWorkload: four 1 ms kernels, a synchronisation, 1 ms of CPU,
// forever (the sync-bound scenario's step).
const syncBoundWorkload = `
import sys, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()

def burn(s):
    end = time.thread_time() + s
    while time.thread_time() < end:
        pass

print("ready", flush=True)
while True:
    for _ in range(4):
        dev.launch(1000)
    dev.synchronize()
    burn(0.001)
`

// TestAttachSpinningSyncIsNoWrongClass: the synchronisation-bound job
// attached with 4 s windows, three runs per mode. With blocking
// synchronisation it sleeps on the device and is sync-bound. With CUDA's
// spinning one its launch thread is on a CPU all the time, as a launch
// loop's is, and /proc cannot tell which it is: the verdict must name
// neither submission-bound (a wrong class) nor anything critical, and must
// say what would separate the two.
func TestAttachSpinningSyncIsNoWrongClass(t *testing.T) {
	livetest.Need(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	pydir, _ := filepath.Abs("../../python")
	// block and spin are what /proc alone tells (--profile off); profiled,
	// the spinning job's CPU profile names the sync.
	for _, mode := range []string{"block", "spin", "spin-profiled"} {
		t.Run(mode, func(t *testing.T) {
			sync, extra := mode, []string{"--profile", "off"}
			if mode == "spin-profiled" {
				if err := cpusample.Check(""); err != nil {
					t.Skip(err)
				}
				sync, extra = "spin", []string{"--profile", "on"}
			}
			sock := startSimdev(t)
			w := startWorkload(t, []string{"GPUFEED_SIMDEV=" + sock, "GPUFEED_SIMDEV_SYNC=" + sync}, true, python, "-c", syncBoundWorkload, pydir)
			time.Sleep(300 * time.Millisecond)
			runs := attachRepeatedly(t, w.Process.Pid, 3, []time.Duration{4 * time.Second}, extra...)
			requireNeverStalled(t, "sync-bound job ("+mode+")", runs)
			named := 0
			defer func() {
				if mode == "block" && named == 0 && !t.Failed() {
					t.Errorf("blocking synchronisation named sync-bound in none of %d runs", len(runs))
				}
			}()
			for i, r := range runs {
				v := r.rep.Verdict
				if r.err != "" || v == nil {
					continue
				}
				switch mode {
				case "spin-profiled":
					// On a crowded host the thread waits for a CPU longer than
					// its work after each sync takes: the CPU of its own comes
					// first, as in the spin case (the profile claims no sync).
					if v.Class == finding.SubmissionBound && slices.Contains(v.Because, "launch-thread-descheduled") && strings.Contains(v.Decision, "CPU of its own") {
						t.Logf("run %d: crowded host, the spinning thread descheduled: %s", i, v.Summary)
						continue
					}
					// Named by the CPU profile (the driver's wait function) or,
					// where the driver probes attached, by the time they
					// measured inside the driver's synchronisations.
					if v.Class != finding.SyncBound || !(strings.Contains(v.Summary, "inside wait_until (spinning)") || strings.Contains(v.Summary, "inside the CUDA driver's synchronisations")) {
						prof := r.text
						if j := strings.Index(prof, `"cpu_profile"`); j >= 0 {
							prof = prof[j:min(len(prof), j+600)]
						}
						t.Errorf("run %d: profiled spinning synchronisation judged %s: %s; want sync-bound naming the driver's wait; %s", i, v.Class, v.Summary, prof)
					}
				case "block":
					// On a saturated host the thread woken from each sync waits
					// for a CPU longer than the sync took: submission-bound
					// with the thread descheduled, as in the spin case.
					// In a 4 s window where the thread sleeps is read about
					// once a second (the slow tier): when few of those reads
					// fell in the idle intervals, more idle time is
					// unexplained than sync-bound, and the verdict says no
					// class can be named, splitting the idle time between
					// those two only. That names no wrong class; at least one
					// of the three runs must still name the sync (below).
					switch {
					case v.Class == finding.SyncBound:
						named++
					case v.Class == finding.SubmissionBound && slices.Contains(v.Because, "launch-thread-descheduled") && strings.Contains(v.Decision, "CPU of its own"):
						named++
						t.Logf("run %d: crowded host, the woken thread descheduled: %s", i, v.Summary)
					case v.Class == finding.Inconclusive && onlyUnexplainedAndSync(v.Summary):
						t.Logf("run %d: too few readings of the sleep in this window: %s", i, v.Summary)
					default:
						t.Errorf("run %d: blocking synchronisation judged %s, want sync-bound: %s", i, v.Class, v.Summary)
					}
				case "spin":
					// Neither class, or, when the host's load made the thread
					// wait for a CPU more than that ambiguity explains,
					// submission-bound with the thread descheduled (a CPU of
					// its own first), which holds whatever it did.
					switch {
					case v.Class == finding.Inconclusive && strings.Contains(v.Summary, "submission-bound or sync-bound") && strings.Contains(v.Missing, "--py-stacks"):
					case v.Class == finding.SubmissionBound && slices.Contains(v.Because, "launch-thread-descheduled") && strings.Contains(v.Decision, "CPU of its own"):
						t.Logf("run %d: crowded host, the spinning thread descheduled: %s", i, v.Summary)
					default:
						t.Errorf("run %d: spinning synchronisation judged %s: %s (missing: %s); want inconclusive naming both and what separates them",
							i, v.Class, v.Summary, v.Missing)
					}
				}
			}
		})
	}
}

// TestAttachIdleServerIsIdle: an inference server blocked in accept() on a
// listening socket, the GPU idle, is idle: never stalled, never critical;
// the verdict says what it waits in and that the GPU is idle.
func TestAttachIdleServerIsIdle(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	pydir, _ := filepath.Abs("../../python")
	sock := startSimdev(t)
	w := startWorkload(t, []string{"GPUFEED_SIMDEV=" + sock}, true, python, "-c", idleServerWorkload, pydir)
	runs := attachRepeatedly(t, w.Process.Pid, 5, []time.Duration{3 * time.Second, 4 * time.Second})
	requireNeverStalled(t, "idle server", runs)
	requireIdle(t, runs, "accept", "listening", "the GPU")
}

// TestAttachSleepIsIdle: `sleep 30` with no GPU in view is idle, waiting on
// a timer: never stalled, never critical.
func TestAttachSleepIsIdle(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	w := startWorkload(t, nil, false, "sleep", "30")
	time.Sleep(200 * time.Millisecond)
	runs := attachRepeatedly(t, w.Process.Pid, 5, []time.Duration{3 * time.Second, 4 * time.Second}, "--device", "none")
	requireNeverStalled(t, "sleep 30", runs)
	requireIdle(t, runs, "clock_nanosleep", "timer")
}

// TestAttachSleepUnseenIsNotStalled: root's sleeping job attached by an
// unprivileged user, who cannot read another user's threads' waits (wchan
// and syscall need CAP_SYS_PTRACE). Nothing moves, and a deadlock would
// read the same as this sleep: the verdict never says stalled, names no
// critical finding, and says how to see the waits.
func TestAttachSleepUnseenIsNotStalled(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to nobody")
	}
	w := startWorkload(t, nil, false, "sleep", "30")
	time.Sleep(200 * time.Millisecond)
	runs := attachRepeatedlyAs(t, nobody, w.Process.Pid, 3, []time.Duration{3 * time.Second}, "--device", "none")
	requireNeverStalled(t, "root's sleep 30 seen by nobody", runs)
	for i, r := range runs {
		if r.err != "" || r.rep.Verdict == nil {
			continue
		}
		v := r.rep.Verdict
		if v.Class != finding.Inconclusive || !strings.Contains(v.Missing, "CAP_SYS_PTRACE") || !slices.ContainsFunc(r.rep.Findings, func(f finding.Finding) bool { return f.ID == "job-waits-unseen" }) {
			t.Errorf("run %d: %s (%s), missing %q, findings %v: want inconclusive, saying how to see the waits", i, v.Class, v.Summary, v.Missing, findingIDs(r.rep.Findings))
		}
	}
}

// slowStartIdleServerWorkload is idleServerWorkload behind a start-up that
// lasts until 2.6 s after the process started (by its own start time, so a
// loaded host's slow imports do not lengthen it): a server loading its model
// for half of a short window.
const slowStartIdleServerWorkload = `
import os, time
started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
while float(open("/proc/uptime").read().split()[0]) - started < 2.6:
    sum(range(10000))
` + idleServerWorkload

// TestLaunchedIdleServerIsIdle: the same server started by diagnose itself
// (`diagnose -- CMD`), its start-up taking half a 5 s window: once past
// its start-up it waits in accept, and the verdict says it is idle since
// then, not that the GPU gets too little work. On a loaded host a start-up
// of Python imports alone once took over half of a 4 s window; the quiet
// tail after a start-up in view is judged from a second on. The window is
// 6 s: beside make test's light group (both CPUs busy) the start-up ended
// 4.1 and 4.2 s into a 5 s window, a quiet of 0.9 s.
//
// The interpreter is started by its own path: a launcher before it (pyenv's
// shim runs a dozen shell scripts) took the whole window on a loaded CI
// host, which TestLaunchedSlowLauncherIsStarting holds.
func TestLaunchedIdleServerIsIdle(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python := interpreter(t)
	pydir, _ := filepath.Abs("../../python")
	sock := startSimdev(t)
	// diagnose waits for the command it started to end: the server never
	// does, so the test reads the report and then ends them both.
	run := clitest.Start(t, gpufeed(t), clitest.Cmd{Env: []string{"GPUFEED_SIMDEV=" + sock},
		Args: []string{"diagnose", "--duration", "6s", "-o", "json", "--", python, "-c", slowStartIdleServerWorkload, pydir}})
	defer run.Stop()
	// stdout is the report's; the command's own output goes to stderr.
	var rep render.Report
	if err := json.NewDecoder(run.Stdout).Decode(&rep); err != nil {
		t.Fatalf("report: %v\n%s", err, run.Stderr())
	}
	if !rep.Target.Launched || !rep.Target.Held {
		t.Errorf("the launched server was not held until the window began: target %+v", rep.Target)
	}
	runs := []attachRun{{window: 6 * time.Second, rep: rep}}
	requireNeverStalled(t, "launched idle server", runs)
	requireIdle(t, runs, "accept", "listening", "the end of its start-up")
	// The start-up opens /proc/uptime thousands of times a second, and each
	// open() asks the file whether it is a terminal (a failing ioctl): no
	// driver's ioctls, in a process that holds no GPU device file.
	for _, f := range rep.Findings {
		if f.ID == "thread-ioctls-in-loop" {
			t.Errorf("Python's failed terminal checks named as the GPU driver's ioctls: %s", f.Claim)
		}
	}
}

// interpreter is the path of the python3 on PATH itself, past any launcher
// in front of it (a pyenv shim): sys.executable.
func interpreter(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3's own path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// slowLauncher is a launcher in front of an interpreter, as pyenv's shim
// is on a loaded host: a shell that keeps starting short processes (awk
// and cut, as the shim's scripts start theirs) until 4 s after its first
// line ran (by the clock, so a loaded host's slow processes do not
// lengthen it; not by its start time, which is its fork's, before
// diagnose held it until the window began), then becomes the interpreter
// ($1) running the idle server ($2 its code, $3 its module directory).
const slowLauncher = `
start=$(cut -d' ' -f1 /proc/uptime)
while up=$(cut -d' ' -f1 /proc/uptime) && awk -v u="$up" -v s="$start" 'BEGIN { exit !(u - s < 4.0) }'; do :; done
exec "$1" -c "$2" "$3"
`

// TestLaunchedSlowLauncherIsStarting: a command whose launcher and
// imports fill the window (diagnose -- CMD, 4 s, a launcher busy for its
// first 4 s, then the idle server) ran no step on its GPU: the verdict is
// inconclusive, saying the job is still starting and when to look again,
// with none of the CPU-side causes its launcher's processes look like. A
// pyenv shim on a loaded CI host was judged preprocessing-bound, then
// too-little-work ("the launch thread bash ran 0 % of the time"), this way.
func TestLaunchedSlowLauncherIsStarting(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python := interpreter(t)
	pydir, _ := filepath.Abs("../../python")
	sock := startSimdev(t)
	run := clitest.Start(t, gpufeed(t), clitest.Cmd{Env: []string{"GPUFEED_SIMDEV=" + sock},
		Args: []string{"diagnose", "--duration", "4s", "-o", "json", "--", "bash", "-c", slowLauncher, "launcher", python, idleServerWorkload, pydir}})
	defer run.Stop()
	var rep render.Report
	if err := json.NewDecoder(run.Stdout).Decode(&rep); err != nil {
		t.Fatalf("report: %v\n%s", err, run.Stderr())
	}
	requireNeverStalled(t, "slow launcher", []attachRun{{window: 4 * time.Second, rep: rep}})
	v := rep.Verdict
	if v == nil {
		return // reported above
	}
	if v.Class != finding.Inconclusive || !slices.Equal(v.Because, []string{"job-starting"}) {
		t.Fatalf("verdict %s (%.0f%%) because %v: %s; want inconclusive, resting on job-starting", v.Class, v.Confidence*100, v.Because, v.Summary)
	}
	for _, w := range []string{"the job is still starting", "(gpufeed started it)"} {
		if !strings.Contains(v.Summary, w) {
			t.Errorf("the verdict does not say %q: %s", w, v.Summary)
		}
	}
	// The window it names is the one sampled: 4 s asked, a little more
	// where a loaded host's last tick came late (4.1 s on a CI host).
	if m := regexp.MustCompile(`its GPU ran no step in the (\d+\.\d) s window`).FindStringSubmatch(v.Summary); m == nil {
		t.Errorf("the verdict does not say its GPU ran no step in the window: %s", v.Summary)
	} else if s, _ := strconv.ParseFloat(m[1], 64); s < 3.9 || s > 5 {
		t.Errorf("the verdict names a %s s window for a 4 s one: %s", m[1], v.Summary)
	}
	if !strings.Contains(v.Decision, "a longer --duration") || v.Missing == "" {
		t.Errorf("the verdict does not say when to look again: decision %q, missing %q", v.Decision, v.Missing)
	}
	for _, f := range rep.Findings {
		for c, id := range judge.CauseID {
			if f.ID == id {
				t.Errorf("a start-up described as %s: %s", c, f.Claim)
			}
		}
	}
}

// requireIdle checks every run's verdict is idle, its finding informational,
// and its summary or claim names each of words.
func requireIdle(t *testing.T, runs []attachRun, words ...string) {
	t.Helper()
	for i, r := range runs {
		v := r.rep.Verdict
		if r.err != "" || v == nil {
			continue // reported by requireNeverStalled
		}
		if v.Class != finding.Idle {
			t.Errorf("run %d (%v window): verdict %s, want idle: %s", i, r.window, v.Class, v.Summary)
			continue
		}
		var idle *finding.Finding
		for j := range r.rep.Findings {
			if r.rep.Findings[j].ID == "job-idle" {
				idle = &r.rep.Findings[j]
			}
		}
		if idle == nil || idle.Severity != finding.Info || len(v.Because) == 0 || v.Because[0] != "job-idle" {
			t.Errorf("run %d: the idle verdict must rest on an informational job-idle finding: %v (because %v)", i, findingIDs(r.rep.Findings), v.Because)
			continue
		}
		for _, w := range words {
			if !strings.Contains(v.Summary, w) && !strings.Contains(idle.Claim, w) {
				t.Errorf("run %d: the idle verdict does not say %q: %s", i, w, v.Summary)
			}
		}
		if idle.Decision == "" {
			t.Errorf("run %d: the idle finding must say what would make the job busy", i)
		}
	}
}

// TestAttachIdleBesideABusyNeighbour: an idle `sleep` while an unrelated
// process keeps cpu0 busy. The pegged core is a neighbour's, not the job's:
// one-core-pegged, which blames the job's own single thread and advises
// moving its preprocessing into workers, must not fire. When the window
// shows the pattern (cpu0 pegged, the other CPUs quiet) the neighbour is
// named as such.
func TestAttachIdleBesideABusyNeighbour(t *testing.T) {
	livetest.Need(t)
	hog := startWorkload(t, []string{"GPUFEED_DEMO_SECONDS=60"}, false, gpufeed(t), "__workload", "hog", "--cpu", "0")
	_ = hog
	w := startWorkload(t, nil, false, "sleep", "30")
	time.Sleep(300 * time.Millisecond)
	// One window at a time (parallel observers would load the other CPU),
	// until one shows the pattern or four have run.
	var runs []attachRun
	pattern := 0
	for i := 0; i < 4 && pattern == 0; i++ {
		r := attachRepeatedly(t, w.Process.Pid, 1, []time.Duration{3 * time.Second}, "--device", "none")[0]
		runs = append(runs, r)
		if r.err != "" {
			t.Errorf("run %d: %s", i, r.err)
			continue
		}
		var neighbour *finding.Finding
		for j, f := range r.rep.Findings {
			if f.ID == "one-core-pegged" {
				t.Errorf("run %d: one-core-pegged blames the idle job for a neighbour's load: %s (%s)", i, f.Claim, f.Decision)
			}
			if f.ID == "core-pegged-by-neighbour" {
				neighbour = &r.rep.Findings[j]
			}
		}
		h := r.rep.Host
		if h == nil || len(h.Busiest) < 2 || h.Busiest[0].Busy == nil || h.Busiest[0].CPU != 0 {
			continue
		}
		others, k := 0.0, 0
		for _, c := range h.Busiest[1:] {
			if c.Busy != nil {
				others += *c.Busy
				k++
			}
		}
		if k == 0 || *h.Busiest[0].Busy < 90 || others/float64(k) >= 25 {
			t.Logf("run %d: cpu%d %.0f%% busy, the others %.0f%%: the other CPUs were not quiet enough to show the pattern", i, h.Busiest[0].CPU, *h.Busiest[0].Busy, others/float64(max(k, 1)))
			continue
		}
		pattern++
		if neighbour == nil || neighbour.Severity != finding.Info || !strings.Contains(neighbour.Claim, "neighbour") || !strings.Contains(neighbour.Claim, "cpu0") {
			t.Errorf("run %d: cpu0 pegged by a process outside the job must be named a neighbour's load: %+v (findings %v)", i, neighbour, findingIDs(r.rep.Findings))
		}
	}
	t.Logf("%d of %d windows showed cpu0 pegged with the other CPUs quiet", pattern, len(runs))
}

// onlyUnexplainedAndSync says whether an inconclusive verdict's idle split
// ("(GPU idle time: unexplained 17%, sync-bound 9%)") names no class but
// sync-bound.
func onlyUnexplainedAndSync(summary string) bool {
	_, split, ok := strings.Cut(summary, "(GPU idle time: ")
	if !ok {
		return false
	}
	split, _, _ = strings.Cut(split, ")")
	for _, part := range strings.Split(split, ", ") {
		name, _, _ := strings.Cut(part, " ")
		if name != "unexplained" && name != "sync-bound" {
			return false
		}
	}
	return strings.Contains(split, "sync-bound")
}

// pipeWakeWorkload: a thread blocked in a read on a pipe with no timeout,
// woken fifty times a second by another thread that writes a byte after
// each 20 ms sleep: something arrives, over and over.
const pipeWakeWorkload = `
import os, threading, time
r, w = os.pipe()
def reader():
    while True:
        os.read(r, 1)
threading.Thread(target=reader, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.02)
    os.write(w, b"x")
`

// TestAttachWakeupsSayWhatWasSeen: the wake-ups that show a job moving are
// counted once a reading, and the kind of wait is claimed only where it
// was seen. As root the reader's pipe read is seen to have no timeout; as
// nobody its system call is not visible, and the claim says so rather than
// "no timeout" (a timer's wake-ups would read the same). Neither is
// stalled.
func TestAttachWakeupsSayWhatWasSeen(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to nobody")
	}
	w := startWorkload(t, nil, true, interpreter(t), "-c", pipeWakeWorkload)
	time.Sleep(300 * time.Millisecond)
	for _, c := range []struct {
		who   string
		cred  *syscall.Credential
		want  string
		never string
	}{
		{"root", &syscall.Credential{Uid: 0, Gid: 0}, "out of a wait with no timeout in ", "not visible"},
		{"nobody", nobody, "out of a wait whose kind was not visible (syscall not visible: needs CAP_SYS_PTRACE", "with no timeout"},
	} {
		runs := attachRepeatedlyAs(t, c.cred, w.Process.Pid, 2, []time.Duration{3 * time.Second}, "--device", "none")
		requireNeverStalled(t, "a pipe reader woken 50 times a second, seen by "+c.who, runs)
		for i, r := range runs {
			if r.err != "" || r.rep.Verdict == nil {
				continue
			}
			v := r.rep.Verdict
			woken := regexp.MustCompile(`tid \d+ was woken[^;)]*\)?[^;)]*`).FindString(v.Missing)
			if !strings.Contains(v.Missing, c.want) || strings.Contains(woken, c.never) {
				t.Errorf("%s, run %d: %q; want the wake-ups said %q, never %q", c.who, i, v.Missing, c.want, c.never)
			}
			// counted once a reading: at most the readings of a 3 s
			// window at 100 ms, though the thread woke about 150 times
			if m := regexp.MustCompile(`in (\d+) of its (\d+) readings`).FindStringSubmatch(woken); m == nil {
				t.Errorf("%s, run %d: %q names no readings", c.who, i, woken)
			} else if n, _ := strconv.Atoi(m[1]); n < 10 || n > 31 {
				t.Errorf("%s, run %d: woken in %s readings of a 3 s window", c.who, i, m[1])
			}
		}
	}
}

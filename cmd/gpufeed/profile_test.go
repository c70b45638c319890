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

	"github.com/gpufeed/gpufeed/internal/cpusample"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// decodeWorkload: a launch thread that decodes its own batches (zlib, as a
// DataLoader with num_workers=0 runs PIL or zlib in the main process): 12 ms
// or so of inflate per batch, then two 200 us kernels. The GPU idles almost
// all the time, and the thread is on a CPU all the time.
const decodeWorkload = `
import random, sys, zlib
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
rng = random.Random(1)
blob = zlib.compress(bytes(rng.choices(b"abcdefghijklmnop", k=1 << 20)), 6)
print("ready", flush=True)
while True:
    batch = zlib.decompress(blob)
    for _ in range(2):
        dev.launch(200)
`

// freshBufferDecodeWorkload: a launch thread that inflates each batch into
// fresh memory (glibc told to map every large block anew and unmap it when
// freed, as a DataLoader with num_workers=0 allocating new PIL or numpy
// buffers per sample does): most of its CPU is the kernel's, faulting in and
// zeroing the new pages, and it launches two kernels per batch.
const freshBufferDecodeWorkload = `
import ctypes, sys, zlib
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
libc = ctypes.CDLL(None)
libc.mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD: every block of 128 KiB or more is a fresh mapping
libc.mallopt(-1, 0)          # M_TRIM_THRESHOLD
dev = gpufeed_simdev.connect()
blob = zlib.compress(bytes(32 << 20), 1)
print("ready", flush=True)
while True:
    batch = zlib.decompress(blob)
    del batch
    for _ in range(2):
        dev.launch(200)
`

// launchLoopWorkload: a launch loop of tiny kernels (5 us each, shorter
// than a launch costs the thread), a synchronisation every 100.
const launchLoopWorkload = `
import sys
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
print("ready", flush=True)
while True:
    for _ in range(100):
        dev.launch(5)
    dev.synchronize()
`

// profiledJobs are the jobs whose launch thread /proc alone calls
// submission-bound (or cannot place), and what their CPU profile names.
var profiledJobs = []struct {
	name, script string
	class        finding.Class
	shares       *regexp.Regexp // in the launch-thread-cpu-split finding's claim
}{
	{"decode", decodeWorkload, finding.Preprocessing,
		regexp.MustCompile(`: ([5-9]\d|100)% of the launch thread's CPU in decoding, \d+% in the kernel on its own behalf \(allocations, page faults, reads\), \d+% in copies, \d+% in framework CPU operators, \d+% in the interpreter, and [0-4]% in launch calls`)},
	// The kernel's time on the thread's behalf (page faults, mmap, munmap)
	// is its own work: preprocessing-bound, never submission-bound.
	{"decode-fresh-buffers", freshBufferDecodeWorkload, finding.Preprocessing,
		regexp.MustCompile(`: \d+% of the launch thread's CPU in decoding, ([3-9]\d|100)% in the kernel on its own behalf \(allocations, page faults, reads\), \d+% in copies, \d+% in framework CPU operators, \d+% in the interpreter, and [0-4]% in launch calls`)},
	{"launch-loop", launchLoopWorkload, finding.SubmissionBound,
		regexp.MustCompile(`: \d+% of the launch thread's CPU in cuLaunchKernel and \d+% in the interpreter, framework and driver around it$`)},
	{"spin-sync", syncBoundWorkload, finding.SyncBound,
		regexp.MustCompile(`: ([5-9]\d|100)% of the launch thread's CPU inside wait_until \(spinning\)(, as the driver probes timed them \(its samples put \d+% there\))?$`)},
}

// TestAttachProfiledLaunchThreadSplit: on the simulated driver, attached
// three times (4 s windows) to a job already running, with the CPU profile
// on: a launch thread decoding its own input is preprocessing-bound, a
// launch loop of tiny kernels submission-bound, a thread spinning in the
// synchronisation after each step sync-bound, each with the launch
// thread's shares in the split finding's claim and evidence.
func TestAttachProfiledLaunchThreadSplit(t *testing.T) {
	livetest.Need(t)
	if err := cpusample.Check(""); err != nil {
		t.Skip(err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	pydir, _ := filepath.Abs("../../python")
	for _, job := range profiledJobs {
		t.Run(job.name, func(t *testing.T) {
			sock := startSimdev(t)
			w := startWorkload(t, []string{"GPUFEED_SIMDEV=" + sock, "GPUFEED_SIMDEV_SYNC=spin"}, true, python, "-c", job.script, pydir)
			time.Sleep(300 * time.Millisecond)
			runs := attachRepeatedly(t, w.Process.Pid, 3, []time.Duration{4 * time.Second}, "--profile", "on")
			requireNeverStalled(t, job.name, runs)
			for i, r := range runs {
				v := r.rep.Verdict
				if r.err != "" || v == nil {
					continue
				}
				split := findingsWith(r.rep, "launch-thread-cpu-split")
				if job.class == finding.SyncBound && v.Class == finding.SubmissionBound && slices.Contains(v.Because, "launch-thread-descheduled") && len(split) == 0 {
					// a crowded host: the thread waited for a CPU longer than
					// its work after each sync, and a CPU of its own comes
					// first (as TestAttachSpinningSyncIsNoWrongClass/spin)
					t.Logf("run %d: crowded host, the spinning thread descheduled: %s", i, v.Summary)
					continue
				}
				if job.class == finding.SyncBound && crowdedOut(r.rep) {
					t.Logf("run %d: crowded host, the spinning thread waited for a CPU, no class named: %s", i, v.Summary)
					continue
				}
				if job.class == finding.SyncBound && v.Class == finding.SyncBound && strings.Contains(v.Summary, "inside the CUDA driver's synchronisations") &&
					slices.Contains(v.Because, "launch-thread-driver-calls") {
					// The driver probes attached too and measured the time
					// inside the synchronisations themselves: the verdict
					// rests on that, the stronger evidence, and the split
					// need not lead (as TestAttachSpinningSyncIsNoWrongClass).
					t.Logf("run %d: named by the driver probes: %s", i, v.Summary)
					continue
				}
				if v.Class != job.class || len(split) != 1 || split[0].Supports != job.class {
					t.Errorf("run %d: %s judged %s: %s; want %s with the launch thread's split\n%s", i, job.name, v.Class, v.Summary, job.class, claims(r.rep))
					continue
				}
				if !job.shares.MatchString(split[0].Claim) {
					t.Errorf("run %d: the split finding does not give the shares (%s): %q", i, job.shares, split[0].Claim)
				}
				if !strings.Contains(v.Summary, "% of the launch thread's CPU") && !strings.Contains(strings.Join(v.Because, " "), "launch-thread-cpu-split") {
					t.Errorf("run %d: the verdict rests neither on nor states the profile: %s (because %v)", i, v.Summary, v.Because)
				}
				if len(split[0].Evidence) < 2 || !strings.Contains(split[0].Evidence[0].What, "launch thread CPU in ") {
					t.Errorf("run %d: the split finding's evidence lists no shares: %+v", i, split[0].Evidence)
				}
				if r.rep.CPUProfile == nil || r.rep.CPUProfile.State != "on" || len(r.rep.CPUProfile.Threads) == 0 {
					t.Errorf("run %d: the report carries no cpu_profile", i)
				}
			}
		})
	}
}

// nobody is the unprivileged user the tests below run as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// sharedDir is a directory the unprivileged user may read and connect in
// (the test's own temporary directories are root's alone).
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gpufeed-profile-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// startSharedSimdev serves a simulated GPU that nobody may use: its socket
// and a copy of the simulated driver library in a directory nobody reads.
// It returns the environment a workload needs.
func startSharedSimdev(t *testing.T) []string {
	t.Helper()
	dir := sharedDir(t)
	lib, err := simcuda.Path()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "libgpufeed-simcuda.so")
	if err := os.WriteFile(shared, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "gpu.sock")
	srv, err := sim.Listen(sock, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); srv.Close(); <-served })
	return []string{"GPUFEED_SIMDEV=" + sock, simcuda.EnvLib + "=" + shared, "GPUFEED_SIMDEV_SYNC=spin"}
}

// TestUnprivilegedProfileSaysWhatIsMissing: the same jobs, and gpufeed,
// run as nobody with kernel.perf_event_paranoid above 0: the CPU profile
// cannot be taken, so each report keeps the /proc verdict (no split, no
// cpu_profile: a launch thread on a CPU is submission-bound, or the spin
// cannot be told from launching), exits 0, and says which capability or
// setting would show it and which classes it cannot tell apart. With
// --profile on, diagnose fails before its window, with the same reason.
func TestUnprivilegedProfileSaysWhatIsMissing(t *testing.T) {
	livetest.Need(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to nobody")
	}
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		t.Skip(err)
	}
	level, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || level <= 0 {
		t.Skipf("kernel.perf_event_paranoid is %q: anyone may sample every CPU here", strings.TrimSpace(string(b)))
	}
	// An interpreter nobody may run (one under root's home may not be).
	pydir, _ := filepath.Abs("../../python")
	python, why := "", "no python3"
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		py, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		out, err := (&exec.Cmd{Path: py, Args: []string{py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import gpufeed_simdev", pydir},
			SysProcAttr: &syscall.SysProcAttr{Credential: nobody}}).CombinedOutput()
		if err == nil {
			python = py
			break
		}
		why = fmt.Sprintf("%s: %v %s", py, err, out)
	}
	if python == "" {
		t.Skipf("no python3 with %s usable as nobody: %s", pydir, why)
	}
	bin := gpufeed(t)
	env := startSharedSimdev(t)
	wantMissing := "CPU profile not taken: sampling every CPU needs CAP_PERFMON (or CAP_SYS_ADMIN, or root), or kernel.perf_event_paranoid at 0 or below (it is " + strconv.Itoa(level) + ")"
	wantCannot := "submission-bound, sync-bound (spinning) and preprocessing-bound cannot be told apart"
	for _, job := range profiledJobs {
		t.Run(job.name, func(t *testing.T) {
			w := exec.Command(python, "-c", job.script, pydir)
			w.Env = env
			w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: nobody}
			out, err := w.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL); _ = w.Wait() })
			if line, err := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "ready") {
				t.Fatalf("%s did not start as nobody: %q %v", job.name, line, err)
			}
			time.Sleep(300 * time.Millisecond)
			pid := strconv.Itoa(w.Process.Pid)
			// three observers at once, as attachRepeatedly runs them, and
			// a fourth beside them for the first screen (text, 100
			// columns)
			windows := []string{"3s", "4s", "3s"}
			reps := make([]attachRun, len(windows))
			var wg sync.WaitGroup
			var text []byte
			var textErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(bin, "diagnose", "--pid", pid, "--duration", "3s")
				cmd.Dir, cmd.SysProcAttr = filepath.Dir(bin), &syscall.SysProcAttr{Credential: nobody}
				cmd.Env = append(os.Environ(), "COLUMNS=100")
				text, textErr = cmd.Output()
			}()
			for i, window := range windows {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, _ := time.ParseDuration(window)
					reps[i].window = d
					cmd := exec.Command(bin, "diagnose", "--pid", pid, "--duration", window, "-o", "json")
					cmd.Dir, cmd.SysProcAttr = filepath.Dir(bin), &syscall.SysProcAttr{Credential: nobody}
					var stderr strings.Builder
					cmd.Stderr = &stderr
					b, err := cmd.Output()
					reps[i].text = string(b)
					if err != nil {
						reps[i].err = fmt.Sprintf("as nobody: %v: %s", err, stderr.String())
					} else if err := json.Unmarshal(b, &reps[i].rep); err != nil {
						reps[i].err = err.Error()
					}
				}()
			}
			wg.Wait()
			requireNeverStalled(t, job.name+" as nobody", reps)
			for i, run := range reps {
				if run.err != "" {
					continue
				}
				r := run.rep
				if r.CPUProfile != nil || len(findingsWith(r, "launch-thread-cpu-split")) != 0 {
					t.Errorf("run %d: a profile as nobody: %+v\n%s", i, r.CPUProfile, claims(r))
				}
				note := strings.Join(r.Notes, "\n")
				if !strings.Contains(note, wantMissing) || !strings.Contains(note, wantCannot) {
					t.Errorf("run %d: the notes do not say what would show the profile and what cannot be told apart:\n%s", i, note)
				}
				// The first screen shows one note: the profile's, not the
				// syscall summary's.
				if len(r.Notes) == 0 || !strings.HasPrefix(r.Notes[0], "CPU profile not taken") {
					t.Errorf("run %d: the first note is not the CPU profile's: %q", i, r.Notes)
				}
				// A submission-bound verdict from /proc alone says what it
				// cannot tell apart and how to, at most a third sure.
				if v := r.Verdict; v != nil && v.Class == finding.SubmissionBound && !slices.Contains(v.Because, "launch-thread-descheduled") &&
					(v.Confidence > 0.33 || !strings.Contains(v.Summary, "cannot tell submission-bound from preprocessing-bound") ||
						!strings.Contains(v.Missing, "CAP_PERFMON") || !strings.Contains(v.Missing, "--py-stacks")) {
					t.Errorf("run %d: %s at %.0f%%: %s (to conclude: %s)", i, v.Class, 100*v.Confidence, v.Summary, v.Missing)
				}
				// /proc's verdict: the launch thread on a CPU is
				// submission-bound, or launching and spinning are not told
				// apart.
				if v := r.Verdict; v != nil && v.Class != finding.SubmissionBound && v.Class != finding.Inconclusive {
					t.Errorf("run %d: %s as nobody judged %s: %s; want /proc's submission-bound or inconclusive", i, job.name, v.Class, v.Summary)
				}
			}
			// The first screen: the verdict says what cannot be told apart,
			// or the profile's note does, before the findings.
			if textErr != nil {
				t.Errorf("diagnose as nobody, text: %v", textErr)
			} else {
				screen := strings.Join(strings.Fields(string(text)), " ")
				// (on a crowded host the thread waits for a CPU more than it
				// runs, and a CPU of its own comes first: no ambiguity)
				crowded := strings.Contains(screen, "DECISION: Give the launch thread a CPU of its own first")
				if !crowded && !strings.Contains(screen, "cannot tell submission-bound from") && !strings.Contains(screen, "cannot be told apart") {
					t.Errorf("the first screen as nobody does not say what cannot be told apart:\n%s", text)
				}
				if i, j := strings.Index(screen, "note: CPU profile not taken"), strings.Index(screen, "note: syscall summary"); i < 0 || (j >= 0 && j < i) {
					t.Errorf("the first screen's first note is not the CPU profile's:\n%s", text)
				}
			}
			// --profile on fails before the window (30 s), naming the reason.
			cmd := exec.Command(bin, "diagnose", "--pid", pid, "--duration", "30s", "--profile", "on")
			cmd.Dir, cmd.SysProcAttr = filepath.Dir(bin), &syscall.SysProcAttr{Credential: nobody}
			start := time.Now()
			o, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err == nil || took > 15*time.Second {
				t.Errorf("--profile on as nobody: err %v after %v, want a failure before the 30 s window", err, took)
			}
			if !strings.Contains(string(o), "--profile on: ") || !strings.Contains(string(o), "CAP_PERFMON") || !strings.Contains(string(o), "perf_event_paranoid") {
				t.Errorf("--profile on as nobody: %q", o)
			}
		})
	}
}

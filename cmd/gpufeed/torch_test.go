package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// These tests run the binary over real PyTorch jobs: Debian's python3-torch
// (CPU build) under Debian's own /usr/bin/python3, which scripts/test.sh
// installs when missing. They skip, saying why, only where it cannot be had.

func requireTorch(t *testing.T) string {
	t.Helper()
	py, err := testjob.TorchPython()
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return py
}

func startScenario(t *testing.T, w testjob.Script, args ...string) *testjob.Run {
	t.Helper()
	r, err := testjob.Start(t.Context(), w, nil, args...)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

func awaitEvent(t *testing.T, r *testjob.Run, event string, timeout time.Duration) testjob.Message {
	t.Helper()
	m, err := r.Await(t.Context(), event, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diagnoseJSON runs gpufeed diagnose with args and -o json, and decodes it.
func diagnoseJSON(t *testing.T, args ...string) render.Report {
	t.Helper()
	out, stderr, code := run(t, append([]string{"diagnose", "--device", "none", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("diagnose %v: exit %d: %s", args, code, stderr)
	}
	var r render.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// diagnoseLaunched runs gpufeed diagnose -- COMMAND (a command that never
// ends by itself; its output, which would mix with the report, goes to
// /dev/null by a shell that then execs it), reads the report once the
// window is over, then kills gpufeed, the command and everything it
// started (one process group).
func diagnoseLaunched(t *testing.T, window time.Duration, command ...string) render.Report {
	t.Helper()
	args := append([]string{"diagnose", "--device", "none", "-o", "json", "--duration", window.String(), "--",
		"sh", "-c", `exec "$@" >/dev/null 2>&1`, "sh"}, command...)
	run := clitest.Start(t, gpufeed(t), clitest.Cmd{Args: args})
	defer run.Stop()
	got := make(chan error, 1)
	var r render.Report
	go func() { got <- json.NewDecoder(bufio.NewReader(run.Stdout)).Decode(&r) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("reading the report: %v; stderr: %s", err, run.Stderr())
		}
	case <-time.After(window + 90*time.Second):
		t.Fatalf("no report within %s; stderr: %s", window+90*time.Second, run.Stderr())
	}
	return r
}

func findingsWith(r render.Report, id string) []finding.Finding {
	var out []finding.Finding
	for _, f := range r.Findings {
		if f.ID == id || strings.HasSuffix(id, "*") && strings.HasPrefix(f.ID, strings.TrimSuffix(id, "*")) {
			out = append(out, f)
		}
	}
	return out
}

func claims(r render.Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "  %s %s: %s\n", f.Severity, f.ID, f.Claim)
	}
	return b.String()
}

// checkGlooJob: the launcher's three children are ranks started by exec,
// not forked workers, and the job gets no NCCL advice: its backend is gloo.
func checkGlooJob(t *testing.T, r render.Report, launcher int) {
	t.Helper()
	ranks := map[string]bool{}
	for _, p := range r.Processes {
		if p.PID == launcher && p.Role != "launcher" {
			t.Errorf("the ranks' parent (pid %d) is their launcher, not %q", p.PID, p.Role)
		}
		if p.PPID != launcher || p.Exited {
			continue
		}
		if p.Role != "rank" || p.Start != "exec" {
			t.Errorf("pid %d (rank %q): role %q, start %q; want a rank started by exec", p.PID, p.Rank, p.Role, p.Start)
		}
		ranks[p.Rank] = true
	}
	if len(ranks) != 3 {
		t.Errorf("ranks seen %v, want 0, 1 and 2", ranks)
	}
	for _, id := range []string{"workers-exceed-cores", "worker-start-method", "worker-cow-growth", "nccl-*"} {
		for _, f := range findingsWith(r, id) {
			t.Errorf("a gloo job's ranks are not DataLoader workers and use no NCCL: %s: %s", f.ID, f.Claim)
		}
	}
	// Nor in the advice of another finding or the verdict: survivors are
	// made to fail loudly by the process group's timeout, not NCCL's
	// error handling.
	if r.Verdict != nil && strings.Contains(r.Verdict.Decision, "NCCL_") {
		t.Errorf("the verdict gives a gloo job NCCL advice: %s", r.Verdict.Decision)
	}
	for _, f := range r.Findings {
		if f.ID != "distributed-backend" && strings.Contains(f.Decision, "NCCL_") {
			t.Errorf("%s gives a gloo job NCCL advice: %s", f.ID, f.Decision)
		}
	}
	b := findingsWith(r, "distributed-backend")
	if len(b) != 1 || !strings.HasPrefix(b[0].Claim, "ranks 0-2 use gloo, not NCCL (they map libgloo") {
		t.Errorf("want one distributed-backend finding naming gloo; findings:\n%s", claims(r))
	}
}

// TestGlooRanksAttached: a real torch.distributed job (gloo, three ranks
// started by a plain launcher with subprocess: fork and exec of the same
// command line), rank 1 deadlocked on a lock, the others in all_reduce;
// gpufeed attaches to the launcher.
func TestGlooRanksAttached(t *testing.T) {
	requireTorch(t)
	job := startScenario(t, testjob.TorchRanks, "--world", "3", "--hang", "1")
	awaitEvent(t, job, "ranks", 30*time.Second)
	awaitEvent(t, job, "hung", 120*time.Second)
	for _, window := range []string{"3s", "4s"} {
		r := diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", window)
		checkGlooJob(t, r, job.PID)
	}
}

// TestGlooRanksLaunched: the same job under diagnose -- CMD, the launcher
// holding each rank 0.3 s between fork and exec, so that the sampler sees
// each first with the launcher's command line, environment and memory
// layout, and must notice the exec from the layout alone.
func TestGlooRanksLaunched(t *testing.T) {
	py := requireTorch(t)
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, string(testjob.TorchRanks))
	r := diagnoseLaunched(t, 8*time.Second, py, "-u", script, "--world", "3", "--preexec-delay", "0.3")
	checkGlooJob(t, r, r.Target.PID)
}

var cowClaim = regexp.MustCompile(`^\d forked workers? of pid (\d+) \(python3\) copy its memory at (\d+\.\d) [KM]iB/s together, copy-on-write: their unique memory rises while their resident memory stays flat`)

// checkCOW: over a list, the DataLoader's forked workers are found copying
// the trainer's memory, with the fix; over a numpy array they are not.
func checkCOW(t *testing.T, r render.Report, storage string, trainer int) {
	t.Helper()
	if ws := findingsWith(r, "worker-start-method"); len(ws) != 1 || !strings.Contains(ws[0].Claim, "started 4 worker processes by fork") {
		t.Errorf("want the 4 DataLoader workers found forked; findings:\n%s", claims(r))
	}
	cow := findingsWith(r, "worker-cow-growth")
	if storage == "numpy" {
		for _, f := range cow {
			t.Errorf("a numpy-backed dataset copies nothing: %s", f.Claim)
		}
		return
	}
	if len(cow) != 1 {
		t.Fatalf("want one worker-cow-growth finding; findings:\n%s", claims(r))
	}
	f := cow[0]
	m := cowClaim.FindStringSubmatch(f.Claim)
	if m == nil || m[1] != strconv.Itoa(trainer) {
		t.Errorf("claim %q", f.Claim)
	}
	if !strings.Contains(f.Decision, "flat storage (numpy arrays, Arrow, torch tensors or an mmap'd file)") || !strings.Contains(f.Decision, "fewer workers") {
		t.Errorf("decision %q", f.Decision)
	}
	var baseline, perWorker bool
	for _, e := range f.Evidence {
		baseline = baseline || strings.Contains(e.What, "fork baseline") && e.Value > 0 && e.Value <= 8
		perWorker = perWorker || strings.HasPrefix(e.What, "unique memory (USS) of worker pid") && e.Unit == "MiB/s" && e.Value > 0
	}
	if !baseline || !perWorker {
		t.Errorf("want the fork baseline and each worker's USS rate in the evidence: %+v", f.Evidence)
	}
}

// TestDataLoaderCopyOnWrite: a real torch DataLoader, 4 workers forked from
// a trainer holding 3 M floats as a Python list (copy-on-write) or as a
// numpy array (flat). gpufeed attaches with short windows, twice, and runs
// the trainer under diagnose -- CMD once.
func TestDataLoaderCopyOnWrite(t *testing.T) {
	py := requireTorch(t)
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	for _, storage := range []string{"list", "numpy"} {
		t.Run(storage, func(t *testing.T) {
			job := startScenario(t, testjob.TorchDataLoader, "--storage", storage, "--workers", "4", "--items", "3000000")
			awaitEvent(t, job, "workers", 120*time.Second)
			time.Sleep(2 * time.Second) // attach to a loader already running
			for _, window := range []string{"4s", "5s"} {
				checkCOW(t, diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", window), storage, job.PID)
			}
			job.Stop()
			r := diagnoseLaunched(t, 20*time.Second, py, "-u", filepath.Join(dir, string(testjob.TorchDataLoader)),
				"--storage", storage, "--workers", "4", "--items", "3000000")
			checkCOW(t, r, storage, r.Target.PID)
		})
	}
}

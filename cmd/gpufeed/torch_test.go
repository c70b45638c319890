package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/livetest"
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

// diagnoseJSONAtOnce runs diagnose -o json with args, one observer per
// window, all attached at once (they read the job, not each other: an
// attach's own cost is a small part of a CPU), and wants exit 0 of each.
func diagnoseJSONAtOnce(t *testing.T, windows []string, args ...string) []render.Report {
	t.Helper()
	var argss [][]string
	for _, w := range windows {
		argss = append(argss, append([]string{"diagnose", "-o", "json", "--duration", w}, args...))
	}
	reps := make([]render.Report, len(windows))
	for i, r := range runAtOnce(t, argss...) {
		if r.code != 0 {
			t.Fatalf("diagnose %v over %s: exit %d: %s", args, windows[i], r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.out), &reps[i]); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
	}
	return reps
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
	livetest.Need(t)
	lightLive(t)
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
	livetest.Need(t)
	py := requireTorch(t)
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, string(testjob.TorchRanks))
	r := diagnoseLaunched(t, 8*time.Second, py, "-u", script, "--world", "3", "--preexec-delay", "0.3")
	checkGlooJob(t, r, r.Target.PID)
}

var cowClaim = regexp.MustCompile(`^\d forked workers? of pid (\d+) \(python3\) hold (\d+\.\d) [KM]iB of private copies of its memory, copy-on-write: pages they shared with it became their own as they touched its Python objects`)

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
		baseline = baseline || strings.HasPrefix(e.What, "what a fresh fork holds of its own in those mappings") && e.Value > 0 && e.Value <= 8
		perWorker = perWorker || strings.HasPrefix(e.What, "copied by worker pid") && e.Unit == "MiB" && e.Value > 0
	}
	if !baseline || !perWorker {
		t.Errorf("want a fresh fork's copies and each worker's in the evidence: %+v", f.Evidence)
	}
}

// TestDataLoaderCopyOnWrite: a real torch DataLoader, 4 workers forked from
// a trainer holding 3 M floats as a Python list (copy-on-write) or as a
// numpy array (flat), run under diagnose -- CMD. The same loaders attached
// (--pid, short windows, repeated) are TestDataLoaderCopiedLevelAttached's,
// which checks the same finding at each age.
func TestDataLoaderCopyOnWrite(t *testing.T) {
	livetest.Need(t)
	py := requireTorch(t)
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	for _, storage := range []string{"list", "numpy"} {
		t.Run(storage, func(t *testing.T) {
			// Copies are memory, not CPU time: the two loaders run side
			// by side.
			t.Parallel()
			r := diagnoseLaunched(t, 20*time.Second, py, "-u", filepath.Join(dir, string(testjob.TorchDataLoader)),
				"--storage", storage, "--workers", "4", "--items", "3000000")
			checkCOW(t, r, storage, r.Target.PID)
		})
	}
}

// smapsAnon reads the anonymous private writable mappings of /proc/PID/smaps
// (start-end -> Rss and Private_Dirty in bytes): the test's own reading,
// independent of gpufeed's parser.
func smapsAnon(pid int) (map[string][2]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	out := map[string][2]float64{}
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			cur = ""
			path := ""
			if len(f) > 5 {
				path = f[5]
			}
			if len(f) >= 5 && f[4] == "0" && f[1][1] == 'w' && f[1][3] == 'p' && (path == "" || path == "[heap]" || strings.HasPrefix(path, "[anon:")) {
				cur = f[0]
				out[cur] = [2]float64{}
			}
			continue
		}
		if cur == "" || len(f) < 3 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		m := out[cur]
		switch f[0] {
		case "Rss:":
			m[0] = v * 1024
		case "Private_Dirty:":
			m[1] = v * 1024
		}
		out[cur] = m
	}
	return out, nil
}

// copiedBySmaps is what the workers copied of their parent's memory, as
// smaps gives it: each worker's Private_Dirty in its anonymous mappings, in
// proportion to the part of each that the parent's anonymous mappings cover
// (whole when inside one: a mapping's bounds move with brk and with
// neighbours merged in, the memory staying), summed.
func copiedBySmaps(parent int, workers []int) (float64, error) {
	pm, err := smapsAnon(parent)
	if err != nil {
		return 0, err
	}
	type span struct{ lo, hi uint64 }
	bounds := func(rng string) span {
		lo, hi, _ := strings.Cut(rng, "-")
		l, _ := strconv.ParseUint(lo, 16, 64)
		h, _ := strconv.ParseUint(hi, 16, 64)
		return span{l, h}
	}
	var parents []span
	for rng := range pm {
		parents = append(parents, bounds(rng))
	}
	sum := 0.0
	for _, w := range workers {
		wm, err := smapsAnon(w)
		if err != nil {
			return 0, err
		}
		for rng, m := range wm {
			c := bounds(rng)
			covered := uint64(0)
			for _, p := range parents {
				if lo, hi := max(p.lo, c.lo), min(p.hi, c.hi); hi > lo {
					covered += hi - lo
				}
			}
			if c.hi > c.lo {
				sum += m[1] * float64(covered) / float64(c.hi-c.lo)
			}
		}
	}
	return sum, nil
}

// copiedReading is the test's own smaps figure at a moment.
type copiedReading struct {
	at     time.Time
	copied float64
}

// TestDataLoaderCopiedLevelAttached: one long-lived real torch DataLoader
// per kind (4 workers forked over a list of 1.5 M floats, over a numpy
// array, and 2 spawned over the list), reading in random order (each
// worker touches every page of the list within seconds, then copies
// little more: a rate alone misses it once the copies have levelled off),
// gpufeed attached to each at 3 s and 15 s after the workers started,
// with a 5 s and a 15 s window at each age (the two at once). Over the
// list every window finds the copies (the finding whole, as checkCOW
// wants it), and the amount it reports is within 10 % of what smaps gives
// at the end of the window (read by the test every half second); over the
// numpy array and with spawn workers nothing is found (spawn attached at
// 3 s only, with a 5 s window: its workers share no pages to copy at any
// age). Attached at 15 s the workers over the list have copied what they
// will: smaps' growth over the 5 s window is under the rate the growth
// rule needs (checked), so the level alone must name them.
//
// Sizes and ages were cut for the suite's time: with 3 M floats the copies
// levelled off only by 30 s (293.1 MiB at 30 s, 293.2 MiB at 50 s), and
// four spawned workers took 40 s to import torch beside the other loaders.
//
// It stays in the serial group: in the light group (tried) its three busy
// loaders slowed the light tests beside them, and on a fresh clone the
// agent's idle-connection flood test then found a connection still open
// after its header timeout.
func TestDataLoaderCopiedLevelAttached(t *testing.T) {
	livetest.Need(t)
	requireTorch(t)
	ages := []time.Duration{3 * time.Second, 15 * time.Second}
	for _, kind := range []struct {
		name, storage, method string
		workers               int
	}{{"list", "list", "fork", 4}, {"numpy", "numpy", "fork", 4}, {"spawn", "list", "spawn", 2}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			windows := []time.Duration{5 * time.Second, 15 * time.Second}
			if kind.method == "spawn" {
				windows = windows[:1]
			}
			job := startScenario(t, testjob.TorchDataLoader, "--storage", kind.storage, "--workers", strconv.Itoa(kind.workers), "--items", "1500000", "--start-method", kind.method, "--shuffle",
				"--batch", "2560", "--step", "0.05")
			workers := awaitEvent(t, job, "workers", 180*time.Second).Ints("workers")
			started := time.Now()
			if len(workers) != kind.workers {
				t.Fatalf("workers %v, want %d", workers, kind.workers)
			}
			// The test's own smaps readings, every half second, until the end.
			var mu sync.Mutex
			var readings []copiedReading
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					if c, err := copiedBySmaps(job.PID, workers); err == nil {
						mu.Lock()
						readings = append(readings, copiedReading{time.Now(), c})
						mu.Unlock()
					}
					select {
					case <-stop:
						return
					case <-time.After(500 * time.Millisecond):
					}
				}
			}()
			defer func() { close(stop); <-done }()
			for n, age := range ages {
				if kind.method == "spawn" && n > 0 {
					// Spawned workers share no pages with the trainer:
					// there is nothing to grow with age, and their start
					// (each imports torch) takes 40 s beside the other
					// loaders, so a later age would end the test last.
					break
				}
				time.Sleep(time.Until(started.Add(age)))
				var ws []string
				for _, w := range windows {
					ws = append(ws, w.String())
				}
				reports := diagnoseJSONAtOnce(t, ws, "--device", "none", "--pid", strconv.Itoa(job.PID))
				if c, err := copiedBySmaps(job.PID, workers); err == nil {
					mu.Lock()
					readings = append(readings, copiedReading{time.Now(), c})
					mu.Unlock()
				}
				for i, r := range reports {
					label := fmt.Sprintf("attached %s after start, %s window", age, windows[i])
					begun, err := time.Parse(time.RFC3339Nano, r.Window.Started)
					if err != nil {
						t.Fatal(err)
					}
					end := begun.Add(time.Duration(r.Window.DurationNS))
					// smaps' figure at the window's end lies between the
					// test's last reading before it and its first after.
					mu.Lock()
					var before, after *copiedReading
					for j := range readings {
						rd := &readings[j]
						if !rd.at.After(end) {
							before = rd
						} else if after == nil {
							after = rd
						}
					}
					mu.Unlock()
					if before == nil || after == nil {
						t.Fatalf("%s: no smaps reading of the test's on both sides of the window's end %s", label, end)
					}
					want := after.copied
					if kind.method == "fork" {
						// The finding whole: its claim, decision and evidence
						// over the list, nothing over the numpy array.
						checkCOW(t, r, kind.storage, job.PID)
					}
					cow := findingsWith(r, "worker-cow-growth")
					if kind.name != "list" {
						t.Logf("%s: smaps says the workers copied %.1f MiB", label, want/(1<<20))
						for _, f := range cow {
							t.Errorf("%s: %s workers copy nothing to speak of: %s", label, kind.name, f.Claim)
						}
						continue
					}
					if len(cow) != 1 {
						t.Errorf("%s: want one worker-cow-growth finding (smaps says the workers copied %.1f MiB); findings:\n%s", label, want/(1<<20), claims(r))
						continue
					}
					got := math.NaN()
					for _, e := range cow[0].Evidence {
						if strings.HasPrefix(e.What, "copied so far by the 4 workers together") && e.Unit == "MiB" {
							got = e.Value * (1 << 20)
						}
					}
					if n == len(ages)-1 && windows[i] == 5*time.Second {
						// Levelled off: smaps' growth over the window is
						// under what the growth rule needs.
						var first *copiedReading
						mu.Lock()
						for j := range readings {
							if !readings[j].at.Before(begun) {
								first = &readings[j]
								break
							}
						}
						mu.Unlock()
						if first == nil || !before.at.After(first.at) {
							t.Fatalf("%s: no smaps readings inside the window", label)
						}
						grew := before.copied - first.copied
						rate := grew / before.at.Sub(first.at).Seconds()
						t.Logf("%s: smaps' copies grew %.1f MiB over the window, %.0f KiB/s (%.1f to %.1f MiB)", label, grew/(1<<20), rate/1024, first.copied/(1<<20), before.copied/(1<<20))
						if rate >= thresholds.COWMinCopiedRate && grew >= thresholds.COWMinGrowth {
							t.Errorf("%s: the copies still grow %.0f KiB/s, %.1f MiB over the window, as the growth rule needs (%d KiB/s, %d MiB): the level is not what this window tests",
								label, rate/1024, grew/(1<<20), thresholds.COWMinCopiedRate>>10, thresholds.COWMinGrowth>>20)
						}
					}
					lo, hi := min(before.copied, after.copied), max(before.copied, after.copied)
					t.Logf("%s: gpufeed %.1f MiB, smaps %.1f MiB %s before the window's end, %.1f MiB %s after; %s", label, got/(1<<20),
						before.copied/(1<<20), end.Sub(before.at), after.copied/(1<<20), after.at.Sub(end), cow[0].Claim)
					if math.IsNaN(got) || got < 0.9*lo || got > 1.1*hi {
						t.Errorf("%s: copied %.1f MiB, smaps says %.1f to %.1f MiB around the window's end; evidence %+v", label, got/(1<<20), lo/(1<<20), hi/(1<<20), cow[0].Evidence)
					}
					if !strings.Contains(cow[0].Claim, "hold ") || !strings.Contains(cow[0].Claim, "of private copies of its memory") {
						t.Errorf("%s: claim %q", label, cow[0].Claim)
					}
				}
			}
		})
	}
}

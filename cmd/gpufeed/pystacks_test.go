package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// lineOf is the 1-based line of the first line of the embedded script
// holding marker.
func lineOf(t *testing.T, script testjob.Script, marker string) int {
	t.Helper()
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, string(script)))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("%s holds no %q", script, marker)
	return 0
}

// TestGlooStuckRankNamedByStacks: a real torch.distributed job (gloo, three
// ranks from a plain launcher) whose rank 2 deadlocks on a lock while ranks
// 0-1 wait in all_reduce. From /proc alone the ranks look alike (every main
// thread in a futex); with --py-stacks the stalled verdict's first line
// names rank 2 as the member the others wait for, at the line of its
// lock.acquire(), and the others in all_reduce. Attached twice, with
// different windows, in text and in JSON.
func TestGlooStuckRankNamedByStacks(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	requireTorch(t)
	stuck := lineOf(t, testjob.TorchRanks, "lock.acquire()  # never returns")
	call := lineOf(t, testjob.TorchRanks, "dist.all_reduce(t)")
	job := sharedHungRanks(t)
	// rank 2 says "hung" as it takes its lock; on a loaded machine ranks
	// 0-1 may still be finishing the last round they shared with it (a
	// fixed 2 s was not always enough beside the saturated light group: the
	// window saw the job move, and the verdict was not stalled)
	awaitQuiet(t, job.PID, time.Second, 30*time.Second)
	wantStuck := "rank 2 is the member the others wait for: rank 2 (pid "
	wantAt := "is at rank_main (" // then the script's path
	wantLine := "torch_ranks.py:" + strconv.Itoa(stuck) + "), outside any collective"
	wantOthers := "ranks 0-1 wait in all_reduce ("
	wantCaller := "called from rank_main ("
	for _, window := range []string{"3s", "4s"} {
		r := diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", window, "--py-stacks")
		if r.Verdict == nil || r.Verdict.Class != "stalled" {
			t.Fatalf("want a stalled verdict; got %+v\n%s", r.Verdict, claims(r))
		}
		s := r.Verdict.Summary
		for _, w := range []string{wantStuck, wantAt, wantLine, wantOthers, "distributed_c10d.py:", wantCaller, "torch_ranks.py:" + strconv.Itoa(call) + ")"} {
			if !strings.Contains(s, w) {
				t.Errorf("window %s: the verdict %q does not say %q", window, s, w)
			}
		}
		if p := findingsWith(r, "rank-positions"); len(p) != 1 || len(p[0].Evidence) != 3 {
			t.Errorf("want one rank-positions finding with each rank's position; findings:\n%s", claims(r))
		}
	}
	rec := filepath.Join(t.TempDir(), "stuck.gpufeed")
	out, stderr, code := run(t, "diagnose", "--device", "none", "--pid", strconv.Itoa(job.PID), "--duration", "3s", "--py-stacks", "--record", rec)
	if code == 2 || code > 3 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	first := verdictParagraph(out)
	if !strings.HasPrefix(first, "VERDICT: stalled") || !strings.Contains(first, wantStuck) || !strings.Contains(first, wantLine) || !strings.Contains(first, wantOthers) {
		t.Errorf("the report's first line does not name rank 2 and its line: %q", first)
	}
	// the recording keeps the stacks: judged later, with no process left,
	// it names the same rank at the same line
	again, stderr, _ := run(t, "report", rec)
	if got := verdictParagraph(again); got != first {
		t.Errorf("report of the recording: %q, live: %q (%s)", got, first, stderr)
	}
}

// awaitQuiet waits until the processes of process group pgid have used
// under 5 clock ticks of CPU together over quiet (their utime and stime in
// /proc/PID/stat): a gloo job's helper threads still wake now and then
// once it hangs (about a tick each 5 s), a round costs far more. It fails
// the test after limit.
func awaitQuiet(t *testing.T, pgid int, quiet, limit time.Duration) {
	t.Helper()
	cpu := func() uint64 {
		var sum uint64
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
			if err != nil {
				continue
			}
			i := strings.LastIndexByte(string(b), ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(string(b[i+1:]))
			// after the command: state, ppid, pgrp ... utime (12th), stime (13th)
			if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
				continue
			}
			u, _ := strconv.ParseUint(f[11], 10, 64)
			s, _ := strconv.ParseUint(f[12], 10, 64)
			sum += u + s
		}
		return sum
	}
	deadline := time.Now().Add(limit)
	last := cpu()
	for time.Now().Before(deadline) {
		time.Sleep(quiet)
		now := cpu()
		if now-last < 5 {
			return
		}
		last = now
	}
	t.Fatalf("the job (process group %d) still used 5 clock ticks of CPU or more each %v, %v after its hang", pgid, quiet, limit)
}

// hungRanks is a real three-rank gloo job whose rank 2 took a lock it
// already held while ranks 0-1 wait for it in all_reduce: a state the tests
// only read (the stacks are read from the ranks' memory, without ptrace).
// The two tests of it, side by side in the light group, share one: started
// by the first to ask, stopped when the last of them ends. A job each cost
// the light group three more torch ranks' start-up CPU.
var hungRanks struct {
	sync.Mutex
	run   *testjob.Run
	err   error
	users int
	ready chan struct{}
}

// sharedHungRanks returns the hung job once rank 2 has said it is hung.
func sharedHungRanks(t *testing.T) *testjob.Run {
	t.Helper()
	h := &hungRanks
	h.Lock()
	first := h.users == 0
	if first {
		h.ready, h.run, h.err = make(chan struct{}), nil, nil
	}
	h.users++
	ready := h.ready
	h.Unlock()
	t.Cleanup(func() {
		h.Lock()
		defer h.Unlock()
		if h.users--; h.users == 0 && h.run != nil {
			h.run.Stop()
			h.run = nil
		}
	})
	if first {
		ctx := context.Background() // the job outlives the test that started it
		r, err := testjob.Start(ctx, testjob.TorchRanks, nil, "--world", "3", "--hang", "2")
		if err == nil {
			if _, err = r.Await(ctx, "ranks", 30*time.Second); err == nil {
				_, err = r.Await(ctx, "hung", 120*time.Second)
			}
		}
		h.Lock()
		h.run, h.err = r, err
		h.Unlock()
		close(ready)
	} else {
		select {
		case <-ready:
		case <-t.Context().Done():
			t.Fatal("the test ended before the shared hung job was ready")
		}
	}
	h.Lock()
	r, err := h.run, h.err
	h.Unlock()
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Without --py-stacks the same job's verdict cannot name the member: the
// position finding comes only from the stacks.
func TestGlooStuckRankWithoutStacks(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	requireTorch(t)
	job := sharedHungRanks(t)
	r := diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", "3s")
	if p := findingsWith(r, "rank-positions"); len(p) != 0 {
		t.Errorf("no stacks were read, yet: %+v", p)
	}
}

// The Python-time tests' training loop: one process serving the attached
// tests one after the other, moved to the mode each wants (its --control
// file), paused between them and ended after the last. Importing torch was
// most of each test's time.
var pyTimeModes = []string{"loader", "item", "optim", "transforms", "batch-transforms"}

var pyTime struct {
	sync.Mutex
	run     *testjob.Run
	control string
	mode    int
}

// pyTimeJob returns the shared training loop once it runs steadily in mode.
func pyTimeJob(t *testing.T, mode string) *testjob.Run {
	t.Helper()
	k := slices.Index(pyTimeModes, mode)
	if k < 0 {
		t.Fatalf("no mode %q", mode)
	}
	j := &pyTime
	j.Lock()
	defer j.Unlock()
	if j.run != nil && j.mode > k { // run again (-count) or out of order
		j.run.Stop()
		j.run = nil
	}
	set := func(v string) error {
		if err := os.WriteFile(j.control+".new", []byte(v), 0o644); err != nil {
			return err
		}
		return os.Rename(j.control+".new", j.control)
	}
	j.mode = k
	if j.run == nil {
		dir, err := os.MkdirTemp("", "gpufeed-pytime-")
		if err != nil {
			t.Fatal(err)
		}
		j.control = filepath.Join(dir, "mode")
		if err := set(mode); err != nil {
			os.RemoveAll(dir)
			t.Fatal(err)
		}
		r, err := testjob.Start(context.Background(), testjob.TorchPyTime, nil, "--control", j.control) // outlives the test
		if errors.Is(err, testjob.ErrUnavailable) {
			os.RemoveAll(dir)
			t.Skip(err)
		}
		if err != nil {
			os.RemoveAll(dir)
			t.Fatal(err)
		}
		r.OnStop(func() error { return os.RemoveAll(dir) })
		j.run = r
	} else if err := set(mode); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := j.run.Await(t.Context(), "steady", 120*time.Second)
		if err != nil {
			j.run.Stop()
			j.run = nil
			t.Fatal(err)
		}
		var v string
		if json.Unmarshal(m.Fields["mode"], &v) == nil && v == mode {
			break
		}
	}
	r := j.run
	t.Cleanup(func() {
		j.Lock()
		defer j.Unlock()
		if j.run != r {
			return
		}
		if k == len(pyTimeModes)-1 {
			j.run.Stop()
			j.run = nil
			return
		}
		_ = set("pause") // no steps (no CPU) until the next test moves it on
	})
	return r
}

// stopPyTimeJob ends the loop a run of some of the tests left.
func stopPyTimeJob() {
	pyTime.Lock()
	defer pyTime.Unlock()
	if pyTime.run != nil {
		pyTime.run.Stop()
		pyTime.run = nil
	}
}

// TestPythonTimeShares: a real CPU training loop whose Python time has one
// known home; attached with --py-stacks, the python-time finding names
// that home as the training thread's lead stage, with its change.
func TestPythonTimeShares(t *testing.T) {
	livetest.Need(t)
	sharesWithinTheJob(t)
	requireTorch(t)
	for _, c := range []struct{ mode, stage, change string }{
		{"loader", "waiting on the DataLoader's __next__", "raise num_workers"},
		{"item", "at a line copying a value back to the host", "call .item() every N steps"},
		{"optim", "in the optimizer step", "foreach=True"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			job := pyTimeJob(t, c.mode)
			r := diagnoseJSON(t, "--pid", strconv.Itoa(job.PID), "--duration", "3s", "--py-stacks")
			fs := findingsWith(r, "python-time")
			if len(fs) != 1 {
				t.Fatalf("want one python-time finding; findings:\n%s", claims(r))
			}
			if slices.Contains(r.Notes, diagnose.PyNotSampled) {
				t.Errorf("sampled, yet the report says nothing was: %q", r.Notes)
			}
			f := fs[0]
			if f.Severity != finding.Warning || !strings.HasPrefix(f.Decision, "The thread spends ") || !strings.Contains(f.Decision, "% of its time "+c.stage) || !strings.Contains(f.Decision, c.change) {
				t.Errorf("%s %q\n%q", f.Severity, f.Claim, f.Decision)
			}
			if !strings.Contains(f.Subject, "thread "+strconv.Itoa(job.PID)+" ") {
				t.Errorf("the training loop's thread is the main thread of pid %d: %q", job.PID, f.Subject)
			}
		})
	}
}

// TestPythonTimeTransforms: real CPU training loops whose thread spends its
// time in torchvision's transforms (Debian's python3-torchvision), attached
// twice each. With a DataLoader without workers (num_workers=0, the
// default) the transforms run inside the DataLoader's __next__, in the
// loop's own thread: that thread is not waiting on workers (it has none),
// it runs the transforms, and the change is to give the DataLoader workers.
// Applied to each batch in the loop, the change is workers or the GPU.
func TestPythonTimeTransforms(t *testing.T) {
	livetest.Need(t)
	sharesWithinTheJob(t)
	requireTorch(t)
	if err := testjob.TorchVision(); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct{ mode, change string }{
		{"transforms", "set num_workers"},
		{"batch-transforms", "on the GPU on whole batches"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			job := pyTimeJob(t, c.mode)
			windows := []string{"3s", "4s"}
			for i, r := range diagnoseJSONAtOnce(t, windows, "--device", "none", "--pid", strconv.Itoa(job.PID), "--py-stacks") {
				window := windows[i]
				fs := findingsWith(r, "python-time")
				if len(fs) != 1 {
					// The notes say whether the stacks were sampled at
					// all (a loaded host slows opening the interpreter).
					t.Fatalf("window %s: want one python-time finding; notes %q; findings:\n%s", window, r.Notes, claims(r))
				}
				f := fs[0]
				if f.Severity != finding.Warning || !strings.HasPrefix(f.Decision, "The thread spends ") ||
					!strings.Contains(f.Decision, "% of its time in transforms run by this thread") || !strings.Contains(f.Decision, c.change) {
					t.Errorf("window %s: %s %q\n%q", window, f.Severity, f.Claim, f.Decision)
				}
				if strings.Contains(f.Claim, "waiting on the DataLoader") {
					t.Errorf("window %s: the thread has no workers to wait on: %q", window, f.Claim)
				}
			}
		})
	}
}

// TestPythonTimeLaunched: the same loop under diagnose --py-stacks -- CMD:
// the sampler follows the job from its start, through its imports.
func TestPythonTimeLaunched(t *testing.T) {
	livetest.Need(t)
	sharesWithinTheJob(t)
	py := requireTorch(t)
	dir := t.TempDir()
	if err := testjob.WriteScripts(dir); err != nil {
		t.Fatal(err)
	}
	// The loop's 11 s are counted from the end of its imports (seconds of
	// importing torch): it outlasts the 12 s window, which began at its
	// exec, and diagnose, which waits for the command it started, ends soon
	// after the window (with 16 s it waited 6 to 9 s more).
	out, stderr, code := run(t, "diagnose", "--device", "none", "-o", "json", "--duration", "12s", "--py-stacks", "--",
		py, filepath.Join(dir, string(testjob.TorchPyTime)), "--mode", "loader", "--seconds", "11")
	if code != 0 && code != 1 && code != 3 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, `"id": "python-time"`) || !strings.Contains(out, "waiting on the DataLoader's __next__") {
		t.Errorf("no python-time finding naming the DataLoader:\n%s", out)
	}
}

// TestGILHoldersNamed: three Python threads spinning in pure-Python loops
// pass the GIL between them; with --py-stacks the gil-contention finding
// names the threads that held it and the function they held it in.
func TestGILHoldersNamed(t *testing.T) {
	livetest.Need(t)
	job := startScenario(t, testjob.GILThreads, "--threads", "3")
	awaitEvent(t, job, "spinning", 30*time.Second)
	windows := []string{"3s", "4s"}
	for i, r := range diagnoseJSONAtOnce(t, windows, "--device", "none", "--pid", strconv.Itoa(job.PID), "--py-stacks") {
		window := windows[i]
		fs := findingsWith(r, "gil-contention")
		if len(fs) != 1 {
			t.Fatalf("want one gil-contention finding; findings:\n%s", claims(r))
		}
		if c := fs[0].Claim; !strings.Contains(c, "; the GIL was held by tid ") || !strings.Contains(c, "in spin (") || !strings.Contains(fs[0].Decision, "The GIL holders are tid ") {
			t.Errorf("window %s: %q / %q", window, c, fs[0].Decision)
		}
	}
}

// verdictParagraph is the report's verdict sentence, unwrapped: its first
// line and the indented lines that continue it (the text report wraps to the
// terminal's width), up to its first evidence line.
func verdictParagraph(out string) string {
	lines := strings.Split(out, "\n")
	p := lines[0]
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "  - ") {
			break
		}
		p += " " + strings.TrimSpace(l)
	}
	return p
}

// TestPyStacksNoneSampledIsSaid: --py-stacks over a job with no Python
// process (sleep) samples nothing, and the report says that where the
// Python time went is not known, rather than showing no finding of it.
func TestPyStacksNoneSampledIsSaid(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	out, stderr, code := run(t, "diagnose", "--device", "none", "-o", "json", "--duration", "2s", "--py-stacks", "--", "sleep", "4")
	if code != 0 && code != 1 && code != 3 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r render.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !slices.Contains(r.Notes, diagnose.PyNotSampled) {
		t.Errorf("no note that nothing was sampled; notes: %q", r.Notes)
	}
	if fs := findingsWith(r, "python-time"); len(fs) != 0 {
		t.Errorf("a python-time finding without samples: %+v", fs)
	}
}

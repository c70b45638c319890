package diagnose_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/testjob"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// These tests run the real jobs of internal/testjob under the real
// sampler, add the end-of-window facts (kernel log, descriptor kinds, memory
// limits) and check what frozen-job triage concludes.

// observe samples pid's tree for window and runs the end-of-window reads.
// Tiers are shortened so a few seconds hold enough slow-tier readings.
func observe(t *testing.T, pid int, window time.Duration) (*timeline.Timeline, frozen.Result) {
	t.Helper()
	fs, err := procfs.NewFS("/proc", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(sample.Config{FS: fs, PID: pid, Interval: 100 * time.Millisecond, Duration: window,
		SlowEvery: 500 * time.Millisecond, RollupEvery: time.Second, RollupBudget: 0.5, Tool: "gpufeed test"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	diagnose.EndOfWindow{FS: procfs.At("", "")}.Read(t.Context(), tl, nil)
	return tl, frozen.Analyze(tl, nil)
}

func start(t *testing.T, w testjob.Script, env []string, args ...string) *testjob.Run {
	t.Helper()
	r, err := testjob.Start(t.Context(), w, env, args...)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

func await(t *testing.T, r *testjob.Run, event string) testjob.Message {
	t.Helper()
	m, err := r.Await(t.Context(), event, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func findings(r frozen.Result, id string) []finding.Finding {
	var out []finding.Finding
	for _, f := range r.Findings {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, r frozen.Result, id string) finding.Finding {
	t.Helper()
	fs := findings(r, id)
	if len(fs) != 1 {
		var all []string
		for _, f := range r.Findings {
			all = append(all, f.ID+": "+f.Claim)
		}
		t.Fatalf("want one %s finding, got %d:\n%s", id, len(fs), strings.Join(all, "\n"))
	}
	return fs[0]
}

func stalled(t *testing.T, r frozen.Result) *finding.Verdict {
	t.Helper()
	v := frozen.Verdict(r)
	if v == nil || v.Class != finding.Stalled {
		t.Fatalf("want a stalled verdict; progress %+v", r.Progress)
	}
	return v
}

func requireKernelLog(t *testing.T, tl *timeline.Timeline) {
	t.Helper()
	for _, e := range tl.Events {
		if e.Kind == timeline.EventKernelLogUnavailable {
			t.Skip("kernel log not readable here:", e.Text)
		}
	}
}

// TestOOMRankWhileWatched: gpufeed watches a three-rank job when rank 2 is
// OOM-killed in its 64 MiB memory cgroup; ranks 0-1 then wait for it.
func TestOOMRankWhileWatched(t *testing.T) {
	livetest.Need(t)
	o, err := testjob.StartRanks(t.Context(), 2, 150, "NCCL_ASYNC_ERROR_HANDLING=1")
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Stop() })
	tl, r := observe(t, o.PID, 6*time.Second)
	requireKernelLog(t, tl)
	v := stalled(t, r)
	victim := o.Ranks[2]
	d := one(t, r, "member-died")
	re := regexp.MustCompile(fmt.Sprintf(`^rank 2 \(pid %d\) was killed by the OOM killer at \d\d:\d\d:\d\d holding \d+\.\d MiB; ranks 0-1 wait in read on pipe$`, victim))
	if !re.MatchString(d.Claim) {
		t.Errorf("claim %q", d.Claim)
	}
	limit := false
	for _, e := range d.Evidence {
		if e.What == "memory cgroup limit" && e.Value == 64 && e.Unit == "MiB" {
			limit = true
		}
	}
	if !limit {
		t.Errorf("no 64 MiB limit in the evidence: %+v", d.Evidence)
	}
	if !strings.HasPrefix(v.Summary, "the job is stalled: rank 2 (pid") || v.Confidence < 0.9 {
		t.Errorf("verdict %+v", v)
	}
	if !strings.Contains(r.Progress.Since, fmt.Sprintf("rank 2 (pid %d)", victim)) {
		t.Errorf("the stall should be judged since the rank died: %+v", r.Progress)
	}
	// The ranks set NCCL_ASYNC_ERROR_HANDLING but use no NCCL (plain Python
	// over pipes): no NCCL advice, and the backend seen is said.
	for _, f := range r.Findings {
		if strings.HasPrefix(f.ID, "nccl-") {
			t.Errorf("NCCL advice for ranks that map no NCCL: %s", f.Claim)
		}
	}
	if b := one(t, r, "distributed-backend"); !strings.HasPrefix(b.Claim, "ranks 0-1 use no torch.distributed backend library, not NCCL") {
		t.Errorf("%q", b.Claim)
	}
	bt := one(t, r, "blocked-threads")
	if !strings.Contains(bt.Claim, "read on pipe") {
		t.Errorf("%q", bt.Claim)
	}
}

// TestOOMRankBeforeAttach: gpufeed attaches after rank 2 was killed; the
// kernel log since the job started still names it.
func TestOOMRankBeforeAttach(t *testing.T) {
	livetest.Need(t)
	o, err := testjob.StartOOMRanks(t.Context(), 2)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Stop() })
	tl, r := observe(t, o.PID, 2500*time.Millisecond)
	requireKernelLog(t, tl)
	stalled(t, r)
	// Reaped at once by its launcher: only the kernel log has it, and the
	// ranks alive and LOCAL_WORLD_SIZE tell which rank it was.
	none := findings(r, "rank-missing")
	if len(none) != 0 {
		t.Errorf("rank 2 is explained by its kill: %q", none[0].Claim)
	}
	f := one(t, r, "member-died")
	if !strings.HasPrefix(f.Claim, fmt.Sprintf("rank 2 (pid %d) was killed by the OOM killer at", o.Ranks[2])) || !strings.HasSuffix(f.Claim, "rank 2 by elimination (likely)") {
		t.Errorf("%q", f.Claim)
	}
}

func TestCOWObjectsVersusArray(t *testing.T) {
	livetest.Need(t)
	for _, storage := range []string{"objects", "array"} {
		t.Run(storage, func(t *testing.T) {
			r := start(t, testjob.COW, nil, "--storage", storage, "--workers", "2", "--items", "1500000", "--seconds", "8")
			m := await(t, r, "workers")
			// a worker's first 3 s are its start-up: 6 s leave three readings over 3 s
			_, res := observe(t, r.PID, 6*time.Second)
			cow := findings(res, "worker-cow-growth")
			if storage == "array" {
				if len(cow) != 0 {
					t.Errorf("flat storage must show no copy-on-write growth: %q", cow[0].Claim)
				}
				return
			}
			if len(cow) != 1 {
				t.Fatalf("want a worker-cow-growth finding; findings %v", res.Findings)
			}
			f := cow[0]
			re := regexp.MustCompile(fmt.Sprintf(`^\d forked workers? of pid %d \(python3\) hold \d+\.\d MiB of private copies of its memory, .*; they copy \d+\.\d MiB/s together now`, r.PID))
			if !re.MatchString(f.Claim) || !strings.Contains(f.Claim, "copy-on-write") {
				t.Errorf("claim %q", f.Claim)
			}
			rates := 0
			for _, e := range f.Evidence {
				if e.Unit == "MiB/s" && strings.HasPrefix(e.What, "unique memory (USS) of worker pid") && e.Value >= 1 {
					rates++
				}
			}
			if rates == 0 {
				t.Errorf("no per-worker USS rate in the evidence: %+v (workers %v)", f.Evidence, m.Ints("workers"))
			}
			one(t, res, "worker-start-method")
		})
	}
}

func TestFDLeakTimeToExhaustion(t *testing.T) {
	livetest.Need(t)
	r := start(t, testjob.FDLeak, nil, "--soft", "400", "--rate", "25")
	await(t, r, "limit")
	_, res := observe(t, r.PID, 4*time.Second)
	f := one(t, res, "fd-exhaustion")
	re := regexp.MustCompile(`leaks file descriptors: \d+ open of a soft limit of 400, \d+\.\d more every second: it hits EMFILE \("Too many open files"\) in \d+ s; .*files \(\d+ under .*fdleak-`)
	if !re.MatchString(f.Claim) || !strings.Contains(f.Claim, "sockets") || !strings.Contains(f.Claim, "pipe ends") {
		t.Errorf("claim %q", f.Claim)
	}
}

func TestPipeHangStalled(t *testing.T) {
	livetest.Need(t)
	r := start(t, testjob.PipeHang, nil)
	await(t, r, "waiting")
	_, res := observe(t, r.PID, 2500*time.Millisecond)
	stalled(t, res)
	bt := one(t, res, "blocked-threads")
	if !strings.Contains(bt.Claim, "2 read on pipe") {
		t.Errorf("%q", bt.Claim)
	}
	for _, e := range bt.Evidence {
		if !strings.Contains(e.Text, "on pipe:[") || !strings.Contains(e.Text, "pipe_read") {
			t.Errorf("each waiter should name its pipe and wchan: %+v", e)
		}
	}
}

func TestFutexHangStalled(t *testing.T) {
	livetest.Need(t)
	r := start(t, testjob.FutexHang, nil, "--waiters", "3")
	await(t, r, "waiting")
	_, res := observe(t, r.PID, 2500*time.Millisecond)
	stalled(t, res)
	bt := one(t, res, "blocked-threads")
	if !strings.Contains(bt.Claim, "4 futex") || !strings.Contains(bt.Claim, "1 clock_nanosleep") {
		t.Errorf("%q", bt.Claim)
	}
	// the three waiters wait on the same lock: one group, one address
	for _, e := range bt.Evidence {
		if strings.Contains(e.Text, "futex") && strings.Contains(e.What, "3 threads") && strings.Contains(e.Text, "on futex 0x") {
			return
		}
	}
	t.Errorf("the waiters on one lock should be grouped with its address: %+v", bt.Evidence)
}

func TestGILThreads(t *testing.T) {
	livetest.Need(t)
	r := start(t, testjob.GILThreads, nil, "--threads", "3")
	await(t, r, "spinning")
	_, res := observe(t, r.PID, 3*time.Second)
	f := one(t, res, "gil-contention")
	if !strings.Contains(f.Claim, "busy Python threads ran") {
		t.Errorf("%q", f.Claim)
	}
	if res.Progress.Stalled() {
		t.Error("spinning threads are not a stall")
	}
}

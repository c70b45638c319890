package tracejudge

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// TestLateStartIsGPUWait: an operation launched while the device is idle,
// whose launch call returns at once but which starts 2 ms later, waited on
// something other than the CPU (an event, another stream, another device).
// Only the first consecutive-kernel delay after the call is launch
// latency; the rest is GPU-side wait. Counting all of it as launch latency
// made it submission: on a real recommender trace (trace_filter, rank 0) a
// 56 ms late start turned into "The CPU cannot launch fast enough" (a
// warning at 21 %) beside a verdict saying the CPU was not what delayed the
// work.
func TestLateStartIsGPUWait(t *testing.T) {
	b := trace.NewBuilder("built.json", "kineto")
	th := b.Thread(1, 1)
	st := b.Stream(0, 7)
	launch := b.Intern("cudaLaunchKernel")
	k := b.Intern("k")
	var ts, corr int64 = 0, 0
	const late = 2_000_000
	for i := range 60 {
		corr++
		b.AddRuntime(trace.RuntimeCall{Start: ts, End: ts + 5000, Corr: corr, Name: launch, Thread: th, Kind: trace.Launch})
		start := ts + 5000 + 2000 // 2 us of launch latency
		if i%2 == 1 {
			start += late // waits on something else
		}
		b.AddGPU(trace.GPUOp{Start: start, End: start + 100_000, Corr: corr, Name: k, Stream: st, Kind: trace.Kernel})
		ts = start + 100_000 + 1000 // the next launch comes after the op ends: the device is idle before it
	}
	r := Analyze(b.Finish(), Options{})
	lat, wait := r.Attribution.ByCause[tracestats.CauseLaunchLatency], r.Attribution.ByCause[tracestats.CauseGPUWait]
	if maxLat := int64(r.Attribution.Gaps) * 30_000; lat > maxLat {
		t.Errorf("launch latency %d ns over %d gaps: more than the 30 us consecutive-kernel delay per gap", lat, r.Attribution.Gaps)
	}
	if want := int64(29 * (late - 30_000)); wait < want {
		t.Errorf("GPU-side wait %d ns, want at least %d (29 late starts of 2 ms)", wait, want)
	}
	if r.Shares.Submission >= 5 {
		t.Errorf("submission share %.1f %%: late starts are not the CPU's", r.Shares.Submission)
	}
	for _, f := range r.Findings {
		if f.ID == "launch-thread-saturated" {
			t.Errorf("launch-thread-saturated fired: %s", f.Claim)
		}
	}
	if r.Verdict.Class == finding.SubmissionBound {
		t.Errorf("verdict %s: %s", r.Verdict.Class, r.Verdict.Summary)
	}
	if !strings.Contains(r.Verdict.Summary, "waiting on its own dependencies") {
		t.Errorf("verdict does not name the GPU-side wait: %s", r.Verdict.Summary)
	}
}

package tracejudge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// TestAllocatorChurnIsSteadyState: a cudaFree and a cudaMalloc in every one
// of 39 profiled steps, the GPU idle through them, is allocator churn, the
// steady state: the report names it with the step count, and never calls
// it set-up ("this looks like set-up inside the profiled window").
func TestAllocatorChurnIsSteadyState(t *testing.T) {
	b := trace.NewBuilder("built.json", "kineto")
	th := b.Thread(1, 1)
	st := b.Stream(0, 7)
	launch, malloc, free, k := b.Intern("cudaLaunchKernel"), b.Intern("cudaMalloc"), b.Intern("cudaFree"), b.Intern("gemm")
	var ts, corr int64
	for step := range 39 {
		stepStart := ts
		// The step frees the last step's buffer and allocates a new one:
		// 1.5 ms of the launching thread's time with the GPU idle.
		b.AddRuntime(trace.RuntimeCall{Start: ts, End: ts + 1_000_000, Name: free, Thread: th, Kind: trace.ClassifyRuntime("cudaFree")})
		ts += 1_000_000
		b.AddRuntime(trace.RuntimeCall{Start: ts, End: ts + 500_000, Name: malloc, Thread: th, Kind: trace.ClassifyRuntime("cudaMalloc")})
		ts += 500_000
		gpuAt := int64(0)
		for range 8 {
			corr++
			b.AddRuntime(trace.RuntimeCall{Start: ts, End: ts + 5000, Corr: corr, Name: launch, Thread: th, Kind: trace.Launch})
			start := max(ts+7000, gpuAt) // the stream runs them one after the other
			b.AddGPU(trace.GPUOp{Start: start, End: start + 400_000, Corr: corr, Name: k, Stream: st, Kind: trace.Kernel})
			gpuAt = start + 400_000
			ts += 6000
		}
		ts = gpuAt // the next step's free waits for the kernels
		b.AddCPU(trace.CPUOp{Start: stepStart, End: ts, Name: b.Intern(fmt.Sprintf("ProfilerStep#%d", step)), Thread: th, Kind: trace.Step})
	}
	r := Analyze(b.Finish(), Options{})
	var claim string
	for _, f := range r.Findings {
		if f.ID == "host-wait-other-api" {
			claim = f.Claim
		}
	}
	text := r.Verdict.Summary + " | " + r.Verdict.Missing + " | " + claim
	if strings.Contains(text, "set-up") && !strings.Contains(text, "not set-up") {
		t.Errorf("churn in every step called set-up: %s", text)
	}
	for _, want := range []string{"Allocator churn", "in 37 of 38 profiled steps", "cudaFree", "synchronises"} {
		if !strings.Contains(claim, want) || !strings.Contains(r.Verdict.Summary, want) {
			t.Errorf("finding or verdict does not say %q:\n  finding: %s\n  verdict: %s", want, claim, r.Verdict.Summary)
		}
	}
	if !strings.Contains(r.Verdict.Decision, "empty_cache") {
		t.Errorf("decision: %s", r.Verdict.Decision)
	}
}

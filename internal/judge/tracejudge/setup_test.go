package tracejudge

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// TestSetupLaunchNotSubmission: on HTA's alexnet trace one cudaLaunchKernel
// (the first launch of a cuDNN kernel, module loading) takes 3.06 s where
// the median launch takes 10 us. That one call is set-up, not the steady
// state: it must be named as set-up and left out of the submission share,
// and the CUDA-graph advice that rested on it must go.
func TestSetupLaunchNotSubmission(t *testing.T) {
	f, _ := filepath.Glob(filepath.Join(repoRoot, "testdata", "traces", "critical_path", "alexnet", "*.json.gz"))
	if len(f) != 1 {
		t.Fatalf("alexnet trace: %v", f)
	}
	tr, err := kineto.DecodeFile(f[0], kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(tr, Options{})
	if r.Shares.Submission >= 5 {
		t.Errorf("submission share %.1f %%, want below 5 %% once the set-up launch is left out", r.Shares.Submission)
	}
	var setup *finding.Finding
	for i := range r.Findings {
		fd := &r.Findings[i]
		if fd.ID == "launch-thread-saturated" {
			t.Errorf("launch-thread-saturated fired: %s", fd.Claim)
		}
		if strings.Contains(fd.Decision, "CUDA graph") {
			t.Errorf("%s recommends a CUDA graph: %s", fd.ID, fd.Decision)
		}
		if fd.ID == "setup-launches" {
			setup = fd
		}
	}
	if strings.Contains(r.Verdict.Decision, "CUDA graph") {
		t.Errorf("the verdict recommends a CUDA graph: %s", r.Verdict.Decision)
	}
	if setup == nil {
		t.Fatal("no setup-launches finding naming the set-up launch")
	}
	for _, want := range []string{"cudaLaunchKernel", "3055.6 ms", "module loading", "cask_cudnn::computeOffsetsKernel"} {
		if !strings.Contains(setup.Claim+" "+evidenceText(setup), want) {
			t.Errorf("setup-launches does not say %q: %s | %s", want, setup.Claim, evidenceText(setup))
		}
	}
}

// TestSetupLaunchCriterion checks the criterion on a built trace: 40
// launches of 10 us (±2 us) and one kernel whose first launch takes 5 ms.
// The first launch is set-up; a 5 ms launch of a kernel already launched
// before is not (it is a slow launch in the steady state, which the
// submission share keeps), nor is a first launch of 40 us (an outlier by
// the median/MAD test, but within HTA's 50 us launch cut-off).
func TestSetupLaunchCriterion(t *testing.T) {
	b := trace.NewBuilder("built.json", "kineto")
	th := b.Thread(1, 1)
	st := b.Stream(0, 7)
	launch := b.Intern("cudaLaunchKernel")
	var ts, corr int64 = 0, 0
	add := func(kernel string, callNs int64) {
		corr++
		b.AddRuntime(trace.RuntimeCall{Start: ts, End: ts + callNs, Corr: corr, Name: launch, Thread: th, Kind: trace.Launch})
		ts += callNs
		b.AddGPU(trace.GPUOp{Start: ts + 1000, End: ts + 21000, Corr: corr, Name: b.Intern(kernel), Stream: st, Kind: trace.Kernel})
		ts += 30000
	}
	add("steady", 9000)
	add("first_slow", 5_000_000) // set-up
	for i := range 40 {
		add("steady", int64(8000+i%5*1000))
	}
	add("steady", 5_000_000)  // slow, but not the kernel's first launch
	add("new_kernel", 40_000) // first launch, outlier, but under 50 us
	add("steady", 10_000)
	r := Analyze(b.Finish(), Options{})
	if got := len(r.SetupLaunches.Calls); got != 1 {
		t.Fatalf("%d set-up launches, want 1: %+v", got, r.SetupLaunches.Calls)
	}
	if c := r.SetupLaunches.Calls[0]; c.Kernel != "first_slow" || c.DurNs != 5_000_000 {
		t.Errorf("set-up launch %+v, want first_slow's 5 ms launch", c)
	}
	if r.Attribution.ByCause[tracestats.CauseSetup] == 0 {
		t.Error("no idle attributed to set-up")
	}
	// The repeated slow launch stays in the submission share.
	if r.Attribution.ByCause[tracestats.CauseLaunchAPI] < 4_900_000 {
		t.Errorf("launch-api idle %d ns: the 5 ms launch of a repeated kernel must stay submission", r.Attribution.ByCause[tracestats.CauseLaunchAPI])
	}
}

func evidenceText(f *finding.Finding) string {
	var parts []string
	for _, e := range f.Evidence {
		parts = append(parts, e.What+": "+e.Text)
	}
	return strings.Join(parts, "; ")
}

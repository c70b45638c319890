package tracejudge

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kineto"
)

// TestTinyTraceConfidence: HTA's MI250 trace holds one ProfilerStep and
// 0.009 s of GPU activity whose idle is mostly one 6.5 ms launch. Nothing
// that small may be called a class with high confidence.
func TestTinyTraceConfidence(t *testing.T) {
	f, _ := filepath.Glob(filepath.Join(repoRoot, "testdata", "traces", "amd_trace", "*.json.gz"))
	if len(f) != 1 {
		t.Fatalf("amd trace: %v", f)
	}
	tr, err := kineto.DecodeFile(f[0], kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(tr, Options{})
	if r.Verdict.Class != finding.Inconclusive && r.Verdict.Confidence > 0.5 {
		t.Errorf("%s (%.0f %%) from %.3f s of GPU activity in %d step(s)", r.Verdict.Class, 100*r.Verdict.Confidence, float64(r.Attribution.SpanNs)/1e9, r.Scope.Steps)
	}
}

// TestCloseSecondCauseLowersTheTraceConfidence: pytorch/kineto's ResNet-50
// sample with num_workers=0, in the older schema (a bare event array,
// capitalised categories). The transforms nested in each step's DataLoader
// __next__ are the input pipeline's (the DataLoader time, 20.7 % of the
// span, holds them), and the launching thread's CPU operators outside it
// (the forward's dispatch between short kernels, zero_grad) are 27.6 %:
// two causes of nearly the same size. The verdict may lead with either,
// but not be near sure of it, and it names the other. (It was
// submission-bound at 95 %, beside its own "the GPU waits for the
// DataLoader: 20.7 %" and "steps are highly input-bound".)
func TestCloseSecondCauseLowersTheTraceConfidence(t *testing.T) {
	tr, err := kineto.DecodeFile(filepath.Join(repoRoot, "testdata", "traces", "kineto_tb_plugin", "resnet50_num_workers_0.pt.trace.json.gz"), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(tr, Options{})
	v := r.Verdict
	dl := 100 * float64(r.Attribution.ByCause[tracestats.CauseDataLoader]) / float64(r.Attribution.SpanNs)
	if dl < 19 || dl > 22 {
		t.Errorf("the DataLoader's share %.1f %%, want about 20.7 %% (the nested transforms are its own)", dl)
	}
	if v.Confidence > 0.8 {
		t.Errorf("%s at %.0f %% with a second cause close behind: %s", v.Class, 100*v.Confidence, v.Summary)
	}
	if v.Class == finding.SubmissionBound && !strings.Contains(v.Summary, "Close behind: preprocessing-bound, 20.7 %") {
		t.Errorf("the verdict does not name the DataLoader close behind it: %s", v.Summary)
	}
}

package tracejudge

import (
	"path/filepath"
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/trace/kineto"
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

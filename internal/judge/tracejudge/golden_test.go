package tracejudge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/kineto"
)

// pinned is what the golden files hold for each real trace: our idle
// breakdown per stream and temporal breakdown (exact nanoseconds), the
// attribution by cause, and the verdict.
type pinned struct {
	Temporal     tracestats.Temporal     `json:"temporal_breakdown"`
	Idle         []tracestats.StreamIdle `json:"idle_time_breakdown"`
	Launches     int                     `json:"launches"`
	IdleNs       int64                   `json:"device_idle_ns"`
	ByCause      tracestats.ByCause      `json:"idle_by_cause_ns"`
	Verdict      string                  `json:"verdict"`
	Confidence   float64                 `json:"confidence"`
	FindingIDs   []string                `json:"findings"`
	StepsInScope int                     `json:"steps"`
}

func TestGoldenRealTraces(t *testing.T) {
	root := filepath.Join(repoRoot, "testdata", "traces")
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json.gz") {
			files = append(files, p)
		}
		return err
	})
	if len(files) < 12 {
		t.Fatalf("found %d traces", len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		goldenPath := filepath.Join(repoRoot, "testdata", "golden", "trace", strings.NewReplacer("/", "__", ".json.gz", ".json").Replace(rel))
		tr, err := kineto.DecodeFile(f, kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := Analyze(tr, Options{})
		p := pinned{Temporal: r.Temporal, Idle: r.Idle, Launches: r.Launch.Launches, IdleNs: r.Attribution.IdleNs,
			ByCause: r.Attribution.ByCause, Verdict: string(r.Verdict.Class), Confidence: r.Verdict.Confidence, StepsInScope: r.Scope.Steps}
		for _, fd := range r.Findings {
			p.FindingIDs = append(p.FindingIDs, fd.ID)
		}
		got, _ := json.MarshalIndent(p, "", "  ")
		got = append(got, '\n')
		golden.Check(t, goldenPath, string(got))
		// Invariants any report must keep.
		if r.Verdict.Class == "" || r.Verdict.Confidence < 0 || r.Verdict.Confidence > 1 {
			t.Errorf("%s: bad verdict %+v", rel, r.Verdict)
		}
		if r.Attribution.ByCause.Sum() != r.Attribution.IdleNs {
			t.Errorf("%s: causes sum to %d ns, idle is %d ns", rel, r.Attribution.ByCause.Sum(), r.Attribution.IdleNs)
		}
		for _, id := range r.Verdict.Because {
			found := false
			for _, fd := range r.Findings {
				found = found || fd.ID == id
			}
			if !found {
				t.Errorf("%s: verdict cites %q, which is not among the findings", rel, id)
			}
		}
		if r.Verdict.Class == finding.Inconclusive && r.Verdict.Missing == "" {
			t.Errorf("%s: inconclusive verdict without what is missing", rel)
		}
	}
}

// repoRoot is the repository's root, for its testdata.
var repoRoot = filepath.Join("..", "..", "..")

package render

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
)

// The report's JSON carries the judge's series whole: each quantity per
// interval, null where it was not read, the idle cause by name
// ("unexplained" for idle no cause explains, null without idle), and a
// report read back from it streams the same interval lines.
func TestReportCarriesTheSeries(t *testing.T) {
	nan := math.NaN()
	s := &judge.Series{
		Intervals: []derive.Interval{{Start: 0, End: 100e6}, {Start: 100e6, End: 200e6}, {Start: 200e6, End: 300e6}},
		GPUUtil:   derive.Series{95, nan, 12.5}, CopyPct: derive.Series{0, 0, 3},
		Launch: "python3 (pid 7, main thread)", LaunchPID: 7, LaunchTID: 7,
		LaunchRun: derive.Series{40, 50, 99}, LaunchWait: derive.Series{1, nan, 0.5},
		Workers: 2, WorkersCPU: derive.Series{150, 180, 10}, IOWait: derive.Series{0, 2, 0},
		Cause:      []finding.Class{"", judge.Unexplained, finding.SubmissionBound},
		Attributed: []bool{false, true, true},
	}
	r := &Report{Series: s, Findings: []finding.Finding{}}
	b := jsonOf(t, r)
	var doc struct {
		Series struct {
			GPUUtil   []*float64 `json:"gpu_util_percent"`
			IdleCause []*string  `json:"idle_cause"`
			Launch    *struct {
				PID int `json:"pid"`
			} `json:"launch_thread"`
			OtherThreads int `json:"other_threads"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ds := doc.Series
	if len(ds.GPUUtil) != 3 || ds.GPUUtil[0] == nil || *ds.GPUUtil[0] != 95 || ds.GPUUtil[1] != nil || *ds.GPUUtil[2] != 12.5 {
		t.Errorf("gpu_util_percent %s: want 95, null, 12.5", b)
	}
	if len(ds.IdleCause) != 3 || ds.IdleCause[0] != nil || *ds.IdleCause[1] != "unexplained" || *ds.IdleCause[2] != "submission-bound" {
		t.Errorf("idle_cause: want null, unexplained, submission-bound in %s", b)
	}
	if ds.Launch == nil || ds.Launch.PID != 7 || ds.OtherThreads != 2 {
		t.Errorf("launch thread %+v, other threads %d: want pid 7 and 2", ds.Launch, ds.OtherThreads)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want, _ := IntervalLines(r, -1, 0)
	got, _ := IntervalLines(&back, -1, 0)
	if len(want) != 3 || !reflect.DeepEqual(got, want) {
		t.Errorf("the report read back streams\n%+v\nwant\n%+v", got, want)
	}

	// Without rules there is no series: null, and none read back.
	b = jsonOf(t, &Report{Findings: []finding.Finding{}})
	var none struct {
		Series json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal(b, &none); err != nil || string(none.Series) != "null" {
		t.Errorf("series without rules: %s (%v), want null", none.Series, err)
	}
}

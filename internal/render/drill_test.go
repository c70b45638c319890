package render

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/golden"
)

// A drill report with every kind of cell: a range, a reference range, a
// missing cell, a skipped row, a note, a detail table.
func drillFixture() *DrillReport {
	ms := func(v float64) float64 { return v * 1e6 }
	return &DrillReport{
		Header: Header{Command: "drill", ToolVersion: "test", GeneratedAt: "2026-01-01T00:00:00Z"},
		Report: drillresult.Report{
			Drill: "jitter", Title: "2000 tiny kernels", Backend: "simulated driver", Machine: "test CPU, 2 CPUs usable (1 thread(s) per core)",
			ReferenceFrom: "measured on a reference box",
			Tables: []drillresult.Table{{
				ID: "jitter", Title: "wall time",
				Columns: []drillresult.Column{{Key: "wall_ns", Label: "wall", Unit: drillresult.Nanoseconds}, {Key: "gpu_idle_percent", Label: "GPU idle", Unit: drillresult.Percent},
					{Key: "preempted_count", Label: "preempted", Unit: drillresult.Count}},
				Rows: []drillresult.Row{
					{Key: "quiet", Label: "quiet", Measured: []*drillresult.Value{drillresult.R(ms(10.2), ms(9.9), ms(12)), drillresult.V(82.6), drillresult.V(3)},
						Reference: []*drillresult.Value{drillresult.V(ms(4.74)), drillresult.V(63), nil}},
					{Key: "pinned_sibling", Label: "pinned, a busy process on its CPU", Note: "no SMT siblings: a busy process on the CPU instead",
						Measured:  []*drillresult.Value{drillresult.V(ms(30)), drillresult.V(94), nil},
						Reference: []*drillresult.Value{drillresult.V(ms(8.92)), nil, nil}},
					{Key: "graph", Label: "one CUDA graph replay", Measured: []*drillresult.Value{drillresult.R(ms(1.78), ms(1.78), ms(1.79)), drillresult.V(0.6), drillresult.V(0)},
						Reference: []*drillresult.Value{drillresult.R(ms(1.72), ms(1.67), ms(1.77)), nil, nil}},
					{Key: "never", Label: "not runnable", Skipped: "needs a thing", Measured: []*drillresult.Value{nil, nil, nil}, Reference: []*drillresult.Value{nil, nil, nil}},
				}}, {
				ID: "series", Title: "over time", Detail: true,
				Columns: []drillresult.Column{{Key: "at_ns", Label: "since start", Unit: drillresult.Nanoseconds}, {Key: "uss_bytes", Label: "USS", Unit: drillresult.Bytes},
					{Key: "bandwidth_bytes_per_sec", Label: "bandwidth", Unit: drillresult.BytesPerSec}},
				Rows: []drillresult.Row{{Key: "reading_0", Label: "#1", Measured: []*drillresult.Value{drillresult.V(2e8), drillresult.V(57 << 20), drillresult.V(25.1e9)}}},
			}},
			Notes: []string{"a note\u202e with a bidirectional override"},
		},
	}
}

func TestDrillRenderers(t *testing.T) {
	d := drillFixture()
	for _, c := range []struct {
		format  Format
		verbose bool
		file    string
	}{{FormatText, false, "drill.txt"}, {FormatText, true, "drill-verbose.txt"}, {FormatJSON, false, "drill.json"}} {
		var b bytes.Buffer
		if err := Write(&b, c.format, d, Options{Verbose: c.verbose}); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", c.file), b.String())
		if c.format == FormatJSON {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if err := compileSchema(t).Validate(doc); err != nil {
				t.Errorf("the drill's JSON does not follow the schema:\n%v", err)
			}
		} else if strings.ContainsRune(b.String(), '\u202e') {
			t.Error("the text output prints a bidirectional override")
		}
	}
	var b bytes.Buffer
	if err := Write(&b, FormatPerfetto, d, Options{}); err == nil || !strings.Contains(err.Error(), "cannot write a drill") {
		t.Errorf("Perfetto for a drill: %v, want a clear refusal", err)
	}
}

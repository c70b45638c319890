package render

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/drill/result"
	"github.com/gpufeed/gpufeed/internal/golden"
)

// A drill report with every kind of cell: a range, a reference range, a
// missing cell, a skipped row, a note, a detail table.
func drillFixture() *DrillReport {
	ms := func(v float64) float64 { return v * 1e6 }
	return &DrillReport{
		Header: Header{Command: "drill", ToolVersion: "test", GeneratedAt: "2026-01-01T00:00:00Z"},
		Report: result.Report{
			Drill: "jitter", Title: "2000 tiny kernels", Backend: "simulated driver", Machine: "test CPU, 2 CPUs usable (1 thread(s) per core)",
			ReferenceFrom: "measured on a reference box",
			Tables: []result.Table{{
				ID: "jitter", Title: "wall time",
				Columns: []result.Column{{Key: "wall_ns", Label: "wall", Unit: result.Nanoseconds}, {Key: "gpu_idle_percent", Label: "GPU idle", Unit: result.Percent},
					{Key: "preempted_count", Label: "preempted", Unit: result.Count}},
				Rows: []result.Row{
					{Key: "quiet", Label: "quiet", Measured: []*result.Value{result.R(ms(10.2), ms(9.9), ms(12)), result.V(82.6), result.V(3)},
						Reference: []*result.Value{result.V(ms(4.74)), result.V(63), nil}},
					{Key: "pinned_sibling", Label: "pinned, a busy process on its CPU", Note: "no SMT siblings: a busy process on the CPU instead",
						Measured:  []*result.Value{result.V(ms(30)), result.V(94), nil},
						Reference: []*result.Value{result.V(ms(8.92)), nil, nil}},
					{Key: "graph", Label: "one CUDA graph replay", Measured: []*result.Value{result.R(ms(1.78), ms(1.78), ms(1.79)), result.V(0.6), result.V(0)},
						Reference: []*result.Value{result.R(ms(1.72), ms(1.67), ms(1.77)), nil, nil}},
					{Key: "never", Label: "not runnable", Skipped: "needs a thing", Measured: []*result.Value{nil, nil, nil}, Reference: []*result.Value{nil, nil, nil}},
				}}, {
				ID: "series", Title: "over time", Detail: true,
				Columns: []result.Column{{Key: "at_ns", Label: "since start", Unit: result.Nanoseconds}, {Key: "uss_bytes", Label: "USS", Unit: result.Bytes},
					{Key: "bandwidth_bytes_per_sec", Label: "bandwidth", Unit: result.BytesPerSec}},
				Rows: []result.Row{{Key: "reading_0", Label: "#1", Measured: []*result.Value{result.V(2e8), result.V(57 << 20), result.V(25.1e9)}}},
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

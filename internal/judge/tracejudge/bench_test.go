package tracejudge

import (
	"bytes"
	"testing"

	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/tracegen"
)

// BenchmarkAnalyze measures the analyses alone on a 64 MiB generated trace:
//
//	go test ./internal/judge/tracejudge -run '^$' -bench Analyze -benchtime 5x
func BenchmarkAnalyze(b *testing.B) {
	var buf bytes.Buffer
	truth, err := tracegen.Generate(&buf, tracegen.Config{Pattern: tracegen.Mixed, TargetBytes: 64 << 20, Seed: 1, Rank: 0, WorldSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	n := buf.Len()
	tr, err := kineto.Decode(&buf, "bench.json", kineto.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		r := Analyze(tr, Options{})
		if r.Scope.GPUOps == 0 {
			b.Fatal("nothing analysed")
		}
	}
	b.ReportMetric(float64(truth.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

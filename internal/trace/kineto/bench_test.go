package kineto

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gpufeed/gpufeed/internal/tracegen"
)

var (
	benchOnce  sync.Once
	benchTrace []byte
	benchTruth tracegen.Truth
)

// benchData is a 64 MiB generated trace (all scenarios mixed,
// nanosecond-resolution timestamps), made once per process.
func benchData(b *testing.B) ([]byte, tracegen.Truth) {
	benchOnce.Do(func() {
		var buf bytes.Buffer
		truth, err := tracegen.Generate(&buf, tracegen.Config{Pattern: tracegen.Mixed, TargetBytes: 64 << 20, NsResolution: true, Seed: 1, Rank: 0, WorldSize: 1})
		if err != nil {
			panic(err)
		}
		benchTrace, benchTruth = buf.Bytes(), truth
	})
	return benchTrace, benchTruth
}

// BenchmarkDecode measures decoding throughput (MB/s via SetBytes, and
// events/s) on one worker and on every CPU:
//
//	go test ./internal/kineto -run '^$' -bench Decode -benchtime 5x
func BenchmarkDecode(b *testing.B) {
	data, truth := benchData(b)
	for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for range b.N {
				tr, err := Decode(bytes.NewReader(data), "bench.json", Options{Workers: w})
				if err != nil {
					b.Fatal(err)
				}
				if tr.Counts.Events != truth.Events {
					b.Fatalf("decoded %d events, generated %d", tr.Counts.Events, truth.Events)
				}
			}
			b.ReportMetric(float64(truth.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

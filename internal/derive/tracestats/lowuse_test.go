package tracestats

import (
	"math"
	"testing"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// TestLowUseImpossibleTimes: the low-use windows never index out of their
// chunks, whatever times a trace holds: an op starting before the span
// given (a negative start a reader kept) made the chunk index negative (a
// panic of gpufeed trace), an end of INT64_MAX overflowed the span.
func TestLowUseImpossibleTimes(t *testing.T) {
	tr := &trace.Trace{
		Streams: []trace.Stream{{Device: 0, ID: 7}},
		GPU: []trace.GPUOp{
			{Start: -1_000_000_000, End: 10, Stream: 0},
			{Start: 100, End: 200, Stream: 0},
			{Start: 300, End: math.MaxInt64, Stream: 0},
		},
	}
	ops := []int32{0, 1, 2}
	for _, w := range []struct{ start, end int64 }{
		{100, 1000},            // the first op starts before the span
		{-1_000_000_000, 1000}, // the span itself from a negative start
		{100, math.MaxInt64},   // the span to INT64_MAX
		{math.MinInt64, math.MaxInt64},
	} {
		out := lowUse(tr, ops, w.start, w.end, 30, 50)
		for _, lw := range out {
			if lw.DurNs <= 0 || lw.UsePct < 0 {
				t.Errorf("span [%d, %d]: window %+v", w.start, w.end, lw)
			}
		}
	}
	// A sane span still finds its idle stretch: [200, 300) of [100, 400).
	out := lowUse(&trace.Trace{Streams: tr.Streams, GPU: []trace.GPUOp{{Start: 100, End: 200}, {Start: 300, End: 400}}}, []int32{0, 1}, 100, 400, 3, 50)
	if len(out) != 1 || out[0].StartNs != 200 || out[0].DurNs != 100 {
		t.Errorf("low use of [100, 400) with [200, 300) idle: %+v", out)
	}
}

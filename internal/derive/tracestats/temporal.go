package tracestats

// Temporal is HTA's temporal breakdown of one rank: over the span from the
// first GPU operation's start to the last one's end, the time no operation
// runs (idle), the time computation kernels run (compute), and the rest
// (copies, memsets, communication: non-compute).
type Temporal struct {
	SpanNs       int64 `json:"span_ns"`
	IdleNs       int64 `json:"idle_ns"`
	ComputeNs    int64 `json:"compute_ns"`
	NonComputeNs int64 `json:"non_compute_ns"`
}

// Pct returns v as a percentage of the span.
func (tb Temporal) Pct(v int64) float64 {
	if tb.SpanNs == 0 {
		return 0
	}
	return 100 * float64(v) / float64(tb.SpanNs)
}

// temporalBreakdown computes Temporal over all GPU work in scope (all
// devices of the rank together, as HTA does) and returns the merged busy
// spans for later use.
func temporalBreakdown(s *scope, kinds []KernelType) (Temporal, []span) {
	t := s.t
	var all, comp []span
	for i := range t.GPU {
		if !s.gpu[i] {
			continue
		}
		g := &t.GPU[i]
		sp := span{g.Start, g.End}
		all = append(all, sp)
		if kinds[g.Name] == Computation {
			comp = append(comp, sp)
		}
	}
	var tb Temporal
	if len(all) == 0 {
		return tb, nil
	}
	busy := mergeSpans(all)
	tb.SpanNs = busy[len(busy)-1].End - busy[0].Start
	tb.IdleNs = tb.SpanNs - total(busy)
	tb.ComputeNs = total(mergeSpans(comp))
	tb.NonComputeNs = tb.SpanNs - tb.ComputeNs - tb.IdleNs
	return tb, busy
}

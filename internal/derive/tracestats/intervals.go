package tracestats

import (
	"cmp"
	"slices"
)

// span is a half-open time interval [Start, End) in nanoseconds.
type span struct{ Start, End int64 }

// mergeSpans sorts spans by start and merges overlapping or touching ones,
// as HTA's merge_kernel_intervals does.
func mergeSpans(s []span) []span {
	slices.SortFunc(s, func(a, b span) int {
		if c := cmp.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.End, b.End)
	})
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && x.Start <= out[n-1].End {
			if x.End > out[n-1].End {
				out[n-1].End = x.End
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// total sums the lengths of disjoint spans.
func total(s []span) int64 {
	var n int64
	for _, x := range s {
		n += x.End - x.Start
	}
	return n
}

// overlap returns the length of [a0,a1) ∩ [b0,b1).
func overlap(a0, a1, b0, b1 int64) int64 {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi > lo {
		return hi - lo
	}
	return 0
}

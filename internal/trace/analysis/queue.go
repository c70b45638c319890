package analysis

import (
	"cmp"
	"slices"
)

// QueueLength is HTA's queue-length summary for one stream: the number of
// operations enqueued but not yet started, sampled at every change (+1 when
// a runtime call enqueues an operation, -1 when the operation starts).
type QueueLength struct {
	Device int32 `json:"device"`
	Stream int64 `json:"stream"`
	Dist
}

// CUDA's per-context launch queue holds about this many pending operations;
// past it, launch calls block the host (the GPU is ahead of nothing: it is
// the bottleneck). HTA uses 1024 as its default max_queue_length.
const launchQueueCapacity = 1024

func queueLengths(s *scope) []QueueLength {
	t := s.t
	type change struct {
		ts    int64
		delta int8
	}
	per := map[uint32][]change{}
	for i := range t.GPU {
		g := &t.GPU[i]
		if !s.gpu[i] || g.Launch < 0 {
			continue
		}
		r := &t.Runtime[g.Launch]
		if !r.Kind.Enqueues() || !s.cpuIn(r.Start) {
			continue
		}
		per[g.Stream] = append(per[g.Stream], change{r.Start, +1}, change{g.Start, -1})
	}
	var out []QueueLength
	for stream, ch := range per {
		slices.SortStableFunc(ch, func(a, b change) int {
			if c := cmp.Compare(a.ts, b.ts); c != 0 {
				return c
			}
			return -cmp.Compare(a.delta, b.delta) // enqueue before start at equal times
		})
		vals := make([]float64, len(ch))
		q := 0
		for i, c := range ch {
			q += int(c.delta)
			vals[i] = float64(q)
		}
		st := t.Streams[stream]
		out = append(out, QueueLength{Device: st.Device, Stream: st.ID, Dist: describe(vals)})
	}
	slices.SortFunc(out, func(a, b QueueLength) int {
		if c := cmp.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return cmp.Compare(a.Stream, b.Stream)
	})
	return out
}

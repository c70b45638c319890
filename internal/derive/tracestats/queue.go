package tracestats

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

// LaunchQueueCapacity: CUDA's per-context launch queue holds about this many pending operations;
// past it, launch calls block the host (the GPU is ahead of nothing: it is
// the bottleneck). HTA uses 1024 as its default max_queue_length.
const LaunchQueueCapacity = 1024

func queueLengths(s *scope) []QueueLength {
	t := s.t
	// GPU ops are sorted by stream: each stream is a run, done in turn with
	// one reused buffer of changes. A change packs its time and direction in
	// one int64 (time*2, +1 for an enqueue) so that sorting puts an enqueue
	// before a start at the same instant.
	var out []QueueLength
	var ch []int64
	for i := 0; i < len(t.GPU); {
		stream := t.GPU[i].Stream
		ch = ch[:0]
		j := i
		for ; j < len(t.GPU) && t.GPU[j].Stream == stream; j++ {
			g := &t.GPU[j]
			if !s.gpu[j] || g.Launch < 0 {
				continue
			}
			r := &t.Runtime[g.Launch]
			if !r.Kind.Enqueues() || !s.cpuIn(r.Start) {
				continue
			}
			ch = append(ch, r.Start*2, g.Start*2+1)
		}
		i = j
		if len(ch) == 0 {
			continue
		}
		slices.Sort(ch)
		// Queue lengths are small integers: a histogram gives the exact
		// order statistics without a second array.
		var hist []int
		q := 0
		for _, c := range ch {
			if c&1 == 0 {
				q++
			} else {
				q--
			}
			v := max(q, 0)
			for len(hist) <= v {
				hist = append(hist, 0)
			}
			hist[v]++
		}
		st := t.Streams[stream]
		out = append(out, QueueLength{Device: st.Device, Stream: st.ID, Dist: describeHistogram(hist)})
	}
	slices.SortFunc(out, func(a, b QueueLength) int {
		if c := cmp.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return cmp.Compare(a.Stream, b.Stream)
	})
	return out
}

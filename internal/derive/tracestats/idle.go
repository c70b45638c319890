package tracestats

import (
	"cmp"
	"slices"
)

// StreamIdle is HTA's idle-time breakdown for one GPU stream: each gap
// between consecutive operations on the stream is host_wait when the
// operation after it was launched by the CPU only after the one before it
// had finished, kernel_wait when it is shorter than the consecutive-kernel
// delay (launch overhead between back-to-back kernels), other otherwise
// (the stream waited on something else: an event from another stream, a
// dependency).
type StreamIdle struct {
	Device int32 `json:"device"`
	Stream int64 `json:"stream"`
	// Ops is the number of GPU operations on the stream in scope.
	Ops int `json:"ops"`
	// HostWait, KernelWait, Other are idle nanoseconds by category.
	HostWait   int64 `json:"host_wait_ns"`
	KernelWait int64 `json:"kernel_wait_ns"`
	Other      int64 `json:"other_ns"`
	// Overlaps counts operations that started before the previous one on
	// the same stream ended (clock skew); their negative gap counts as zero
	// here, where HTA adds it (negative) to a category. OverlapNs sums them.
	Overlaps  int   `json:"overlaps,omitempty"`
	OverlapNs int64 `json:"overlap_ns,omitempty"`
}

// Idle is the stream's total idle time between its first and last operation.
func (s StreamIdle) Idle() int64 { return s.HostWait + s.KernelWait + s.Other }

// Ratio returns a category's share of the stream's idle time.
func (s StreamIdle) Ratio(v int64) float64 {
	if s.Idle() == 0 {
		return 0
	}
	return float64(v) / float64(s.Idle())
}

// idleBreakdown computes StreamIdle for every stream with GPU work in scope.
// GPU ops are sorted by (stream, start), so each stream is a run.
func idleBreakdown(s *scope, delay int64) []StreamIdle {
	t := s.t
	var out []StreamIdle
	for i := 0; i < len(t.GPU); {
		stream := t.GPU[i].Stream
		j := i
		for j < len(t.GPU) && t.GPU[j].Stream == stream {
			j++
		}
		st := t.Streams[stream]
		if st.ID < 0 {
			// Operations the trace puts on no stream (MTIA DMA requests
			// without a stream argument) keep the device busy but have no
			// queue to wait in; HTA's breakdown leaves stream -1 out too.
			i = j
			continue
		}
		si := StreamIdle{Device: st.Device, Stream: st.ID}
		prevEnd := int64(-1)
		for k := i; k < j; k++ {
			if !s.gpu[k] {
				continue
			}
			g := &t.GPU[k]
			si.Ops++
			if prevEnd >= 0 {
				gap := g.Start - prevEnd
				if gap < 0 {
					si.Overlaps++
					si.OverlapNs -= gap
					gap = 0
				}
				switch {
				case g.Launch >= 0 && t.Runtime[g.Launch].Start > prevEnd:
					si.HostWait += gap
				case gap < delay:
					si.KernelWait += gap
				default:
					si.Other += gap
				}
			}
			prevEnd = g.End
		}
		if si.Ops > 0 {
			out = append(out, si)
		}
		i = j
	}
	slices.SortFunc(out, func(a, b StreamIdle) int {
		if c := cmp.Compare(a.Device, b.Device); c != 0 {
			return c
		}
		return cmp.Compare(a.Stream, b.Stream)
	})
	return out
}

// workByDevice returns the indexes of every GPU work operation (kernel,
// copy, memset) that overlaps [from, to], on the devices that have work in
// scope, grouped by device and sorted by start. Operations outside the
// scope count here: a kernel launched before profiling started (no launch
// record) still keeps the device busy.
func workByDevice(s *scope, from, to int64) map[int32][]int32 {
	t := s.t
	devs := map[int32]bool{}
	for i := range t.GPU {
		if s.gpu[i] {
			devs[t.Streams[t.GPU[i].Stream].Device] = true
		}
	}
	by := map[int32][]int32{}
	for i := range t.GPU {
		g := &t.GPU[i]
		if !g.Kind.IsWork() || g.End < from || g.Start > to {
			continue
		}
		d := t.Streams[g.Stream].Device
		if devs[d] {
			by[d] = append(by[d], int32(i))
		}
	}
	for _, ix := range by {
		slices.SortFunc(ix, func(a, b int32) int {
			if c := cmp.Compare(t.GPU[a].Start, t.GPU[b].Start); c != 0 {
				return c
			}
			return cmp.Compare(t.GPU[a].End, t.GPU[b].End)
		})
	}
	return by
}

package tracestats

import (
	"github.com/gpufeed/gpufeed/internal/trace"
)

// NsightRules holds what the Nsight-Systems-style rules measure (nsys
// analyze's expert system: cuda_memcpy_async, cuda_memcpy_sync,
// cuda_memset_sync, cuda_api_sync, gpu_gaps, gpu_time_util);
// internal/judge/tracejudge turns them into findings.
type NsightRules struct {
	// PageableCopies are async copies that touched pageable host memory:
	// the driver stages them synchronously, so the "async" call blocks.
	PageableCopies CallTotals `json:"pageable_async_copies"`
	// SyncCopies and SyncMemsets are blocking calls (cudaMemcpy, cudaMemset,
	// hipMemcpyWithStream).
	SyncCopies  CallTotals `json:"sync_copies"`
	SyncMemsets CallTotals `json:"sync_memsets"`
	// StreamSyncs, DeviceSyncs, EventSyncs are host synchronisations with
	// their total blocked time.
	StreamSyncs CallTotals `json:"stream_syncs"`
	DeviceSyncs CallTotals `json:"device_syncs"`
	EventSyncs  CallTotals `json:"event_syncs"`
	// Gaps lists device idle gaps of at least GapThresholdNs, longest first.
	GapThresholdNs int64 `json:"gap_threshold_ns"`
	Gaps           []Gap `json:"gaps,omitempty"`
	// LowUse lists windows whose GPU time is below LowUsePct.
	LowUsePct float64        `json:"low_use_pct"`
	LowUse    []LowUseWindow `json:"low_use_windows,omitempty"`
	// FromSQL reports that the call totals were computed by the reader in
	// SQL (Nsight Systems reports) rather than from the loaded events.
	FromSQL bool `json:"from_sql,omitempty"`
}

// CallTotals counts runtime calls of one kind and their host time.
type CallTotals struct {
	Count int64 `json:"count"`
	// HostNs is the summed duration of the calls: host time blocked in them.
	HostNs int64 `json:"host_ns"`
	MaxNs  int64 `json:"max_ns"`
	// Bytes moved, for copies.
	Bytes int64 `json:"bytes,omitempty"`
}

func (c *CallTotals) add(r *trace.RuntimeCall, bytes int64) {
	c.Count++
	c.HostNs += r.Dur()
	c.MaxNs = max(c.MaxNs, r.Dur())
	c.Bytes += bytes
}

func fromSummary(s trace.CallSummary) CallTotals {
	return CallTotals{Count: s.Count, HostNs: s.TotalNs, MaxNs: s.MaxNs, Bytes: s.Bytes}
}

// Gap is one interval in which a device ran no operation.
type Gap struct {
	Device  int32 `json:"device"`
	StartNs int64 `json:"start_ns"`
	DurNs   int64 `json:"dur_ns"`
}

// LowUseWindow is a stretch of consecutive chunks with low GPU time.
type LowUseWindow struct {
	Device  int32 `json:"device"`
	StartNs int64 `json:"start_ns"`
	DurNs   int64 `json:"dur_ns"`
	// UsePct is the duration-weighted GPU time percentage (Nsight adds
	// concurrent operations, so it can exceed 100 elsewhere).
	UsePct float64 `json:"use_pct"`
}

// callRules computes the call totals from the events in scope.
func callRules(s *scope) NsightRules {
	t := s.t
	var r NsightRules
	for i := range t.Runtime {
		rc := &t.Runtime[i]
		if !s.cpuIn(rc.Start) {
			continue
		}
		switch rc.Kind {
		case trace.MemcpyAsync:
			if rc.GPU >= 0 && t.GPU[rc.GPU].TouchesPageable() {
				r.PageableCopies.add(rc, t.GPU[rc.GPU].Bytes)
			}
		case trace.MemcpySync:
			var b int64
			if rc.GPU >= 0 {
				b = t.GPU[rc.GPU].Bytes
			}
			r.SyncCopies.add(rc, b)
		case trace.MemsetSync:
			r.SyncMemsets.add(rc, 0)
		case trace.StreamSync:
			r.StreamSyncs.add(rc, 0)
		case trace.DeviceSync:
			r.DeviceSyncs.add(rc, 0)
		case trace.EventSync:
			r.EventSyncs.add(rc, 0)
		}
	}
	if sm := t.Summaries; sm != nil {
		r.FromSQL = true
		r.PageableCopies = fromSummary(sm.PageableAsyncCopies)
		r.SyncCopies = fromSummary(sm.SyncCopies)
		r.SyncMemsets = fromSummary(sm.SyncMemsets)
		r.StreamSyncs = fromSummary(sm.StreamSyncs)
		r.DeviceSyncs = fromSummary(sm.DeviceSyncs)
		r.EventSyncs = fromSummary(sm.EventSyncs)
	}
	return r
}

// lowUse splits [start, end) of one device into chunks and returns the
// coalesced windows whose summed operation time is below pct of the chunk.
func lowUse(t *trace.Trace, ops []int32, start, end int64, chunks int, pct float64) []LowUseWindow {
	// end-start overflows for times no reader keeps (trace.MaxTime), and
	// an op outside [start, end) has no chunk: neither may index used.
	if end <= start || end-start <= 0 || chunks <= 0 || len(ops) == 0 {
		return nil
	}
	size := (end - start) / int64(chunks) // rounded up, without overflow
	if (end-start)%int64(chunks) != 0 {
		size++
	}
	used := make([]int64, chunks)
	for _, i := range ops {
		g := &t.GPU[i]
		if g.End <= start || g.Start >= end {
			continue
		}
		for c := max(g.Start-start, 0) / size; c < int64(chunks); c++ {
			cs := start + c*size
			if cs >= g.End {
				break
			}
			used[c] += overlap(g.Start, g.End, cs, min(cs+size, end))
		}
	}
	dev := t.Streams[t.GPU[ops[0]].Stream].Device
	var out []LowUseWindow
	var cur *LowUseWindow
	var weighted float64
	for c := range chunks {
		cs := start + int64(c)*size
		ce := min(cs+size, end)
		if ce <= cs {
			break
		}
		p := 100 * float64(used[c]) / float64(ce-cs)
		if p >= pct {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, LowUseWindow{Device: dev, StartNs: cs})
			cur = &out[len(out)-1]
			weighted = 0
		}
		cur.DurNs = ce - cur.StartNs
		weighted += p * float64(ce-cs)
		cur.UsePct = weighted / float64(cur.DurNs)
	}
	return out
}

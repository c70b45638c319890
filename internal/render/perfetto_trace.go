// A trace's analysis as a Perfetto timeline: the GPU operations on their
// streams, the runtime calls on their threads, and every device idle gap
// as a slice named by the cause the attribution gave most of its time to,
// so a user sees why the GPU waited.

package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// GapSliceName names a gap by its largest cause ("idle: launch-api").
func GapSliceName(g *tracestats.GapDetail) string {
	best, bestNs := tracestats.Cause(0), int64(-1)
	for _, c := range tracestats.Causes() {
		if g.ByCause[c] > bestNs {
			best, bestNs = c, g.ByCause[c]
		}
	}
	if bestNs <= 0 {
		return "idle"
	}
	return "idle: " + best.String()
}

// TracePerfetto writes the ranks' traces as one Perfetto trace, each rank a
// group of tracks: GPU ops per stream, runtime calls per thread, idle gaps
// per device, and the verdict and findings as instants at the end of the
// analysed span.
func TracePerfetto(w io.Writer, res *TraceReport) (PerfettoStats, error) {
	if len(res.Traces) != len(res.Reports) {
		return PerfettoStats{}, fmt.Errorf("perfetto: %d reports but %d traces kept for the timeline", len(res.Reports), len(res.Traces))
	}
	type rankTL struct {
		Trace  *trace.Trace
		Report *tracejudge.RankReport
	}
	ranks := make([]rankTL, len(res.Reports))
	for i := range ranks {
		ranks[i] = rankTL{res.Traces[i], res.Reports[i]}
	}
	p := newPFWriter(w)
	var st PerfettoStats
	// Perfetto timestamps are unsigned: a trace whose clock starts below
	// zero is shifted by the least timestamp (the same for every rank).
	var minT int64
	for _, r := range ranks {
		for i := range r.Trace.GPU {
			minT = min(minT, r.Trace.GPU[i].Start)
		}
		for i := range r.Trace.Runtime {
			minT = min(minT, r.Trace.Runtime[i].Start)
		}
	}
	at := func(t int64) int64 { return t - minT }
	track := func(parent uint64, name string) uint64 {
		st.Tracks++
		return p.track(parent, name, trackKind{})
	}
	for _, r := range ranks {
		t, rep := r.Trace, r.Report
		label := t.Source
		if t.Meta.Rank >= 0 {
			label = fmt.Sprintf("rank %d: %s", t.Meta.Rank, t.Source)
		}
		root := track(0, label)

		v := rep.Verdict
		args := []pfArg{strArg("summary", v.Summary), numArg("confidence", v.Confidence)}
		if v.Decision != "" {
			args = append(args, strArg("decision", v.Decision))
		}
		endT := at(rep.Scope.EndNs)
		p.instant(endT, root, "verdict: "+string(v.Class), args)
		st.Instants++
		for _, f := range rep.Findings {
			fa := []pfArg{strArg("claim", f.Claim), strArg("severity", f.Severity.String())}
			for i, e := range f.Evidence {
				fa = append(fa, strArg(fmt.Sprintf("evidence %d", i+1), evidenceLine(e, "", true)))
			}
			p.instant(endT, root, f.ID, fa)
			st.Instants++
		}

		// GPU ops by stream.
		byStream := map[uint32][]int32{}
		for i := range t.GPU {
			if t.GPU[i].Kind == trace.GPUSync {
				continue // a record of a host wait, not GPU work
			}
			byStream[t.GPU[i].Stream] = append(byStream[t.GPU[i].Stream], int32(i))
		}
		for _, s := range sortedKeysU32(byStream) {
			name := fmt.Sprintf("stream %d", s)
			if int(s) < len(t.Streams) {
				name = fmt.Sprintf("GPU %d stream %d", t.Streams[s].Device, t.Streams[s].ID)
			}
			tr := track(root, name)
			st.Slices += sliceRun(p, tr, byStream[s], func(i int32) (int64, int64, string, []pfArg) {
				g := &t.GPU[i]
				var a []pfArg
				if g.Bytes > 0 {
					a = []pfArg{numArg("bytes", float64(g.Bytes))}
				}
				return at(g.Start), at(g.End), t.Name(g.Name), a
			})
		}

		// Idle gaps by device.
		byDev := map[int32][]int32{}
		for i := range rep.Gaps {
			byDev[rep.Gaps[i].Device] = append(byDev[rep.Gaps[i].Device], int32(i))
		}
		for _, d := range sortedKeysI32(byDev) {
			tr := track(root, fmt.Sprintf("GPU %d idle gaps (by cause)", d))
			st.Slices += sliceRun(p, tr, byDev[d], func(i int32) (int64, int64, string, []pfArg) {
				g := &rep.Gaps[i]
				var a []pfArg
				for _, c := range tracestats.Causes() {
					if ns := g.ByCause[c]; ns > 0 {
						a = append(a, numArg(c.String()+" us", float64(ns)/1e3))
					}
				}
				if g.Next != "" {
					a = append(a, strArg("next op", g.Next))
				}
				if g.Step >= 0 {
					a = append(a, numArg("step", float64(g.Step)))
				}
				if g.AfterSync {
					a = append(a, strArg("after sync", "yes"))
				}
				return at(g.StartNs), at(g.StartNs + g.DurNs), GapSliceName(g), a
			})
		}

		// Runtime calls by thread.
		byThread := map[uint32][]int32{}
		for i := range t.Runtime {
			byThread[t.Runtime[i].Thread] = append(byThread[t.Runtime[i].Thread], int32(i))
		}
		for _, th := range sortedKeysU32(byThread) {
			name := fmt.Sprintf("thread %d runtime calls", th)
			if int(th) < len(t.Threads) {
				x := t.Threads[th]
				n := x.Name
				if n == "" {
					n = x.Label
				}
				name = fmt.Sprintf("runtime calls: pid %d tid %d %s", x.PID, x.TID, n)
			}
			tr := track(root, name)
			st.Slices += sliceRun(p, tr, byThread[th], func(i int32) (int64, int64, string, []pfArg) {
				c := &t.Runtime[i]
				return at(c.Start), at(c.End), t.Name(c.Name), nil
			})
		}
	}
	st.Packets = p.Packets
	return st, p.Close()
}

// sliceRun writes one track's slices in time order. Slices on a track must
// nest: one that starts inside the one before it and ends after it (clock
// skew between records) is clipped to start where the one before ended;
// nested ones (a call inside a call) stay as they are.
func sliceRun(p *pfWriter, tr uint64, idx []int32, get func(int32) (int64, int64, string, []pfArg)) int {
	type sl struct {
		s, e int64
		i    int32
	}
	ss := make([]sl, 0, len(idx))
	for _, i := range idx {
		s, e, _, _ := get(i)
		ss = append(ss, sl{s, e, i})
	}
	slices.SortStableFunc(ss, func(a, b sl) int {
		if c := cmp.Compare(a.s, b.s); c != 0 {
			return c
		}
		return cmp.Compare(b.e, a.e) // the enclosing one first
	})
	n := 0
	var open []int64 // ends of the slices still open, innermost last
	for _, x := range ss {
		s, e := x.s, x.e
		for len(open) > 0 && open[len(open)-1] <= s {
			p.event(open[len(open)-1], tr, evSliceEnd, "", 0, nil)
			open = open[:len(open)-1]
		}
		if len(open) > 0 && e > open[len(open)-1] {
			// Overlaps the open slice's end: starts where it ends instead.
			s = open[len(open)-1]
			for len(open) > 0 && open[len(open)-1] <= s {
				p.event(open[len(open)-1], tr, evSliceEnd, "", 0, nil)
				open = open[:len(open)-1]
			}
			if len(open) > 0 && e > open[len(open)-1] {
				continue // still does not nest: left out
			}
		}
		if e < s {
			continue
		}
		_, _, name, args := get(x.i)
		p.event(s, tr, evSliceBegin, name, 0, args)
		open = append(open, e)
		n++
	}
	for len(open) > 0 {
		p.event(open[len(open)-1], tr, evSliceEnd, "", 0, nil)
		open = open[:len(open)-1]
	}
	return n
}

func sortedKeysU32[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeysI32[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

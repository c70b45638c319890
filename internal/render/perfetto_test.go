package render

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// A small Perfetto decoder for the tests, written against Perfetto's protos
// (the field numbers the encoder's comment cites), independent of the
// encoder's own helpers: it reads what a trace processor would.

type pfTrack struct {
	UUID, Parent  uint64
	Name          string
	PID, TID      int64
	Process, Thrd bool
	Counter       bool
	Unit          uint64
}

type pfEvent struct {
	TS    uint64
	Type  uint64
	Track uint64
	Name  string
	Value float64
	Args  map[string]string
}

type pfDecoded struct {
	Tracks map[uint64]*pfTrack
	Order  []uint64 // tracks in the order written
	Events []pfEvent
	// SeqCleared says the first packet cleared the sequence's state.
	SeqCleared bool
}

// fields splits one message into its fields, failing the test on a
// malformed one.
func pfFields(t *testing.T, b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte)) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				t.Fatalf("field %d: bad varint", num)
			}
			fn(num, typ, v, nil)
			b = b[n:]
		case protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				t.Fatalf("field %d: bad fixed64", num)
			}
			fn(num, typ, v, nil)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				t.Fatalf("field %d: bad bytes", num)
			}
			fn(num, typ, 0, v)
			b = b[n:]
		default:
			t.Fatalf("field %d: unexpected wire type %d", num, typ)
		}
	}
}

func pfDecode(t *testing.T, data []byte) *pfDecoded {
	t.Helper()
	d := &pfDecoded{Tracks: map[uint64]*pfTrack{}}
	names := map[uint64]string{}
	first := true
	pfFields(t, data, func(num protowire.Number, _ protowire.Type, _ uint64, pkt []byte) {
		if num != 1 {
			t.Fatalf("Trace field %d: want only packet (1)", num)
		}
		var ts uint64
		var ev, td, in []byte
		var flags, seq uint64
		pfFields(t, pkt, func(num protowire.Number, _ protowire.Type, v uint64, raw []byte) {
			switch num {
			case 8:
				ts = v
			case 10:
				seq = v
			case 11:
				ev = raw
			case 12:
				in = raw
			case 13:
				flags = v
			case 60:
				td = raw
			default:
				t.Fatalf("TracePacket field %d not expected", num)
			}
		})
		if first {
			d.SeqCleared = flags == 1 && seq == 1
			first = false
		}
		if in != nil {
			pfFields(t, in, func(num protowire.Number, _ protowire.Type, _ uint64, raw []byte) {
				if num != 2 {
					t.Fatalf("InternedData field %d not expected", num)
				}
				var iid uint64
				var name string
				pfFields(t, raw, func(num protowire.Number, _ protowire.Type, v uint64, raw []byte) {
					if num == 1 {
						iid = v
					} else if num == 2 {
						name = string(raw)
					}
				})
				if _, dup := names[iid]; dup {
					t.Fatalf("iid %d interned twice", iid)
				}
				names[iid] = name
			})
		}
		if td != nil {
			tr := &pfTrack{}
			pfFields(t, td, func(num protowire.Number, _ protowire.Type, v uint64, raw []byte) {
				switch num {
				case 1:
					tr.UUID = v
				case 2:
					tr.Name = string(raw)
				case 5:
					tr.Parent = v
				case 3:
					tr.Process = true
					pfFields(t, raw, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) {
						if num == 1 {
							tr.PID = int64(v)
						}
					})
				case 4:
					tr.Thrd = true
					pfFields(t, raw, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) {
						switch num {
						case 1:
							tr.PID = int64(v)
						case 2:
							tr.TID = int64(v)
						}
					})
				case 8:
					tr.Counter = true
					pfFields(t, raw, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) {
						if num == 3 {
							tr.Unit = v
						}
					})
				}
			})
			if _, dup := d.Tracks[tr.UUID]; dup || tr.UUID == 0 {
				t.Fatalf("track uuid %d zero or written twice", tr.UUID)
			}
			if tr.Parent != 0 && d.Tracks[tr.Parent] == nil {
				t.Fatalf("track %q names parent %d before it was described", tr.Name, tr.Parent)
			}
			d.Tracks[tr.UUID] = tr
			d.Order = append(d.Order, tr.UUID)
		}
		if ev != nil {
			if flags != 2 || seq != 1 {
				t.Fatalf("track event at %d: sequence %d flags %d, want 1 and SEQ_NEEDS_INCREMENTAL_STATE", ts, seq, flags)
			}
			e := pfEvent{TS: ts, Args: map[string]string{}}
			pfFields(t, ev, func(num protowire.Number, _ protowire.Type, v uint64, raw []byte) {
				switch num {
				case 9:
					e.Type = v
				case 11:
					e.Track = v
				case 10:
					n, ok := names[v]
					if !ok {
						t.Fatalf("name iid %d used before it was interned", v)
					}
					e.Name = n
				case 44:
					e.Value = math.Float64frombits(v)
				case 4:
					var k, val string
					pfFields(t, raw, func(num protowire.Number, _ protowire.Type, v uint64, raw []byte) {
						switch num {
						case 10:
							k = string(raw)
						case 6:
							val = string(raw)
						case 4:
							val = fmt.Sprint(int64(v))
						case 5:
							val = fmt.Sprint(math.Float64frombits(v))
						}
					})
					e.Args[k] = val
				default:
					t.Fatalf("TrackEvent field %d not expected", num)
				}
			})
			tr := d.Tracks[e.Track]
			if tr == nil {
				t.Fatalf("event at %d on track %d, never described", ts, e.Track)
			}
			if tr.Counter != (e.Type == 4) {
				t.Fatalf("event type %d on track %q (counter %v)", e.Type, tr.Name, tr.Counter)
			}
			d.Events = append(d.Events, e)
		}
	})
	return d
}

// pfSlice is a begin/end pair on one track.
type pfSlice struct {
	Start, End uint64
	Name       string
	Args       map[string]string
	Depth      int
}

// slices pairs each track's begins and ends as trace_processor does (a
// stack per track, in timestamp order, ends before begins at one time),
// failing on an end with no begin or a begin left open.
func (d *pfDecoded) slices(t *testing.T) map[uint64][]pfSlice {
	t.Helper()
	byTrack := map[uint64][]pfEvent{}
	for _, e := range d.Events {
		if e.Type == 1 || e.Type == 2 {
			byTrack[e.Track] = append(byTrack[e.Track], e)
		}
	}
	out := map[uint64][]pfSlice{}
	for tr, evs := range byTrack {
		// Written in order per track: the encoder's contract.
		var stack []pfSlice
		var last uint64
		for _, e := range evs {
			if e.TS < last {
				t.Fatalf("track %q: event at %d after one at %d", d.Tracks[tr].Name, e.TS, last)
			}
			last = e.TS
			if e.Type == 1 {
				stack = append(stack, pfSlice{Start: e.TS, Name: e.Name, Args: e.Args, Depth: len(stack)})
				continue
			}
			if len(stack) == 0 {
				t.Fatalf("track %q: end at %d with no slice open", d.Tracks[tr].Name, e.TS)
			}
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s.End = e.TS
			out[tr] = append(out[tr], s)
		}
		if len(stack) > 0 {
			t.Fatalf("track %q: %d slices left open", d.Tracks[tr].Name, len(stack))
		}
	}
	return out
}

func (d *pfDecoded) counters(track uint64) (ts []uint64, vs []float64) {
	for _, e := range d.Events {
		if e.Type == 4 && e.Track == track {
			ts, vs = append(ts, e.TS), append(vs, e.Value)
		}
	}
	return
}

func (d *pfDecoded) trackNamed(parent uint64, name string) *pfTrack {
	for _, u := range d.Order {
		if tr := d.Tracks[u]; tr.Parent == parent && tr.Name == name {
			return tr
		}
	}
	return nil
}

// summary is the golden form: each track (indented under its parent) with
// what it holds and its first and last times, relative to the first event.
func (d *pfDecoded) summary(t *testing.T) string {
	sl := d.slices(t)
	var t0 uint64 = math.MaxUint64
	for _, e := range d.Events {
		t0 = min(t0, e.TS)
	}
	counts := map[uint64][3]int{}
	first, last := map[uint64]uint64{}, map[uint64]uint64{}
	for _, e := range d.Events {
		c := counts[e.Track]
		switch e.Type {
		case 4:
			c[0]++
		case 3:
			c[2]++
		}
		counts[e.Track] = c
		if _, ok := first[e.Track]; !ok {
			first[e.Track] = e.TS
		}
		last[e.Track] = e.TS
	}
	for tr, ss := range sl {
		c := counts[tr]
		c[1] = len(ss)
		counts[tr] = c
	}
	depth := func(tr *pfTrack) int {
		n := 0
		for tr.Parent != 0 {
			tr = d.Tracks[tr.Parent]
			n++
		}
		return n
	}
	var b strings.Builder
	// Children follow their parent, in the order written.
	var walk func(parent uint64)
	walk = func(parent uint64) {
		for _, u := range d.Order {
			tr := d.Tracks[u]
			if tr.Parent != parent {
				continue
			}
			kind := "track"
			switch {
			case tr.Thrd:
				kind = fmt.Sprintf("thread %d/%d", tr.PID, tr.TID)
			case tr.Process:
				kind = fmt.Sprintf("process %d", tr.PID)
			case tr.Counter:
				kind = fmt.Sprintf("counter unit=%d", tr.Unit)
			}
			c := counts[u]
			fmt.Fprintf(&b, "%s%s %q: %d values, %d slices, %d instants", strings.Repeat("  ", depth(tr)), kind, tr.Name, c[0], c[1], c[2])
			if f, ok := first[u]; ok {
				fmt.Fprintf(&b, ", %.3f..%.3f s", float64(f-t0)/1e9, float64(last[u]-t0)/1e9)
			}
			b.WriteString("\n")
			walk(u)
		}
	}
	walk(0)
	return b.String()
}

func loadRecording(t *testing.T, name string) (*timeline.Timeline, *Report) {
	t.Helper()
	path := filepath.Join("..", "..", "cmd", "gpufeed", "testdata", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl, _, err := timeline.Decode(f, path)
	if err != nil {
		t.Fatal(err)
	}
	v := derive.New(tl)
	return tl, Build(tl, v, judge.Judge(tl, v), nil)
}

// The live timeline holds, for a demo recording, every GPU, process and
// thread of the model with the model's values at the model's times.
func TestPerfettoLiveMatchesTheModel(t *testing.T) {
	for _, name := range []string{"demo-storage-bound.gpufeed", "demo-sync-bound.gpufeed", "trainer.gpufeed"} {
		t.Run(name, func(t *testing.T) {
			tl, rep := loadRecording(t, name)
			a := rep.View
			var buf bytes.Buffer
			st, err := Perfetto(&buf, rep)
			if err != nil {
				t.Fatal(err)
			}
			d := pfDecode(t, buf.Bytes())
			if !d.SeqCleared {
				t.Error("the first packet does not clear the sequence's incremental state")
			}
			if len(d.Tracks) != st.Tracks {
				t.Errorf("decoded %d tracks, the writer counted %d", len(d.Tracks), st.Tracks)
			}
			base := uint64(tl.Meta.UptimeNS)
			sl := d.slices(t)

			// Every GPU's utilisation is the model's series, at the
			// intervals' starts, repeats left out.
			for _, g := range a.GPUs {
				var gt *pfTrack
				for _, u := range d.Order {
					if tr := d.Tracks[u]; tr.Parent == 0 && strings.HasPrefix(tr.Name, fmt.Sprintf("GPU %d", g.Index)) {
						gt = tr
					}
				}
				if gt == nil {
					t.Fatalf("no track for GPU %d", g.Index)
				}
				util := d.trackNamed(gt.UUID, gt.Name+" utilisation %")
				if util == nil || !util.Counter {
					t.Fatalf("GPU %d: no utilisation counter", g.Index)
				}
				ts, vs := d.counters(util.UUID)
				var wantT []uint64
				var wantV []float64
				for i, v := range g.UtilPct {
					if math.IsNaN(v) || (len(wantV) > 0 && wantV[len(wantV)-1] == v) {
						continue
					}
					wantT, wantV = append(wantT, base+uint64(a.TickT[i])), append(wantV, v)
				}
				if fmt.Sprint(ts) != fmt.Sprint(wantT) || fmt.Sprint(vs) != fmt.Sprint(wantV) {
					t.Errorf("GPU %d utilisation:\n got %v at %v\nwant %v at %v", g.Index, vs, ts, wantV, wantT)
				}
				if len(wantV) == 0 {
					t.Errorf("GPU %d: the model has no utilisation: the test checks nothing", g.Index)
				}
				for _, n := range []string{" SM clock MHz", " power W", " PCIe TX bytes/s", " PCIe RX bytes/s"} {
					if d.trackNamed(gt.UUID, gt.Name+n) == nil {
						t.Errorf("GPU %d: no%s counter", g.Index, n)
					}
				}
			}

			// Every process and thread has its track; a thread's state
			// slices cover exactly the intervals it was sampled in, and its
			// CPU counter is the model's.
			for _, p := range a.Procs {
				var pt *pfTrack
				for _, tr := range d.Tracks {
					if tr.Process && tr.PID == int64(p.Key.PID) {
						pt = tr
					}
				}
				if pt == nil {
					t.Fatalf("no process track for pid %d", p.Key.PID)
				}
				for _, n := range []string{"CPU % of one core", "USS", "open fds"} {
					if d.trackNamed(pt.UUID, n) == nil {
						t.Errorf("pid %d: no %q counter", p.Key.PID, n)
					}
				}
				for _, th := range p.Threads {
					var tt *pfTrack
					for _, tr := range d.Tracks {
						if tr.Thrd && tr.TID == int64(th.Key.TID) && tr.Parent == pt.UUID {
							tt = tr
						}
					}
					if tt == nil {
						t.Fatalf("no thread track for tid %d", th.Key.TID)
					}
					var covered, want int64
					for _, s := range sl[tt.UUID] {
						covered += int64(s.End - s.Start)
						if s.Depth != 0 {
							t.Errorf("tid %d: state slices nest", th.Key.TID)
						}
						if !strings.HasPrefix(s.Name, "running") && !strings.HasPrefix(s.Name, "waiting for a CPU") &&
							!strings.HasPrefix(s.Name, "sleeping") && !strings.HasPrefix(s.Name, "D (uninterruptible)") {
							t.Errorf("tid %d: state %q", th.Key.TID, s.Name)
						}
					}
					for i, iv := range a.Intervals {
						if th.Sample(i+1) != nil && !math.IsNaN(th.CPUPct[i]) {
							want += iv.End - iv.Start
						}
					}
					if covered != want {
						t.Errorf("tid %d: state slices cover %d ns, the model's sampled intervals %d ns", th.Key.TID, covered, want)
					}
					cpu := d.trackNamed(tt.UUID, tt.Name+" CPU %")
					if cpu == nil {
						t.Fatalf("tid %d: no CPU counter", th.Key.TID)
					}
					_, vs := d.counters(cpu.UUID)
					var wantV []float64
					for _, v := range th.CPUPct {
						if !math.IsNaN(v) && (len(wantV) == 0 || wantV[len(wantV)-1] != v) {
							wantV = append(wantV, v)
						}
					}
					if fmt.Sprint(vs) != fmt.Sprint(wantV) {
						t.Errorf("tid %d CPU: got %v, want %v", th.Key.TID, vs, wantV)
					}
				}
			}

			// The verdict and every finding are instants at the window's end.
			end := base + uint64(a.TickT[len(a.TickT)-1])
			var ids []string
			verdicts := 0
			for _, e := range d.Events {
				if e.Type != 3 || e.TS != end {
					continue
				}
				if strings.HasPrefix(e.Name, "verdict: ") {
					verdicts++
					if e.Name != "verdict: "+string(rep.Verdict.Class) || e.Args["summary"] != safetext.Clean(rep.Verdict.Summary) {
						t.Errorf("verdict instant %q %q, want %s", e.Name, e.Args["summary"], rep.Verdict.Class)
					}
				} else if e.Args["claim"] != "" {
					ids = append(ids, e.Name)
				}
			}
			var wantIDs []string
			for _, f := range rep.Findings {
				wantIDs = append(wantIDs, f.ID)
			}
			if verdicts != 1 || strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
				t.Errorf("%d verdicts, findings %v; want 1 and %v", verdicts, ids, wantIDs)
			}
			golden.Check(t, filepath.Join("testdata", "perfetto", strings.TrimSuffix(name, ".gpufeed")+".summary"), d.summary(t))
		})
	}
}

// A trace's timeline holds every GPU op on its stream, every runtime call
// on its thread and every attributed gap named by its cause, at the
// trace's times.
func TestPerfettoTraceMatchesTheModel(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "traces", "critical_path", "cuda_event_sync_multi_stream", "event_sync_trace.json.gz")
	tr, err := kineto.DecodeFile(path, kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := tracejudge.Analyze(tr, tracejudge.Options{KeepGaps: true})
	if len(rep.Gaps) == 0 {
		t.Fatal("the trace has no gaps: the test checks nothing")
	}
	var buf bytes.Buffer
	st, err := TracePerfetto(&buf, &TraceReport{Reports: []*tracejudge.RankReport{rep}, Traces: []*trace.Trace{tr}})
	if err != nil {
		t.Fatal(err)
	}
	d := pfDecode(t, buf.Bytes())
	sl := d.slices(t)
	var minT int64
	for i := range tr.GPU {
		minT = min(minT, tr.GPU[i].Start)
	}
	for i := range tr.Runtime {
		minT = min(minT, tr.Runtime[i].Start)
	}
	at := func(t int64) uint64 { return uint64(t - minT) }

	// GPU ops: as many slices on the streams' tracks as ops (GPU-side
	// records of host syncs apart), starting where the ops start.
	var gotOps, clipped int
	opStarts := map[uint64]int{}
	for i := range tr.GPU {
		if tr.GPU[i].Kind != trace.GPUSync {
			opStarts[at(tr.GPU[i].Start)]++
		}
	}
	var wantOps int
	for _, n := range opStarts {
		wantOps += n
	}
	var gapSlices []pfSlice
	var callSlices int
	for u, ss := range sl {
		name := d.Tracks[u].Name
		switch {
		case strings.Contains(name, " stream "):
			for _, s := range ss {
				gotOps++
				if opStarts[s.Start] > 0 {
					opStarts[s.Start]--
				} else {
					clipped++
				}
			}
		case strings.Contains(name, "idle gaps"):
			gapSlices = append(gapSlices, ss...)
		case strings.HasPrefix(name, "runtime calls"):
			callSlices += len(ss)
		}
	}
	if gotOps != wantOps || clipped != 0 {
		t.Errorf("%d GPU op slices (%d not at an op's start), want %d", gotOps, clipped, wantOps)
	}
	if callSlices != len(tr.Runtime) {
		t.Errorf("%d runtime call slices, want %d", callSlices, len(tr.Runtime))
	}
	sort.Slice(gapSlices, func(i, j int) bool { return gapSlices[i].Start < gapSlices[j].Start })
	gaps := append([]int(nil), make([]int, len(rep.Gaps))...)
	for i := range gaps {
		gaps[i] = i
	}
	sort.SliceStable(gaps, func(i, j int) bool { return rep.Gaps[gaps[i]].StartNs < rep.Gaps[gaps[j]].StartNs })
	if len(gapSlices) != len(rep.Gaps) {
		t.Fatalf("%d gap slices, want %d", len(gapSlices), len(rep.Gaps))
	}
	for k, i := range gaps {
		g := &rep.Gaps[i]
		s := gapSlices[k]
		if s.Start != at(g.StartNs) || s.End != at(g.StartNs+g.DurNs) || s.Name != GapSliceName(g) || !strings.HasPrefix(s.Name, "idle") {
			t.Errorf("gap %d: slice %q %d..%d, want %q %d..%d", k, s.Name, s.Start, s.End, GapSliceName(g), at(g.StartNs), at(g.StartNs+g.DurNs))
		}
	}
	if st.Slices != gotOps+len(gapSlices)+callSlices {
		t.Errorf("writer counted %d slices, decoded %d", st.Slices, gotOps+len(gapSlices)+callSlices)
	}
	golden.Check(t, filepath.Join("testdata", "perfetto", "cuda_event_sync_multi_stream.summary"), d.summary(t))
}

// Slices on one track must nest: one that overlaps the end of the one
// before it starts where that one ended, and a nested one stays nested.
func TestSliceRunNestsOverlaps(t *testing.T) {
	type s struct{ a, b int64 }
	in := []s{{0, 10}, {2, 4}, {8, 15}, {15, 20}, {30, 40}}
	var buf bytes.Buffer
	p := newPFWriter(&buf)
	tr := p.track(0, "t", trackKind{})
	idx := []int32{3, 1, 0, 4, 2} // any order
	n := sliceRun(p, tr, idx, func(i int32) (int64, int64, string, []pfArg) {
		return in[i].a, in[i].b, fmt.Sprint(i), nil
	})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	d := pfDecode(t, buf.Bytes())
	got := d.slices(t)[tr]
	sort.Slice(got, func(i, j int) bool { return got[i].Start < got[j].Start })
	var b strings.Builder
	for _, x := range got {
		fmt.Fprintf(&b, "%s:%d-%d/%d ", x.Name, x.Start, x.End, x.Depth)
	}
	want := "0:0-10/0 1:2-4/1 2:10-15/0 3:15-20/0 4:30-40/0 "
	if n != 5 || b.String() != want {
		t.Errorf("got %d slices %s\nwant 5 %s", n, b.String(), want)
	}
}

// A thread's state slices: the largest share of each interval names it, a
// sleeping thread is named by where it waited while it stays in the state
// it was seen waiting in, and a change of state (S to D) drops a wait
// channel read in the old one.
func TestPerfettoThreadStates(t *testing.T) {
	pk := timeline.ProcKey{PID: 7, StartTime: 1}
	tk := timeline.ThreadKey{TID: 7, StartTime: 1}
	tl := &timeline.Timeline{
		Meta: timeline.Meta{Tool: "gpufeed test", NumCPU: 1, ClockTick: 100, PageSize: 4096,
			Interval: timeline.Duration(100 * time.Millisecond), Target: timeline.Target{PID: 7, StartTime: 1}},
		Procs:   map[timeline.ProcKey]*timeline.ProcInfo{pk: {Key: pk, Comm: "job", LastSeen: 6e8}},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{tk: {Key: tk, PID: 7, Comm: "main", LastSeen: 6e8}},
	}
	// Per interval: run and wait in ms of 100, the state and wait read at its end.
	steps := []struct {
		run, wait uint64
		state     byte
		blocked   *timeline.Blocked
	}{
		{90, 5, 'R', nil},
		{80, 10, 'R', nil},
		{10, 70, 'R', nil},
		{0, 0, 'S', &timeline.Blocked{Wchan: "futex_do_wait", On: "futex 0x1"}},
		{0, 0, 'S', nil}, // still asleep where it was seen
		{0, 0, 'D', nil}, // now in D: where is not known
	}
	var run, wait uint64
	add := func(i int, state byte, b *timeline.Blocked) {
		tl.Ticks = append(tl.Ticks, timeline.Tick{T: int64(i) * 1e8,
			Threads: []timeline.ThreadSample{{TID: 7, PID: 7, State: state, RunNS: run, WaitNS: wait, Blocked: b}},
			Procs:   []timeline.ProcSample{{PID: 7, Threads: 1, RSSPages: 1}}})
	}
	add(0, 'R', nil)
	for i, s := range steps {
		run, wait = run+s.run*1e6, wait+s.wait*1e6
		add(i+1, s.state, s.blocked)
	}
	v := derive.New(tl)
	var buf bytes.Buffer
	if _, err := Perfetto(&buf, Build(tl, v, nil, nil)); err != nil {
		t.Fatal(err)
	}
	d := pfDecode(t, buf.Bytes())
	var got []string
	for u, ss := range d.slices(t) {
		if d.Tracks[u].Thrd {
			for _, s := range ss {
				got = append(got, fmt.Sprintf("%d-%d %s %s", s.Start/1e8, s.End/1e8, s.Name, s.Args["on"]))
			}
		}
	}
	sort.Strings(got)
	want := []string{"0-2 running ", "2-3 waiting for a CPU ", "3-5 sleeping in futex_do_wait futex 0x1", "5-6 D (uninterruptible) "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("states\n got %q\nwant %q", got, want)
	}
}

// The timeline is one format of the output layer, written to a file: -o
// does not offer it, and a check report has none.
func TestPerfettoIsAFileFormat(t *testing.T) {
	if _, err := ParseFormat("perfetto"); err == nil || !strings.Contains(err.Error(), "--perfetto FILE") {
		t.Errorf("-o perfetto: %v, want an error pointing to --perfetto FILE", err)
	}
	_, rep := loadRecording(t, "trainer.gpufeed")
	var viaWrite, direct bytes.Buffer
	if err := Write(&viaWrite, FormatPerfetto, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Perfetto(&direct, rep); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(viaWrite.Bytes(), direct.Bytes()) || viaWrite.Len() == 0 {
		t.Error("Write with FormatPerfetto is not the Perfetto renderer's output")
	}
	if err := Write(&viaWrite, FormatPerfetto, &CheckReport{}, Options{}); err == nil {
		t.Error("a check report rendered as a timeline")
	}
}

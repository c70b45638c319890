package tracestats

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// Cause is what a slice of GPU idle time is attributed to.
type Cause uint8

const (
	// CauseSync: the launching thread was blocked in a synchronisation
	// (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
	// a blocking cudaMemcpy or cudaMemset).
	CauseSync Cause = iota
	// CausePageableCopy: the launching thread was inside an "async" copy
	// from or to pageable memory, which the driver stages synchronously.
	CausePageableCopy
	// CauseSetup: the launching thread was inside a one-off set-up launch
	// (findSetupLaunches: a kernel's first launch far longer than the
	// others, such as module loading): not steady-state submission.
	CauseSetup
	// CauseDataLoader: the launching thread was waiting in DataLoader __next__.
	CauseDataLoader
	// CauseLaunchAPI: the launching thread was inside calls that enqueue GPU
	// work (kernel launches, async copies and memsets), including the call
	// that launches the operation ending the gap: submission overhead.
	CauseLaunchAPI
	// CauseOtherAPI: the launching thread was inside CUDA/HIP calls that
	// enqueue nothing (allocation, frees, stream and event creation, device
	// queries, module loading): set-up, or allocation churn in the loop.
	CauseOtherAPI
	// CauseCPUOps: the launching thread was running recorded CPU operators
	// or annotated code (framework and Python overhead).
	CauseCPUOps
	// CauseUntraced: the launching thread was in nothing the profiler recorded.
	CauseUntraced
	// CauseLaunchLatency: the call launching the operation had returned but
	// the operation had not started yet (driver and queue latency), up to
	// the consecutive-kernel delay, or the whole gap is shorter than that
	// delay.
	CauseLaunchLatency
	// CauseGPUWait: the operation was enqueued (before the device went idle,
	// or during the gap and then still more than the consecutive-kernel
	// delay from its start) and started late: it waited on another stream,
	// an event, or another device.
	CauseGPUWait
	// CauseNoLaunch: the operation after the gap has no launching call in
	// the trace, so the gap cannot be attributed.
	CauseNoLaunch
	numCauses
)

var causeNames = [numCauses]string{"sync", "pageable-copy", "setup", "dataloader", "launch-api", "other-api", "cpu-ops", "untraced",
	"launch-latency", "gpu-wait", "no-launch-record"}

func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "unknown"
}

// MarshalText writes the cause by name.
func (c Cause) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Causes lists every cause in report order.
func Causes() []Cause {
	out := make([]Cause, numCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}

// IsHostWait reports causes that are the host not enqueuing in time.
func (c Cause) IsHostWait() bool { return c <= CauseUntraced }

// ByCause holds nanoseconds per cause.
type ByCause [numCauses]int64

// Sum returns the total over all causes.
func (b *ByCause) Sum() int64 {
	var s int64
	for _, v := range b {
		s += v
	}
	return s
}

// HostWait returns the total over host-wait causes.
func (b *ByCause) HostWait() int64 {
	var s int64
	for c, v := range b {
		if Cause(c).IsHostWait() {
			s += v
		}
	}
	return s
}

// MarshalJSON writes the causes by name.
func (b ByCause) MarshalJSON() ([]byte, error) {
	out := []byte{'{'}
	for c, v := range b {
		if c > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		// JSON keys are snake_case (docs/JSON.md): "pageable_copy".
		out = append(out, strings.ReplaceAll(Cause(c).String(), "-", "_")...)
		out = append(out, `":`...)
		out = appendInt(out, v)
	}
	return append(out, '}'), nil
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// Attribution explains the device idle time: every gap between GPU
// operations on a device, split by what the thread that launched the next
// operation was doing while the device waited.
type Attribution struct {
	// SpanNs is the summed span of the devices analysed (first operation
	// start to last operation end, per device).
	SpanNs int64 `json:"span_ns"`
	// IdleNs is the device idle time inside those spans.
	IdleNs int64 `json:"idle_ns"`
	Gaps   int   `json:"gaps"`
	// ByCause splits IdleNs.
	ByCause ByCause `json:"by_cause_ns"`
	// AfterSyncNs is the host-wait idle in gaps that began while the
	// launching thread was blocked in a synchronisation: the sync drained
	// the queue and the GPU then waited for the host to refill it.
	AfterSyncNs   int64 `json:"after_sync_ns"`
	AfterSyncGaps int   `json:"after_sync_gaps"`
	// AfterSync splits AfterSyncNs by cause.
	AfterSync ByCause `json:"after_sync_by_cause_ns"`
	// DuringGPUWait splits the GPU-side wait idle by what the launching
	// thread was doing meanwhile (host-wait causes only): a host stuck in a
	// pageable copy while queued work does not start is the staging stall
	// Nsight's pageable-copy rule warns about.
	DuringGPUWait ByCause `json:"during_gpu_wait_ns"`
	// TopOps are the outermost CPU ranges that overlapped host-wait gaps most.
	TopOps []NamedTime `json:"top_cpu_ranges,omitempty"`
	// TopAPIs are the runtime calls that overlapped host-wait gaps most.
	TopAPIs []NamedTime `json:"top_api_calls,omitempty"`
	// Threads are the launching threads with host-wait idle, largest first.
	Threads []ThreadTime `json:"threads,omitempty"`
	// Longest are the longest gaps with their split.
	Longest []GapDetail `json:"longest_gaps,omitempty"`
}

// NamedTime is a name with a duration.
type NamedTime struct {
	Name string `json:"name"`
	Ns   int64  `json:"ns"`
}

// ThreadTime is a thread with the host-wait idle attributed to it.
type ThreadTime struct {
	PID  int64  `json:"pid"`
	TID  int64  `json:"tid"`
	Name string `json:"name,omitempty"`
	Ns   int64  `json:"ns"`
}

// GapDetail is one device gap and its attribution.
type GapDetail struct {
	Device  int32   `json:"device"`
	StartNs int64   `json:"start_ns"`
	DurNs   int64   `json:"dur_ns"`
	ByCause ByCause `json:"by_cause_ns"`
	// Next names the operation that ended the gap.
	Next string `json:"next_op"`
	// AfterSync reports that the gap began while the launching thread was
	// blocked in a synchronisation.
	AfterSync bool `json:"after_sync"`
	// Step is the number of the ProfilerStep the gap began in, -1 when none.
	Step int `json:"step"`
	// StepPos is the step's position among the steps in scope, -1 when none.
	StepPos int `json:"-"`
}

// maxLongest is how many gaps Attribution.Longest keeps.
const maxLongest = 5

// syncSlack tolerates a sync call returning a little before the last GPU
// operation ends in the trace (CPU and GPU clocks are aligned to about a
// microsecond by CUPTI).
const syncSlack = int64(5_000)

// threadIndex holds, per thread, the time ranges of each activity, merged.
type threadIndex struct {
	// lists[c] are disjoint sorted spans of activity c (host-wait causes up to CauseCPUOps).
	lists [CauseUntraced][]span
	// syncs are the thread's sync calls, sorted by start (not merged).
	syncs []span
	// outer are the thread's outermost CPU ranges (steps excluded), sorted.
	outer []namedSpan
	// calls are the thread's runtime calls (a run of t.Runtime, which is
	// sorted by thread and start).
	calls []trace.RuntimeCall
}

// appendMerged appends sp to a list of disjoint spans sorted by start,
// merging it with the last one when they overlap or touch (sp must not
// start before the last span does).
func appendMerged(list []span, sp span) []span {
	if n := len(list); n > 0 && sp.Start <= list[n-1].End {
		list[n-1].End = max(list[n-1].End, sp.End)
		return list
	}
	return append(list, sp)
}

type namedSpan struct {
	span
	name trace.NameID
}

// buildThreadIndex prepares the activity lists of every thread that
// launched GPU work in scope; setup marks the set-up launch calls.
func buildThreadIndex(s *scope, setup map[int32]bool) map[uint32]*threadIndex {
	t := s.t
	idx := map[uint32]*threadIndex{}
	for i := range t.GPU {
		if s.gpu[i] && t.GPU[i].Launch >= 0 {
			th := t.Runtime[t.GPU[i].Launch].Thread
			if idx[th] == nil {
				idx[th] = &threadIndex{}
			}
		}
	}
	// Runtime calls are sorted by (thread, start): each list is built
	// merged as it goes, and each thread's calls are a run of t.Runtime.
	for i := 0; i < len(t.Runtime); {
		th := t.Runtime[i].Thread
		j := i
		for j < len(t.Runtime) && t.Runtime[j].Thread == th {
			j++
		}
		ti := idx[th]
		if ti != nil {
			ti.calls = t.Runtime[i:j]
			for k := i; k < j; k++ {
				r := &t.Runtime[k]
				sp := span{r.Start, r.End}
				c := CauseOtherAPI
				switch {
				case r.Kind.IsSync():
					c = CauseSync
					ti.syncs = append(ti.syncs, sp)
				case r.Kind == trace.MemcpyAsync && r.GPU >= 0 && t.GPU[r.GPU].TouchesPageable():
					c = CausePageableCopy
				case setup[int32(k)]:
					c = CauseSetup
				case r.Kind.Enqueues():
					c = CauseLaunchAPI
				}
				ti.lists[c] = appendMerged(ti.lists[c], sp)
			}
		}
		i = j
	}
	// CPU ranges are sorted by (thread, start, longest first): the outermost
	// ranges are those not inside the previous outermost one.
	for i := 0; i < len(t.CPU); {
		th := t.CPU[i].Thread
		j := i
		for j < len(t.CPU) && t.CPU[j].Thread == th {
			j++
		}
		ti := idx[th]
		if ti != nil {
			var lastEnd int64 = -1 << 62
			for k := i; k < j; k++ {
				c := &t.CPU[k]
				sp := span{c.Start, c.End}
				switch c.Kind {
				case trace.Step:
					continue
				case trace.DataLoaderNext:
					ti.lists[CauseDataLoader] = appendMerged(ti.lists[CauseDataLoader], sp)
				}
				ti.lists[CauseCPUOps] = appendMerged(ti.lists[CauseCPUOps], sp)
				if c.Start >= lastEnd {
					ti.outer = append(ti.outer, namedSpan{sp, c.Name})
					lastEnd = c.End
				} else if c.End > lastEnd {
					lastEnd = c.End
				}
			}
		}
		i = j
	}
	return idx
}

// cover returns how much of [a, b) the disjoint sorted spans cover, as the
// covered pieces (to subtract from what is left).
func cover(list []span, a, b int64, out []span) []span {
	i := sort.Search(len(list), func(i int) bool { return list[i].End > a })
	for ; i < len(list) && list[i].Start < b; i++ {
		out = append(out, span{max(list[i].Start, a), min(list[i].End, b)})
	}
	return out
}

// subtract removes the (sorted, disjoint) pieces from the (sorted,
// disjoint) remaining spans and returns the removed length.
func subtract(remaining []span, pieces []span) ([]span, int64) {
	var removed int64
	var out []span
	for _, r := range remaining {
		cur := r.Start
		for _, p := range pieces {
			if p.End <= cur || p.Start >= r.End {
				continue
			}
			if p.Start > cur {
				out = append(out, span{cur, p.Start})
			}
			lo, hi := max(p.Start, cur), min(p.End, r.End)
			removed += hi - lo
			cur = max(cur, hi)
		}
		if cur < r.End {
			out = append(out, span{cur, r.End})
		}
	}
	return out, removed
}

// split attributes the host-wait window [a, b) on a thread to causes by
// precedence: sync, pageable copy, set-up launch, DataLoader, launch calls,
// other API calls, CPU operators, and the rest to untraced.
func (ti *threadIndex) split(a, b int64, into *ByCause) {
	remaining := []span{{a, b}}
	var pieces []span
	for c := CauseSync; c < CauseUntraced; c++ {
		pieces = cover(ti.lists[c], a, b, pieces[:0])
		var removed int64
		remaining, removed = subtract(remaining, pieces)
		into[c] += removed
		if len(remaining) == 0 {
			return
		}
	}
	for _, r := range remaining {
		into[CauseUntraced] += r.End - r.Start
	}
}

// blockedInSyncAt reports whether the thread was inside a sync call at ts
// (allowing syncSlack for clock alignment).
func (ti *threadIndex) blockedInSyncAt(ts int64) bool {
	i := sort.Search(len(ti.syncs), func(i int) bool { return ti.syncs[i].Start > ts })
	for k := i - 1; k >= 0 && k >= i-2; k-- {
		if ti.syncs[k].End >= ts-syncSlack {
			return true
		}
	}
	return false
}

// attribute walks every device gap in scope, attributes it, and hands each
// to onGap (which must not keep the pointer).
func attribute(s *scope, delay int64, steps []Step, setup map[int32]bool, onGap func(*GapDetail)) (Attribution, map[int32][]span, map[int32][]int32) {
	t := s.t
	var at Attribution
	idx := buildThreadIndex(s, setup)
	if s.work == 0 {
		return at, nil, nil
	}
	byDev := workByDevice(s, s.start, s.end)
	busyByDev := map[int32][]span{}
	opTime := map[trace.NameID]int64{}
	apiTime := map[trace.NameID]int64{}
	threadTime := map[uint32]int64{}
	var longest []GapDetail
	devs := make([]int32, 0, len(byDev))
	for dev := range byDev {
		devs = append(devs, dev)
	}
	slices.Sort(devs)
	for _, dev := range devs {
		ops := byDev[dev]
		var busy []span
		// Merge in start order, remembering the op that opens each span.
		var firsts []int32
		// Busy time is clipped to the scope's span.
		for _, i := range ops {
			g := &t.GPU[i]
			st, en := max(g.Start, s.start), min(g.End, s.end)
			if n := len(busy); n > 0 && st <= busy[n-1].End {
				busy[n-1].End = max(busy[n-1].End, en)
				continue
			}
			busy = append(busy, span{st, en})
			firsts = append(firsts, i)
		}
		busyByDev[dev] = busy
		at.SpanNs += busy[len(busy)-1].End - busy[0].Start
		for k := 1; k < len(busy); k++ {
			gs, ge := busy[k-1].End, busy[k].Start
			g := &t.GPU[firsts[k]]
			gd := GapDetail{Device: dev, StartNs: gs, DurNs: ge - gs, Next: t.Name(g.Name), Step: -1, StepPos: StepAt(steps, gs)}
			if gd.StepPos >= 0 {
				gd.Step = steps[gd.StepPos].Number
			}
			switch {
			case g.Launch < 0:
				gd.ByCause[CauseNoLaunch] += ge - gs
			default:
				r := &t.Runtime[g.Launch]
				ti := idx[r.Thread]
				switch {
				case r.Start <= gs && ge-gs < delay:
					gd.ByCause[CauseLaunchLatency] += ge - gs
				case r.Start <= gs:
					gd.ByCause[CauseGPUWait] += ge - gs
					ti.split(gs, ge, &at.DuringGPUWait)
				default:
					// [gs, hostEnd): the thread had not yet called the launch;
					// [hostEnd, callEnd): it was inside the launching call;
					// [callEnd, ge): the call had returned, the op not started.
					// Up to delay of that is launch latency (the driver and
					// the queue); an op enqueued on an idle device that
					// starts later than that waited on something else (an
					// event, another stream, another device or process), not
					// on the CPU: the same GPU-side wait as an op launched
					// before the gap opened.
					hostEnd := min(r.Start, ge)
					callEnd := min(r.End, ge)
					ti.split(gs, hostEnd, &gd.ByCause)
					gd.ByCause[callCause(t, r, setup[g.Launch])] += callEnd - hostEnd
					latEnd := min(ge, callEnd+delay)
					gd.ByCause[CauseLaunchLatency] += latEnd - callEnd
					if latEnd < ge {
						gd.ByCause[CauseGPUWait] += ge - latEnd
						ti.split(latEnd, ge, &at.DuringGPUWait)
					}
					apiTime[r.Name] += callEnd - hostEnd
					if ti.blockedInSyncAt(gs) {
						gd.AfterSync = true
					}
					hw := gd.ByCause.HostWait()
					threadTime[r.Thread] += hw
					// Which outermost CPU ranges overlapped the host-wait window.
					j := sort.Search(len(ti.outer), func(j int) bool { return ti.outer[j].End > gs })
					for ; j < len(ti.outer) && ti.outer[j].Start < hostEnd; j++ {
						opTime[ti.outer[j].name] += overlap(ti.outer[j].Start, ti.outer[j].End, gs, hostEnd)
					}
					j = sort.Search(len(ti.calls), func(j int) bool { return ti.calls[j].Start >= gs })
					for j > 0 && ti.calls[j-1].End > gs {
						j--
					}
					for ; j < len(ti.calls) && ti.calls[j].Start < hostEnd; j++ {
						apiTime[ti.calls[j].Name] += overlap(ti.calls[j].Start, ti.calls[j].End, gs, hostEnd)
					}
				}
			}
			at.Gaps++
			at.IdleNs += gd.DurNs
			for c, v := range gd.ByCause {
				at.ByCause[c] += v
			}
			if gd.AfterSync {
				at.AfterSyncNs += gd.ByCause.HostWait()
				at.AfterSyncGaps++
				for c := range gd.ByCause {
					if Cause(c).IsHostWait() {
						at.AfterSync[c] += gd.ByCause[c]
					}
				}
			}
			onGap(&gd)
			longest = keepLongest(longest, gd)
		}
	}
	at.TopOps = topNamed(t, opTime)
	at.TopAPIs = topNamed(t, apiTime)
	for th, ns := range threadTime {
		tt := t.Threads[th]
		at.Threads = append(at.Threads, ThreadTime{PID: tt.PID, TID: tt.TID, Name: tt.Name, Ns: ns})
	}
	slices.SortFunc(at.Threads, func(a, b ThreadTime) int {
		if c := cmp.Compare(b.Ns, a.Ns); c != 0 {
			return c
		}
		return cmp.Compare(a.TID, b.TID)
	})
	at.Longest = longest
	return at, busyByDev, byDev
}

// callCause is the cause the time inside a launching call counts as: a
// blocking copy or memset is a sync, an async copy from pageable memory is
// a pageable copy, a set-up launch is set-up, anything else is launch
// overhead.
func callCause(t *trace.Trace, r *trace.RuntimeCall, setup bool) Cause {
	switch {
	case r.Kind.IsSync():
		return CauseSync
	case r.Kind == trace.MemcpyAsync && r.GPU >= 0 && t.GPU[r.GPU].TouchesPageable():
		return CausePageableCopy
	case setup:
		return CauseSetup
	}
	return CauseLaunchAPI
}

// topNamed returns the five largest entries of m, by name.
func topNamed(t *trace.Trace, m map[trace.NameID]int64) []NamedTime {
	var out []NamedTime
	for id, ns := range m {
		if ns > 0 {
			out = append(out, NamedTime{Name: t.Name(id), Ns: ns})
		}
	}
	slices.SortFunc(out, func(a, b NamedTime) int {
		if c := cmp.Compare(b.Ns, a.Ns); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:min(len(out), 5)]
}

// keepLongest inserts gd into the list of the maxLongest longest gaps
// (longest first; earlier first among equals).
func keepLongest(list []GapDetail, gd GapDetail) []GapDetail {
	longer := func(a, b GapDetail) bool {
		return a.DurNs > b.DurNs || a.DurNs == b.DurNs && a.StartNs < b.StartNs
	}
	if len(list) == maxLongest && !longer(gd, list[len(list)-1]) {
		return list
	}
	i := sort.Search(len(list), func(i int) bool { return longer(gd, list[i]) })
	list = slices.Insert(list, i, gd)
	return list[:min(len(list), maxLongest)]
}

// StepAt returns the position of the step whose range holds ts, -1 if none.
func StepAt(steps []Step, ts int64) int {
	i := sort.Search(len(steps), func(i int) bool { return steps[i].Start > ts })
	if i > 0 && ts < steps[i-1].End {
		return i - 1
	}
	return -1
}

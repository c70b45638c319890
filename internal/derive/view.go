// Package derive holds the quantities derived from a timeline that both the
// report and the rules read: per-thread CPU and run-queue wait per interval,
// context-switch rates, per-process memory, descriptors and read rates, the
// host's CPUs, run queue, pressure and disks, and each GPU's utilisation, all
// aligned on the same intervals so a rule can ask "for thread X, the CPU in
// each interval" and "the GPU utilisation in the same intervals".
//
// Everything here is a pure function of the timeline: a live run and its
// recording give the same view. Judgement (what the numbers mean, against
// which thresholds) is internal/judge's; nothing here decides.
package derive

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// View is the derived view of one timeline.
type View struct {
	// Timeline is what the view was derived from.
	Timeline *timeline.Timeline `json:"-"`
	// TickT are the ticks' times (ns since start); Intervals[i] spans TickT[i]..TickT[i+1].
	TickT     []int64    `json:"-"`
	Intervals []Interval `json:"-"`
	// WindowNS is the time from the first tick to the last.
	WindowNS int64 `json:"window_ns"`

	Threads  []*Thread `json:"-"` // by PID, then TID
	Procs    []*Proc   `json:"-"` // by PID
	Host     *Host     `json:"-"`
	GPUs     []*GPU    `json:"-"`
	Observer *Observer `json:"-"`

	threadByKey map[timeline.ThreadKey]*Thread
	procByKey   map[timeline.ProcKey]*Proc
}

// Interval is one span between consecutive ticks.
type Interval struct {
	Start, End int64 // ns since the window started
}

// Seconds is the interval's length.
func (iv Interval) Seconds() float64 { return float64(iv.End-iv.Start) / 1e9 }

// Window describes n values over the whole window, for Evidence.Window:
// "100 intervals of 100ms over 10.0 s".
func (a *View) Window(n int) string {
	return fmt.Sprintf("%d samples of %v over %.1f s", n, time.Duration(a.Timeline.Meta.Interval), float64(a.WindowNS)/1e9)
}

// Thread finds a thread by identity.
func (a *View) Thread(k timeline.ThreadKey) *Thread { return a.threadByKey[k] }

// Proc finds a process by identity.
func (a *View) Proc(k timeline.ProcKey) *Proc { return a.procByKey[k] }

// ProcByPID finds the latest process seen with pid.
func (a *View) ProcByPID(pid int) *Proc {
	var best *Proc
	for _, p := range a.Procs {
		if p.Key.PID == pid && (best == nil || p.Info.FirstSeen > best.Info.FirstSeen) {
			best = p
		}
	}
	return best
}

// Target is the process the run was pointed at (nil if never sampled).
func (a *View) Target() *Proc {
	return a.procByKey[timeline.ProcKey{PID: a.Timeline.Meta.Target.PID, StartTime: a.Timeline.Meta.Target.StartTime}]
}

// Observer is gpufeed's own cost.
type Observer struct {
	CPUPctOfCore      float64 `json:"cpu_percent_of_core"`
	CPUSeconds        float64 `json:"cpu_seconds"`
	USPerThreadSample float64 `json:"us_per_thread_sample"`
	ThreadSamples     int     `json:"thread_samples"`
	// ThreadSamplesCarried is timeline.Observer's: dormant threads'
	// samples carried from their last reading instead of read.
	ThreadSamplesCarried int     `json:"thread_samples_carried,omitempty"`
	TickP50MS            float64 `json:"tick_p50_ms"`
	TickMaxMS            float64 `json:"tick_max_ms"`
	Overruns             int     `json:"overruns"`
	// Sched and SchedNotBPF are timeline.Observer's: where the threads'
	// scheduling counters came from, and why not from the kernel's events.
	Sched       string `json:"sched,omitempty"`
	SchedNotBPF string `json:"sched_not_bpf,omitempty"`
	SchedMissed uint64 `json:"sched_missed,omitempty"`
	// Waits and WaitsNotBPF are timeline.Observer's: where the sleeping
	// threads' waits were read, and why not in the kernel.
	Waits       string `json:"waits,omitempty"`
	WaitsNotBPF string `json:"waits_not_bpf,omitempty"`
}

// New analyses a timeline.
func New(tl *timeline.Timeline) *View {
	a := &View{Timeline: tl, threadByKey: map[timeline.ThreadKey]*Thread{}, procByKey: map[timeline.ProcKey]*Proc{}}
	a.TickT = make([]int64, len(tl.Ticks))
	for i, tk := range tl.Ticks {
		a.TickT[i] = tk.T
	}
	for i := 1; i < len(a.TickT); i++ {
		a.Intervals = append(a.Intervals, Interval{Start: a.TickT[i-1], End: a.TickT[i]})
	}
	if n := len(a.TickT); n > 1 {
		a.WindowNS = a.TickT[n-1] - a.TickT[0]
	}
	a.buildThreads()
	a.buildProcs()
	a.buildHost()
	a.buildGPUs()
	a.buildObserver()
	return a
}

// observerMinWallNS is the shortest run whose CPU share is reported: over a
// few milliseconds the start-up cost alone reads as most of a core.
const observerMinWallNS = int64(time.Second)

func (a *View) buildObserver() {
	o := a.Timeline.Meta.Observer
	if o == nil {
		return
	}
	cpu := float64(o.CPUUserNS+o.CPUSysNS) / 1e9
	ob := &Observer{CPUSeconds: cpu, ThreadSamples: o.ThreadSamples, ThreadSamplesCarried: o.ThreadSamplesCarried, TickP50MS: float64(o.TickP50NS) / 1e6,
		TickMaxMS: float64(o.TickMaxNS) / 1e6, Overruns: a.Timeline.Counts.Overruns, CPUPctOfCore: math.NaN(), USPerThreadSample: math.NaN(),
		Sched: o.Sched, SchedNotBPF: o.SchedNotBPF, SchedMissed: o.SchedMissed, Waits: o.Waits, WaitsNotBPF: o.WaitsNotBPF}
	if o.WallNS >= observerMinWallNS {
		ob.CPUPctOfCore = cpu / (float64(o.WallNS) / 1e9) * 100
	}
	if o.ThreadSamples > 0 {
		ob.USPerThreadSample = cpu * 1e6 / float64(o.ThreadSamples)
	}
	a.Observer = ob
}

// keyResolver maps a sample's TID or PID at time T to the identity that was
// alive then (ids are reused; identities carry the start time).
type keyResolver[K comparable] struct {
	byID map[int][]span[K]
}

type span[K comparable] struct {
	key         K
	first, last int64
}

func (r *keyResolver[K]) add(id int, k K, first, last int64) {
	if r.byID == nil {
		r.byID = map[int][]span[K]{}
	}
	r.byID[id] = append(r.byID[id], span[K]{k, first, last})
}

func (r *keyResolver[K]) at(id int, t int64) (K, bool) {
	spans := r.byID[id]
	var zero K
	if len(spans) == 1 {
		return spans[0].key, true
	}
	best := -1
	for i, s := range spans {
		if s.first <= t && t <= s.last {
			return s.key, true
		}
		if s.first <= t && (best < 0 || s.first > spans[best].first) {
			best = i
		}
	}
	if best >= 0 {
		return spans[best].key, true
	}
	return zero, false
}

func sortThreads(ts []*Thread) {
	slices.SortFunc(ts, func(x, y *Thread) int {
		if x.PID != y.PID {
			return x.PID - y.PID
		}
		if x.Key.TID != y.Key.TID {
			return x.Key.TID - y.Key.TID
		}
		return int(x.Key.StartTime) - int(y.Key.StartTime)
	})
}

// The live report as a Perfetto timeline: the same timeline, derived view
// and findings the text and JSON reports print, drawn over time.

package render

import (
	"fmt"
	"io"
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// PerfettoStats says what a Perfetto file holds, for tests and the
// command's one-line summary.
type PerfettoStats struct {
	Packets, Tracks, Counters, Slices, Instants int
}

// perfettoRenderer is FormatPerfetto: the timeline of a diagnose or
// report document, or of a trace result.
type perfettoRenderer struct{}

func (perfettoRenderer) Diagnose(w io.Writer, r *Report, _ Options) error {
	_, err := Perfetto(w, r)
	return err
}

func (perfettoRenderer) Trace(w io.Writer, r *TraceReport, _ Options) error {
	_, err := TracePerfetto(w, r)
	return err
}

func (perfettoRenderer) Check(io.Writer, *CheckReport, Options) error {
	return fmt.Errorf("perfetto: a check report has no timeline")
}

// Thread-state slice names: what the thread did for most of an interval.
const (
	stateRunning = "running"
	stateWaiting = "waiting for a CPU"
)

// Perfetto writes the report's timeline as a Perfetto trace: per GPU,
// counters for utilisation, SM clock, power and PCIe throughput; per
// process, counters for CPU, USS and descriptors; per thread, a track of its
// state as slices and its CPU share as a counter; instants for the verdict,
// the findings, the kernel log lines about the job and the processes' and
// threads' starts and exits. r must come from Build (it carries the view).
func Perfetto(w io.Writer, r *Report) (PerfettoStats, error) {
	if r.View == nil || r.View.Timeline == nil {
		return PerfettoStats{}, fmt.Errorf("perfetto: the report holds no timeline")
	}
	a := r.View
	tl := a.Timeline
	p := newPFWriter(w)
	var st PerfettoStats

	// Times are ns since boot where the sampler read the uptime, so kernel
	// lines fall where the kernel wrote them; a line before boot+0 (no
	// uptime) moves the origin back so nothing is negative.
	base := tl.Meta.UptimeNS
	for _, e := range r.Events {
		if t := e.AtNS; base+t < 0 {
			base = -t
		}
	}
	at := func(t int64) int64 { return base + t }
	end := int64(0)
	if n := len(a.TickT); n > 0 {
		end = a.TickT[n-1]
	}

	track := func(parent uint64, name string, k trackKind) uint64 {
		st.Tracks++
		return p.track(parent, name, k)
	}
	series := func(parent uint64, name string, unit int, t []int64, v []float64) {
		uuid := track(parent, name, trackKind{counter: true, unit: unit})
		c := counterSeries{p: p, track: uuid}
		for i := range v {
			if i < len(t) {
				c.add(at(t[i]), v[i])
			}
		}
		st.Counters += c.N
	}
	// Interval series hold interval i's value from its start; tick gauges
	// hold the value read at each tick.
	ivT := a.TickT

	// The job's instants (verdict, findings, kernel log) on one track.
	job := track(0, "gpufeed: verdict and findings", trackKind{})
	if v := r.Verdict; v != nil {
		args := []pfArg{strArg("summary", v.Summary), numArg("confidence", v.Confidence)}
		if v.Decision != "" {
			args = append(args, strArg("decision", v.Decision))
		}
		if v.Basis != "" {
			args = append(args, strArg("basis", v.Basis))
		}
		p.instant(at(end), job, "verdict: "+string(v.Class), args)
		st.Instants++
	}
	// Findings are judged over the window: each is marked at its end, with
	// its claim, subject and evidence as arguments.
	for _, f := range r.Findings {
		args := []pfArg{strArg("claim", f.Claim), strArg("severity", f.Severity.String())}
		if f.Subject != "" {
			args = append(args, strArg("subject", f.Subject))
		}
		for i, e := range f.Evidence {
			args = append(args, strArg(fmt.Sprintf("evidence %d", i+1), evidenceLine(e, "", true)))
		}
		if f.Decision != "" {
			args = append(args, strArg("decision", f.Decision))
		}
		p.instant(at(end), job, f.ID, args)
		st.Instants++
	}
	if n := countKernel(r.Events); n > 0 {
		kt := track(0, "kernel log (job and GPUs)", trackKind{})
		for _, e := range r.Events {
			if e.Kind != timeline.EventKernelLog {
				continue
			}
			name := "kernel log"
			if e.KernelKind != "" { // as the judge recognised it
				name = "kernel: " + e.KernelKind
			}
			p.instant(at(e.AtNS), kt, name, []pfArg{strArg("line", e.Text)})
			st.Instants++
		}
	}

	for _, g := range a.GPUs {
		name := fmt.Sprintf("GPU %d", g.Index)
		if g.Info != nil && g.Info.Name != "" {
			name += " (" + g.Info.Name + ")"
		}
		gt := track(0, name, trackKind{})
		series(gt, name+" utilisation %", 0, ivT, g.UtilPct)
		series(gt, name+" SM clock MHz", 0, ivT, g.SMClockMHz)
		series(gt, name+" power W", 0, ivT, g.PowerW)
		series(gt, name+" PCIe TX bytes/s", 0, ivT, g.PCIeTxBps)
		series(gt, name+" PCIe RX bytes/s", 0, ivT, g.PCIeRxBps)
		if g.Lost != "" && g.LostAt < len(a.TickT) {
			p.instant(at(a.TickT[g.LostAt]), gt, "GPU lost", []pfArg{strArg("error", g.Lost)})
			st.Instants++
		}
	}

	for _, pr := range a.Procs {
		comm := ""
		if pr.Info != nil {
			comm = pr.Info.Comm
		}
		label := comm
		if pr.Role != "" {
			label += " [" + pr.Role + "]"
		}
		pt := track(0, label, trackKind{pid: pr.Key.PID})
		series(pt, "CPU % of one core", 0, ivT, pr.CPUPct)
		series(pt, "USS", unitSizeBytes, a.TickT, pr.USSBytes)
		series(pt, "open fds", unitCount, a.TickT, pr.FDs)
		for _, e := range r.Events {
			if e.PID == pr.Key.PID && e.TID == 0 && (e.Kind == timeline.EventProcStart || e.Kind == timeline.EventProcExit) {
				p.instant(at(e.AtNS), pt, e.Kind, textArg(e.Text))
				st.Instants++
			}
		}
		for _, th := range pr.Threads {
			tname := th.Comm
			if th.Role != "" {
				tname += " [" + th.Role + "]"
			}
			tt := track(pt, tname, trackKind{pid: pr.Key.PID, tid: th.Key.TID})
			st.Slices += threadStates(p, tt, th, a, at)
			series(tt, tname+" CPU %", 0, ivT, th.CPUPct)
			for _, e := range r.Events {
				if e.TID == th.Key.TID && e.Kind == timeline.EventThreadExit {
					p.instant(at(e.AtNS), tt, e.Kind, textArg(e.Text))
					st.Instants++
				}
			}
		}
	}
	st.Packets = p.Packets
	return st, p.Close()
}

func textArg(s string) []pfArg {
	if s == "" {
		return nil
	}
	return []pfArg{strArg("text", s)}
}

func countKernel(evs []Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == timeline.EventKernelLog {
			n++
		}
	}
	return n
}

// threadStates writes the thread's state over the window as slices on its
// track, one per run of intervals with the same state, and returns how many.
// An interval's state is the largest of its shares: running (schedstat run
// time), waiting for a CPU (run-queue wait), or off CPU, named by the state
// read at its end: "D" (uninterruptible) or sleeping, with where it waited
// (wchan or syscall, slow tier) when that was read.
func threadStates(p *pfWriter, trk uint64, th *derive.Thread, a *derive.View, at func(int64) int64) int {
	n := 0
	cur, curStart := "", int64(0)
	var curArgs []pfArg
	// The last place the thread was seen waiting (slow tier), and the state
	// it was in then: it names later intervals only while that state lasts.
	var lastBlocked *timeline.Blocked
	var lastState byte
	emit := func(stop int64) {
		if cur != "" && stop > curStart {
			p.slice(at(curStart), at(stop), trk, cur, curArgs)
			n++
		}
		cur = ""
	}
	for i, iv := range a.Intervals {
		s := th.Sample(i + 1)
		run, wait := th.CPUPct[i], th.WaitPct[i]
		if s == nil || math.IsNaN(run) {
			emit(iv.Start)
			lastBlocked = nil
			continue
		}
		if math.IsNaN(wait) {
			wait = 0
		}
		if s.Blocked != nil {
			lastBlocked, lastState = s.Blocked, s.State
		} else if s.State != lastState {
			lastBlocked = nil
		}
		off := 100 - run - wait
		var name string
		var args []pfArg
		switch {
		case run >= wait && run >= off:
			name = stateRunning
		case wait >= off:
			name = stateWaiting
		default:
			if s.State == 'D' {
				name = "D (uninterruptible)"
			} else {
				name = "sleeping"
			}
			if lastBlocked != nil {
				if w := blockedWhere(lastBlocked); w != "" {
					name += " in " + w
				}
				if lastBlocked.On != "" {
					args = []pfArg{strArg("on", lastBlocked.On)}
				}
			}
		}
		if name != cur {
			emit(iv.Start)
			cur, curStart, curArgs = name, iv.Start, args
		}
	}
	if k := len(a.Intervals); k > 0 {
		emit(a.Intervals[k-1].End)
	}
	return n
}

// blockedWhere names where a thread waited: its wait channel, else its
// system call. What it waited on (a futex, a pipe) goes in an argument, so
// that the state names stay few.
func blockedWhere(b *timeline.Blocked) string {
	if b.Wchan != "" && b.Wchan != "0" {
		return b.Wchan
	}
	return b.Syscall
}

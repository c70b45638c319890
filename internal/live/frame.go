package live

import (
	"math"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// HistoryLen is how many intervals of GPU busy share a Frame keeps.
const HistoryLen = 240

// Frame is what the live view shows at one refresh: numbers over the
// intervals since the previous refresh, the GPU's recent history, and the
// verdict over the last window.
type Frame struct {
	Target, GPUSource string
	Elapsed           time.Duration
	// GPUBusy is the job's GPUs' busy share per interval, oldest first
	// (NaN where not read), at most HistoryLen.
	GPUBusy []float64
	// Now* are means over the intervals since the previous refresh (NaN:
	// not measured).
	NowGPU float64
	// Launch names the launch thread ("" when none was found); its shares
	// of the time running, waiting for a CPU and sleeping, in percent.
	Launch                       string
	LaunchRun, LaunchWait, Sleep float64
	// Workers is the number of the job's other threads; WorkersCores their
	// CPU, in cores.
	Workers      int
	WorkersCores float64
	IOWait       float64
	// Verdict over the last window (nil before the first judgement);
	// Window how much it covered; Stale when it is a previous segment's.
	Verdict *finding.Verdict
	Top     *finding.Finding
	Window  time.Duration
	Stale   bool
}

// Tracker turns the updates of Run into frames, keeping the GPU's history.
type Tracker struct {
	history []float64
	// lastEnd is the end of the last interval taken into the history, and
	// segment the window's start it belongs to (a new segment restarts the
	// timeline's clock).
	lastEnd int64
	segment string
}

// Frame makes the frame of u.
func (k *Tracker) Frame(u Update) Frame {
	f := Frame{Target: u.Target, GPUSource: u.GPUSource, Elapsed: u.Elapsed, Stale: u.Stale,
		NowGPU: math.NaN(), LaunchRun: math.NaN(), LaunchWait: math.NaN(), Sleep: math.NaN(), WorkersCores: math.NaN(), IOWait: math.NaN()}
	r := u.Report
	if r == nil {
		return f
	}
	f.Verdict, f.Window = r.Verdict, time.Duration(r.Window.DurationNS)
	if len(r.Findings) > 0 {
		f.Top = &r.Findings[0]
	}
	s := r.Series
	if s == nil || u.Stale {
		f.GPUBusy = append([]float64(nil), k.history...)
		return f
	}
	if r.Window.Started != k.segment {
		k.segment, k.lastEnd = r.Window.Started, math.MinInt64
	}
	var gpu, run, wait, workers, io mean
	for i, iv := range s.Intervals {
		if iv.End <= k.lastEnd {
			continue
		}
		k.history = append(k.history, s.GPUUtil[i])
		gpu.add(s.GPUUtil[i])
		run.add(s.LaunchRun[i])
		wait.add(s.LaunchWait[i])
		workers.add(s.WorkersCPU[i])
		io.add(s.IOWait[i])
	}
	if n := len(s.Intervals); n > 0 {
		k.lastEnd = s.Intervals[n-1].End
	}
	if len(k.history) > HistoryLen {
		k.history = append([]float64(nil), k.history[len(k.history)-HistoryLen:]...)
	}
	f.GPUBusy = append([]float64(nil), k.history...)
	f.NowGPU, f.Launch, f.Workers = gpu.get(), s.Launch, s.Workers
	f.LaunchRun, f.LaunchWait = run.get(), wait.get()
	if !math.IsNaN(f.LaunchRun) {
		f.Sleep = math.Max(0, 100-f.LaunchRun-zeroNaN(f.LaunchWait))
	}
	f.WorkersCores = workers.get() / 100
	if s.Workers == 0 {
		f.WorkersCores = math.NaN()
	}
	f.IOWait = io.get()
	return f
}

type mean struct {
	sum float64
	n   int
}

func (m *mean) add(v float64) {
	if !math.IsNaN(v) {
		m.sum += v
		m.n++
	}
}

func (m mean) get() float64 {
	if m.n == 0 {
		return math.NaN()
	}
	return m.sum / float64(m.n)
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// Sparkline draws values of 0-100 % as block characters, one per value, the
// last width of them; a value not read is a space.
func Sparkline(values []float64, width int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	runes := []rune(blocks)
	if width > 0 && len(values) > width {
		values = values[len(values)-width:]
	}
	out := make([]rune, 0, len(values))
	for _, v := range values {
		if math.IsNaN(v) {
			out = append(out, ' ')
			continue
		}
		i := int(math.Round(math.Max(0, math.Min(100, v)) / 100 * float64(len(runes)-1)))
		out = append(out, runes[i])
	}
	return string(out)
}

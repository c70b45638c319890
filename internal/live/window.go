// Package live judges a job while it is sampled: a sample.Recorder that
// keeps the last part of the timeline (Window), judged every refresh by the
// same path diagnose and report use (diagnose.Judge), so that the live view
// (gpufeed top) and the per-interval stream (diagnose -o jsonl) say what
// diagnose would say of the same window. Nothing here judges on its own.
package live

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// ChannelsEvery is how often the job's processes' device channels (which
// descriptors reach a GPU: what tells a thread waiting on the device from
// one waiting on input) are read again: diagnose reads them once, at the end
// of its window; a live window reads them as it goes.
const ChannelsEvery = 5 * time.Second

// Window is a sample.Recorder that keeps the last Span of the timeline
// being sampled, and calls OnTick after each tick. Every method runs on the
// sampler's goroutine, and so must OnTick and whatever reads the window
// (Timeline, Judge): the process and thread facts it holds are the
// sampler's own, which it updates between ticks.
type Window struct {
	// Span is the window judged.
	Span time.Duration
	// Next, when set, receives everything too (a recording).
	Next sample.Recorder
	// OnTick is called after each tick is kept.
	OnTick func(*Window)
	// FS and SimPaths are where device channels are read (SimPaths: the
	// simulated device's socket, when one is used).
	FS       procfs.FS
	SimPaths []string

	tl           timeline.Timeline
	lastChannels int64
	prober       *procfs.ChannelProber
	nextErr      error
}

// NewWindow returns an empty window of span.
func NewWindow(span time.Duration) *Window {
	return &Window{Span: span, tl: timeline.Timeline{Procs: map[timeline.ProcKey]*timeline.ProcInfo{},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{}}}
}

// Reset forgets everything: a new sampler starts (a new segment).
func (w *Window) Reset() {
	w.tl = timeline.Timeline{Procs: map[timeline.ProcKey]*timeline.ProcInfo{}, Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{}}
	w.lastChannels = 0
}

func (w *Window) next(fn func(sample.Recorder) error) error {
	if w.Next == nil || w.nextErr != nil {
		return nil
	}
	w.nextErr = fn(w.Next)
	return w.nextErr
}

// WriteMeta implements sample.Recorder.
func (w *Window) WriteMeta(m timeline.Meta) error {
	w.tl.Meta = m
	return w.next(func(r sample.Recorder) error { return r.WriteMeta(m) })
}

// WriteDevices implements sample.Recorder.
func (w *Window) WriteDevices(d []gpu.DeviceInfo) error {
	w.tl.Devices = d
	return w.next(func(r sample.Recorder) error { return r.WriteDevices(d) })
}

// WriteProc implements sample.Recorder.
func (w *Window) WriteProc(p *timeline.ProcInfo) error {
	w.tl.Procs[p.Key] = p
	return w.next(func(r sample.Recorder) error { return r.WriteProc(p) })
}

// WriteThread implements sample.Recorder.
func (w *Window) WriteThread(t *timeline.ThreadInfo) error {
	w.tl.Threads[t.Key] = t
	return w.next(func(r sample.Recorder) error { return r.WriteThread(t) })
}

// WriteEvent implements sample.Recorder.
func (w *Window) WriteEvent(e timeline.Event) error {
	w.tl.Events = append(w.tl.Events, e)
	return w.next(func(r sample.Recorder) error { return r.WriteEvent(e) })
}

// WriteTick implements sample.Recorder: the tick is kept, what fell out of
// the window is dropped (memory stays that of one window), and OnTick runs.
func (w *Window) WriteTick(t *timeline.Tick) error {
	w.tl.Ticks = append(w.tl.Ticks, *t)
	err := w.next(func(r sample.Recorder) error { return r.WriteTick(t) })
	w.trim()
	if w.FS.Proc != "" && (w.lastChannels == 0 || t.T-w.lastChannels >= int64(ChannelsEvery)) {
		w.lastChannels = max(t.T, 1)
		w.readChannels(t.T)
	}
	if w.OnTick != nil {
		w.OnTick(w)
	}
	return err
}

// trim keeps the ticks of the last Span (and one before, so that the
// window's first interval is whole), the events since, and the processes
// and threads still alive or seen in it.
func (w *Window) trim() {
	n := len(w.tl.Ticks)
	if n == 0 {
		return
	}
	last := w.tl.Ticks[n-1].T
	from := 0
	for from < n-1 && last-w.tl.Ticks[from+1].T >= int64(w.Span) {
		from++
	}
	if from == 0 {
		return
	}
	// Copy rather than reslice, so the dropped ticks are freed.
	w.tl.Ticks = append([]timeline.Tick(nil), w.tl.Ticks[from:]...)
	start := w.tl.Ticks[0].T
	ev := w.tl.Events[:0]
	for _, e := range w.tl.Events {
		if e.T >= start {
			ev = append(ev, e)
		}
	}
	w.tl.Events = ev
	for k, p := range w.tl.Procs {
		if p.Exited && p.LastSeen < start {
			delete(w.tl.Procs, k)
		}
	}
	for k, t := range w.tl.Threads {
		if t.Exited && t.LastSeen < start {
			delete(w.tl.Threads, k)
		}
	}
}

func (w *Window) readChannels(t int64) {
	if w.prober == nil {
		w.prober = procfs.NewChannelProber(w.FS, w.SimPaths...)
	}
	for _, p := range w.tl.Procs {
		if p.Exited {
			continue
		}
		if res, err := w.prober.Channels(p.Key.PID); err == nil {
			p.DeviceChannels = &timeline.DeviceChannels{T: t, Channels: res.Channels, NotVisible: res.NotVisible}
		}
	}
}

// Ticks is how many ticks the window holds.
func (w *Window) Ticks() int { return len(w.tl.Ticks) }

// Covered is the time from the window's first tick to its last.
func (w *Window) Covered() time.Duration {
	n := len(w.tl.Ticks)
	if n < 2 {
		return 0
	}
	return time.Duration(w.tl.Ticks[n-1].T - w.tl.Ticks[0].T)
}

// Timeline is the window as a timeline of its own: its ticks, the events
// in it, the processes and threads known. The ticks are copied; the facts
// are shared with the sampler (call it from OnTick).
func (w *Window) Timeline() *timeline.Timeline {
	tl := w.tl
	tl.Ticks = append([]timeline.Tick(nil), w.tl.Ticks...)
	tl.Events = append([]timeline.Event(nil), w.tl.Events...)
	tl.Procs = make(map[timeline.ProcKey]*timeline.ProcInfo, len(w.tl.Procs))
	for k, v := range w.tl.Procs {
		tl.Procs[k] = v
	}
	tl.Threads = make(map[timeline.ThreadKey]*timeline.ThreadInfo, len(w.tl.Threads))
	for k, v := range w.tl.Threads {
		tl.Threads[k] = v
	}
	tl.Meta.Duration = timeline.Duration(w.Covered())
	tl.Meta.Ended = ""
	return &tl
}

// Judge judges the window as diagnose judges its own (diagnose.Judge: the
// same rules and classifier), without what diagnose reads once at the end
// of its window (the platform checks, the kernel log, Python stacks). The
// report is the caller's: it holds nothing the sampler changes later (its
// derived view, which does, is dropped).
func (w *Window) Judge() *render.Report {
	r := diagnose.Judge(w.Timeline(), nil)
	r.View = nil
	return r
}

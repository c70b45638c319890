package diagnose

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/kmsg"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile/pyspy"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// EndOfWindow reads, once at the end of a sampling window, what frozen-job
// judgement needs besides the samples: per-process facts (descriptor kinds,
// CUDA use, memory cgroup limits, listening sockets), the kernel log over
// the job's life and, when asked, the Python stacks of its processes.
// Everything read is added to the timeline (and to its recording), so
// `gpufeed report` judges a recording exactly as diagnose judged it live.
// It only reads: what is read is judged later, from the timeline.
type EndOfWindow struct {
	// FS is where /proc and /sys are read.
	FS procfs.FS
	// Kmsg reads the kernel log (its Since is set here from the job's age).
	Kmsg kmsg.Reader
	// PyStacks runs py-spy dump on the job's live Python processes.
	PyStacks bool
	// PySpy runs py-spy (nil: the real command).
	PySpy pyspy.Runner
	// MaxPyStacks bounds the processes dumped: py-spy pauses each while it
	// reads its stacks.
	MaxPyStacks int
}

// EventWriter records events as they are added (timeline.Writer does).
type EventWriter interface {
	WriteEvent(timeline.Event) error
}

// DefaultMaxPyStacks: the trainer and a few ranks or workers are what a
// person reads; dumping 64 DataLoader workers adds nothing.
const DefaultMaxPyStacks = 16

// maxDumpText bounds one dump kept in the timeline.
const maxDumpText = 256 << 10

// Read adds the end-of-window facts and events to tl, writing the events to
// rec when rec is not nil. What could not be read is recorded as events too
// (frozen-job judgement turns them into findings), so a recording judged
// later says the same.
func (cfg EndOfWindow) Read(ctx context.Context, tl *timeline.Timeline, rec EventWriter) {
	var last int64
	if n := len(tl.Ticks); n > 0 {
		last = tl.Ticks[n-1].T
	}
	fillProcFacts(cfg.FS, tl, last)
	add := func(e timeline.Event) {
		tl.Events = append(tl.Events, e)
		if rec != nil {
			_ = rec.WriteEvent(e)
		}
	}

	// The kernel log since the job's oldest process started: a rank killed
	// before gpufeed attached is still there (unless the ring wrapped).
	// With no process of the job seen (it exited before the first read),
	// its start is unknown: read from the window's start, not since boot.
	r := cfg.Kmsg
	since, known := jobStart(tl)
	r.Since = since
	if log, err := r.Read(ctx); err != nil {
		add(timeline.Event{T: last, Kind: timeline.EventKernelLogUnavailable, Text: err.Error()})
	} else {
		for _, e := range kmsg.ToTimeline(log, tl.Meta.Started) {
			if !known && e.T < 0 {
				continue
			}
			add(e)
		}
		if log.Dropped > 0 || log.Truncated || log.Lost > 0 {
			add(timeline.Event{T: last, Kind: timeline.EventKernelLogCapped, Text: fmt.Sprintf(
				"read from %s: %d older records left out (cap), %d overwritten by the kernel before they could be read", log.Source, log.Dropped, log.Lost)})
		}
	}

	if cfg.PyStacks {
		limit := cfg.MaxPyStacks
		if limit <= 0 {
			limit = DefaultMaxPyStacks
		}
		for i, pid := range livePython(tl) {
			if i == limit {
				add(timeline.Event{T: last, Kind: timeline.EventPyStacksError, Text: fmt.Sprintf("dumped the first %d Python processes only", limit)})
				break
			}
			raw, _, err := pyspy.Dump(ctx, pid, cfg.PySpy)
			if errors.Is(err, pyspy.ErrNotInstalled) {
				add(timeline.Event{T: last, Kind: timeline.EventPyStacksError, Text: err.Error()})
				break
			}
			if err != nil {
				add(timeline.Event{T: last, Kind: timeline.EventPyStacksError, PID: pid, Text: err.Error()})
				continue
			}
			if len(raw) > maxDumpText {
				raw = raw[:maxDumpText]
			}
			add(timeline.Event{T: last, Kind: timeline.EventPyStacks, PID: pid, Text: string(raw)})
		}
	}
}

// jobStart is the time since boot at which the job's oldest process
// started; known is false when no process start time was read.
func jobStart(tl *timeline.Timeline) (since time.Duration, known bool) {
	hz := tl.Meta.ClockTick
	if hz <= 0 {
		return 0, false
	}
	var oldest uint64
	for k := range tl.Procs {
		if k.StartTime > 0 && (oldest == 0 || k.StartTime < oldest) {
			oldest = k.StartTime
		}
	}
	return time.Duration(oldest) * time.Second / time.Duration(hz), oldest > 0
}

// livePython lists the job's Python processes not seen to exit, by pid.
func livePython(tl *timeline.Timeline) []int {
	var pids []int
	for k, p := range tl.Procs {
		if !p.Exited && frozen.IsPython(p) {
			pids = append(pids, k.PID)
		}
	}
	sort.Ints(pids)
	return pids
}

package diagnose

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/pysample"
	"github.com/gpufeed/gpufeed/internal/pyspy"
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
	Kmsg kernlog.Reader
	// PyStacks dumps the stacks of the job's live Python processes with
	// the built-in reader (internal/pysample), or with py-spy where the
	// reader cannot read a process (a version it has no layout for) and
	// py-spy is installed.
	PyStacks bool
	// PySpy runs py-spy (nil: the real command).
	PySpy pyspy.Runner
	// Builtin replaces the built-in reader (tests); nil: pystack.
	// MaxPyStacks bounds the processes dumped: py-spy pauses each while it
	// reads its stacks.
	MaxPyStacks int
	Builtin     func(pid int) (profile.Process, error)
}

// dumpStacks reads pid's stacks with the built-in reader, and with py-spy
// where the reader cannot read this interpreter; the text is py-spy's dump
// format either way. A denied read is not retried with py-spy: it needs
// the same privilege.
func dumpStacks(ctx context.Context, cfg EndOfWindow, pid int) ([]byte, error) {
	read := cfg.Builtin
	if read == nil {
		read = func(pid int) (profile.Process, error) {
			t, err := pysample.Open(cfg.FS, pid)
			if err != nil {
				return profile.Process{}, err
			}
			return t.Dump()
		}
	}
	p, err := read(pid)
	if err == nil {
		var sb strings.Builder
		_ = profile.FormatDump(&sb, []profile.Process{p})
		return []byte(sb.String()), nil
	}
	if procfs.IsDenied(err) || procfs.IsVanished(err) {
		return nil, &builtinError{err}
	}
	raw, _, perr := pyspy.Dump(ctx, pid, cfg.PySpy)
	if perr == nil {
		return raw, nil
	}
	if errors.Is(perr, pyspy.ErrNotInstalled) {
		return nil, &builtinError{err} // the reader's reason, not py-spy's absence
	}
	return nil, fmt.Errorf("%v; py-spy: %w", err, perr)
}

// builtinError is why the built-in reader could not read a process.
type builtinError struct{ err error }

func (e *builtinError) Error() string { return e.err.Error() }
func (e *builtinError) Unwrap() error { return e.err }

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
	r.NotBefore = tl.Meta.Started.Add(time.Duration(last)) // a shared read holds the whole window
	if log, err := r.Read(ctx); err != nil {
		add(timeline.Event{T: last, Kind: timeline.EventKernelLogUnavailable, Text: err.Error()})
	} else {
		for _, e := range kernlog.ToTimeline(log, tl.Meta.Started) {
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
			raw, err := dumpStacks(ctx, cfg, pid)
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

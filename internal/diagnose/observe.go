package diagnose

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/pysample"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Observation says how a prepared sampler's window is observed.
type Observation struct {
	// GPU is the source the sampler reads (nil: none); the platform checks
	// at the end of the window read it too.
	GPU gpu.Source
	// EndOfWindow is what is read once the window is over.
	EndOfWindow EndOfWindow
	// Record, when set, is the file the samples are recorded to while they
	// are taken (judge it later with gpufeed report).
	Record string
	// Progress, when set, is told after each tick how far sampling is;
	// ProgressDone once it is over.
	Progress     sample.Progress
	ProgressDone func()
	// Warn, when set, is told what went wrong without stopping the run
	// (the sampler's last error, a recording that could not be finished).
	Warn func(string)
	// Profile, when set, starts the CPU profile as the window starts; what
	// it returns stops it and gives the profile (or says why there is none)
	// once the window is over, and reads its buffers at each tick.
	Profile func() ProfileRun
	// BPF, when set, starts the syscall summary and the CUDA driver probes
	// as the window starts, beside the CPU profile.
	BPF func() BPFStop
	// PySamples, when set, samples the Python stacks of the tree under
	// PySamplesRoot over the window (diagnose --py-stacks).
	PySamples     *pysample.Sampler
	PySamplesRoot int
	// Tap, when set, is given the recorder the samples go to (nil when
	// none) and returns the one the sampler is to use: a live consumer of
	// the window as it is sampled (diagnose -o jsonl) that passes
	// everything on.
	Tap func(next sample.Recorder) sample.Recorder
}

// RecordError says the recording asked for (--record) could not be
// written in full: the run was observed and judged, but the file is cut
// short or empty (a full disk, a quota, an I/O error). It is a failure of
// the command, given after the report.
type RecordError struct {
	Path string
	Err  error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("--record %s: the recording could not be written in full (%v): it is cut short or empty", e.Path, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Observe runs a prepared sampler for its window (recording it when asked),
// adds the facts read once per run (device channels and platform checks,
// then the end-of-window reads), lets finish complete the timeline in
// between, then closes the recording. A nil timeline comes with the error
// that prevented sampling; a timeline with a *RecordError is a run judged
// whose recording could not be written; other problems go to o.Warn.
func Observe(ctx context.Context, s *sample.Sampler, o Observation, finish func(*timeline.Timeline)) (*timeline.Timeline, error) {
	warn := func(format string, args ...any) {
		if o.Warn != nil {
			o.Warn(fmt.Sprintf(format, args...))
		}
	}
	var rec *timeline.Writer
	var recFile *os.File
	if o.Record != "" {
		var err error
		if recFile, err = os.Create(o.Record); err != nil {
			return nil, err
		}
		rec = timeline.NewWriter(recFile)
		s.SetRecorder(rec)
	}
	if o.Tap != nil {
		var next sample.Recorder
		if rec != nil {
			next = rec
		}
		s.SetRecorder(o.Tap(next))
	}
	if o.Progress != nil {
		s.SetProgress(o.Progress)
	}
	var tops chan []profile.PySamples
	stopPy := func() {}
	var pyNote string
	if o.PySamples != nil && o.PySamplesRoot > 0 {
		pctx, cancel := context.WithCancel(ctx)
		stopPy = cancel
		tops = make(chan []profile.PySamples, 1)
		// The window begins once the job's Python processes are open (as
		// the BPF programs are loaded before it): opening one took over
		// 4 s on a loaded host, and a short window then sampled nothing.
		opened := make(chan struct{})
		ps := *o.PySamples
		ps.Opened = func() { close(opened) }
		go func() { tops <- ps.Run(pctx, o.PySamplesRoot) }()
		select {
		case <-opened:
		case <-ctx.Done():
		case <-time.After(PyOpenWait):
			pyNote = fmt.Sprintf("Python stacks: the job's interpreters were still being opened after %v; the window began without them, and samples start once they are open.", PyOpenWait)
		}
	}
	var stopProfile func() *profile.CPUProfile
	if o.Profile != nil {
		run := o.Profile()
		stopProfile = run.Stop
		if run.Drain != nil {
			s.SetTickHook(run.Drain) // no wake-up of the profile's own
		}
	}
	var stopBPF BPFStop
	if o.BPF != nil {
		stopBPF = o.BPF()
	}
	tl, runErr := s.Run(ctx)
	stopPy()
	var bpfNoted []string
	if stopBPF != nil {
		sc, dr := stopBPF()
		if tl != nil {
			tl.Meta.Syscalls, tl.Meta.DriverCalls = sc, dr
			bpfNoted = bpfNotes(sc, dr)
		}
	}
	if stopProfile != nil {
		prof := stopProfile()
		if tl != nil {
			tl.Meta.CPUProfile = prof
			if prof.State == profile.StateUnavailable {
				// First: the first screen shows one note, and this one says
				// which verdicts cannot be told apart without it; the
				// syscall summary's and driver calls' notes matter less.
				tl.Meta.Notes = append(tl.Meta.Notes, "CPU profile not taken: "+prof.Missing+". Without it, "+prof.CannotTell+".")
			}
		}
	}
	if tl != nil {
		tl.Meta.Notes = append(tl.Meta.Notes, bpfNoted...)
		if pyNote != "" {
			tl.Meta.Notes = append(tl.Meta.Notes, pyNote)
		}
	}
	if tops != nil && tl != nil {
		sampled := <-tops
		addPySamples(tl, rec, sampled)
		if len(sampled) == 0 {
			// Asked for and absent: said, so that no finding of where the
			// Python time went reads as nothing to say.
			tl.Meta.Notes = append(tl.Meta.Notes, PyNotSampled)
		}
	}
	if o.ProgressDone != nil {
		o.ProgressDone()
	}
	if tl == nil {
		if recFile != nil {
			recFile.Close()
		}
		return nil, runErr
	}
	var recErr error
	var re *sample.RecordError
	if errors.As(runErr, &re) {
		recErr = re.Err
	} else if runErr != nil {
		warn("warning: %v", runErr)
	}
	readChannelsAndChecks(ctx, tl, o.EndOfWindow.FS, o.GPU)
	if finish != nil {
		finish(tl)
	}
	// What frozen-job judgement reads once at the end: descriptor kinds,
	// CUDA use and memory limits of each process, the kernel log over the
	// job's life, Python stacks when asked. Recorded too, so report judges
	// alike.
	var events EventWriter
	if rec != nil {
		events = rec
	}
	o.EndOfWindow.Read(ctx, tl, events)
	if rec != nil {
		err := rec.Close(tl)
		if cerr := recFile.Close(); err == nil {
			err = cerr
		}
		if recErr == nil {
			recErr = err
		}
	}
	if recErr != nil {
		return tl, &RecordError{Path: o.Record, Err: recErr}
	}
	return tl, nil
}

// PyOpenWait bounds how long the window waits for the job's Python
// processes to be opened (--py-stacks) before it begins.
const PyOpenWait = 20 * time.Second

// PyNotSampled is the note of a window whose Python stacks were asked for
// (--py-stacks) and sampled in no process: without samples there is no
// split of a thread's Python time.
const PyNotSampled = "Python stacks were asked for but no process of the job was sampled during the window, so where its Python time went is not known: " +
	"a process that is not CPython, or whose interpreter cannot be read, is named with its reason in the stacks read at the end; " +
	"one that started during the window, or was still being opened when it ended (opening reads the interpreter's binary and memory, which a loaded host slows), needs a longer --duration."

// addPySamples adds each sampled process's PySamples to the timeline (and its
// recording) at the window's last tick.
func addPySamples(tl *timeline.Timeline, rec *timeline.Writer, tops []profile.PySamples) {
	var last int64
	if n := len(tl.Ticks); n > 0 {
		last = tl.Ticks[n-1].T
	}
	for _, t := range tops {
		text, err := profile.FormatPySamples(t)
		if err != nil {
			continue
		}
		e := timeline.Event{T: last, Kind: timeline.EventPySamples, PID: t.PID, Text: text}
		tl.Events = append(tl.Events, e)
		if rec != nil {
			_ = rec.WriteEvent(e)
		}
	}
}

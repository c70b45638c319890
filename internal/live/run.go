package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sample"
)

// Segment is how long one sampler runs before the next one takes over: a
// sampler keeps every tick of its window, so the live view's memory is that
// of one segment at most. The judged window and the history are carried
// over (the new segment's window refills from its first tick; until it
// holds thresholds.MinWindow the last verdict stays on screen, marked as
// such).
const Segment = 5 * time.Minute

// Options say what to watch.
type Options struct {
	FS procfs.FS
	// PID to attach to, or Command to run (exactly one).
	PID     int
	Command []string
	// CommandStdin and CommandOutput are the launched command's.
	CommandStdin  io.Reader
	CommandOutput io.Writer
	// Interval is the sampling interval; Refresh how often the window is
	// judged and Update called; Span the window judged.
	Interval, Refresh, Span time.Duration
	// OpenGPU opens the GPU source given the target's environment.
	OpenGPU func(targetEnv map[string]string) (gpu.Source, string, error)
	Tool    string
}

// Update is what one refresh shows.
type Update struct {
	// Report is the last window judged (nil before the first judgement).
	Report *render.Report
	// Stale: the report is the previous segment's (the new window holds
	// too little yet).
	Stale bool
	// Elapsed is the time since watching began.
	Elapsed time.Duration
	// Target names what is watched; GPUSource the device source.
	Target, GPUSource string
}

// Ended says how watching ended.
type Ended struct {
	// Why: "target exited", "interrupted".
	Why string
	// ExitCode is a launched command's exit status (nil when attached).
	ExitCode *int
}

// Run watches the target segment after segment until it exits or ctx
// ends, judging the last Span every Refresh and passing it to update (on
// the sampler's goroutine: update must not block).
func Run(ctx context.Context, o Options, update func(Update)) (Ended, error) {
	if (o.PID == 0) == (len(o.Command) == 0) {
		return Ended{}, errors.New("give either a PID to attach to or a command to run")
	}
	var env map[string]string
	pid := o.PID
	var done chan struct{}
	var code int
	if len(o.Command) > 0 {
		env = procfs.FilterEnv([]byte(strings.Join(os.Environ(), "\x00")))
	} else if e, err := o.FS.ReadEnvSettled(o.PID); err == nil {
		env = e
	}
	var src gpu.Source
	srcName := "no GPU source"
	if o.OpenGPU != nil {
		var err error
		if src, srcName, err = o.OpenGPU(env); err != nil {
			return Ended{}, err
		}
		if src != nil {
			defer src.Close()
		}
	}
	var simPaths []string
	if s, ok := src.(interface{ Path() string }); ok {
		simPaths = append(simPaths, s.Path())
	}
	target := fmt.Sprintf("pid %d", pid)
	if len(o.Command) > 0 {
		child := exec.Command(o.Command[0], o.Command[1:]...)
		child.Stdin, child.Stdout, child.Stderr = o.CommandStdin, o.CommandOutput, o.CommandOutput
		if err := child.Start(); err != nil {
			st := &diagnose.StartError{Name: o.Command[0], Err: err, ExitCode: diagnose.ExitNotExecutable}
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				st.ExitCode = diagnose.ExitNotFound
			}
			return Ended{}, st
		}
		pid, done = child.Process.Pid, make(chan struct{})
		go func() {
			code = diagnose.ExitStatus(child.Wait())
			close(done)
		}()
		target = fmt.Sprintf("pid %d: %s", pid, strings.Join(o.Command, " "))
		defer func() {
			if done != nil {
				select {
				case <-done:
				default:
					// gpufeed top started it and is quitting: it is the
					// user's command, ended as a terminal would end it.
					_ = child.Process.Signal(syscall.SIGTERM)
				}
			}
		}()
	}
	if len(o.Command) == 0 {
		target = o.FS.Name(pid) // "pid N (comm)"
	}

	start := time.Now()
	win := NewWindow(o.Span)
	win.FS, win.SimPaths = o.FS, simPaths
	var last *render.Report
	var lastJudged time.Time
	lastSegmentReport := (*render.Report)(nil)
	win.OnTick = func(w *Window) {
		now := time.Now()
		if now.Sub(lastJudged) < o.Refresh-o.Interval/2 {
			return
		}
		lastJudged = now
		u := Update{Elapsed: now.Sub(start), Target: target, GPUSource: srcName}
		if w.Ticks() > 1 {
			last = w.Judge()
		}
		u.Report = last
		if lastSegmentReport != nil && (last == nil || last.Verdict == nil || w.Covered() < o.Span/2) {
			u.Report, u.Stale = lastSegmentReport, true
		}
		update(u)
	}
	for ctx.Err() == nil {
		cfg := sample.Config{FS: o.FS, PID: pid, Interval: o.Interval, Duration: Segment, GPU: src, GPUSource: srcName, Tool: o.Tool,
			Recorder: win}
		if len(o.Command) > 0 {
			cfg.Command, cfg.Launched, cfg.TargetDone = o.Command, true, done
		}
		s, err := sample.New(cfg)
		if err != nil {
			if procfs.IsVanished(err) || (done != nil && isDone(done)) {
				break
			}
			return Ended{}, err
		}
		tl, err := s.Run(ctx)
		if tl == nil {
			return Ended{}, err
		}
		if tl.Meta.Ended == "target exited" {
			break
		}
		if last != nil && last.Verdict != nil {
			lastSegmentReport = last
		}
		win.Reset()
	}
	e := Ended{Why: "target exited"}
	if ctx.Err() != nil {
		e.Why = "interrupted"
	}
	if done != nil {
		select {
		case <-done:
			c := code
			e.ExitCode = &c
		case <-time.After(time.Second):
		}
	}
	return e, nil
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

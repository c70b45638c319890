package diagnose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/pysample"
	"github.com/gpufeed/gpufeed/internal/pyspy"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Options say what gpufeed diagnose watches and how.
type Options struct {
	// FS is where /proc and /sys are read.
	FS procfs.FS
	// PID is the running process to attach to (with its descendants), or
	// Command the one to run and watch from its start: exactly one is set.
	PID     int
	Command []string
	// CommandStdin is the launched command's standard input, CommandOutput
	// where its standard output and error go (nil: nowhere).
	CommandStdin  io.Reader
	CommandOutput io.Writer
	// Interval and Duration are the sampling interval and window.
	Interval, Duration time.Duration
	// OpenGPU opens the GPU source, given the target's allowlisted
	// environment (it may name a simulated device); nil opens none. It
	// returns the source (nil when none is used) and its name or, when
	// none is used, the one line saying why.
	OpenGPU func(targetEnv map[string]string) (gpu.Source, string, error)
	// Kmsg reads the kernel log at the end of the window.
	Kmsg kernlog.Reader
	// PyStacks dumps the job's Python stacks at the end of the window;
	// PySpy runs py-spy (nil: the real command).
	PyStacks bool
	PySpy    pyspy.Runner
	// PyRate is the Python sampling rate over the window with PyStacks
	// (0: pysample.DefaultRate).
	PyRate float64
	// Record, Progress, ProgressDone and Warn are as in Observation.
	Record       string
	Progress     sample.Progress
	ProgressDone func()
	Warn         func(string)
	// Tool names gpufeed and its version in the timeline.
	Tool string
	// Profile is the CPU profile's mode: ProfileAuto, ProfileOn or
	// ProfileOff ("" is off).
	Profile string
	// Sched is where the threads' run time, run-queue wait and switches
	// come from: sample.SchedAuto, SchedBPF or SchedProc ("" is /proc).
	Sched string
	// Tap is as in Observation.
	Tap func(next sample.Recorder) sample.Recorder
	// Signals, when set, are the signals gpufeed was sent (the caller
	// notifies StopSignals, and PassOnSignals with a command): a stop
	// signal ends the window and the report says so; with a command each
	// is passed on to it, until it ends (see terminalDelivered).
	Signals <-chan os.Signal
}

// Result is what one diagnose run produced.
type Result struct {
	Timeline *timeline.Timeline
	Report   *render.Report
	// Command is the launched command (nil when attached to a PID). The
	// report is ready before the command ends: gpufeed only watches, and
	// the command runs to its end (Wait).
	Command *Command
	// RecordErr, when set, says the recording asked for could not be
	// written in full; the report is still whole.
	RecordErr *RecordError
}

// Command is a command diagnose launched.
type Command struct {
	done chan struct{}
	code int
}

// Wait waits for the command to end and returns its exit status as a shell
// gives it: its own code, or 128 plus the signal that killed it.
func (c *Command) Wait() int {
	<-c.done
	return c.code
}

// StartError is a command that could not be run. ExitCode is what a shell
// returns for it (POSIX, "Exit Status for Commands"): 127 when it is not
// found, 126 when it is found but cannot be executed.
type StartError struct {
	Name     string
	Err      error
	ExitCode int
}

func (e *StartError) Error() string {
	if e.ExitCode == ExitNotFound {
		return fmt.Sprintf("cannot run %s: command not found (%v)", e.Name, e.Err)
	}
	return fmt.Sprintf("cannot run %s: not executable (%v)", e.Name, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Shells' statuses for a command that could not be run.
const (
	ExitNotFound      = 127
	ExitNotExecutable = 126
)

// EndedEarlyError says a launched command ended before it could be
// watched: there is no report, only its exit status.
type EndedEarlyError struct {
	Err      error
	ExitCode int
}

func (e *EndedEarlyError) Error() string { return e.Err.Error() }
func (e *EndedEarlyError) Unwrap() error { return e.Err }

// Run watches the target for the window, reads what is read once at its
// end, and judges it. An attached PID that is a kernel thread or does not
// exist is an error; a zombie is judged as far as it can be (how it ended,
// the kernel log since it started, the platform). A command that cannot be
// started is a *StartError; one that ends before it can be watched an
// *EndedEarlyError.
func Run(ctx context.Context, o Options) (*Result, error) {
	if (o.PID == 0) == (len(o.Command) == 0) {
		return nil, errors.New("give either a PID to attach to or a command to run")
	}
	fsys := o.FS
	// The target's allowlisted environment chooses the GPU source.
	var targetEnv map[string]string
	var notes []string
	var zombie *procfs.Task
	if len(o.Command) > 0 {
		targetEnv = procfs.FilterEnv([]byte(strings.Join(os.Environ(), "\x00")))
	} else {
		task, err := fsys.Describe(o.PID)
		switch {
		case procfs.IsVanished(err):
			return nil, fmt.Errorf("no process %d under %s", o.PID, fsys.Proc)
		case err != nil && procfs.AsDenied(err) == nil:
			return nil, err
		case task.KernelThread:
			return nil, task.KernelThreadError()
		case task.Zombie:
			// Nothing of it runs; what is left (how it ended, the kernel
			// log since it started, the platform) is still read and judged.
			zombie = &task
			notes = append(notes, task.ZombieNote(fsys.Name(task.PPID)))
		}
		// A zombie, or a process whose main thread exited, has no
		// environment left to read: the GPU source is then gpufeed's own.
		if targetEnv, err = fsys.ReadEnvSettled(o.PID); err != nil && procfs.AsDenied(err) == nil && !procfs.IsVanished(err) {
			return nil, err
		}
	}
	var src gpu.Source
	var srcName string
	if o.OpenGPU != nil {
		var err error
		if src, srcName, err = o.OpenGPU(targetEnv); err != nil {
			return nil, err
		}
	}
	if src != nil {
		defer src.Close()
	}

	cfg := sample.Config{FS: fsys, PID: o.PID, Interval: o.Interval, Duration: o.Duration,
		GPU: src, GPUSource: srcName, Tool: o.Tool, Sched: o.Sched,
		// Judged whole at its end, the window is held in memory: bounded.
		MaxSamples: sample.DefaultMaxSamples, MinIntervals: thresholds.MinIntervals, Warn: o.Warn}
	ctx, stopWindow := context.WithCancel(ctx)
	defer stopWindow()
	relay := &signalRelay{}
	var cmd *Command
	var child *exec.Cmd
	var held *hold
	if len(o.Command) > 0 {
		command := exec.Command(o.Command[0], o.Command[1:]...)
		command.Stdin, command.Stdout, command.Stderr = o.CommandStdin, o.CommandOutput, o.CommandOutput
		// Held before its execve until the window's first reading
		// (hold.go): its start-up is in the window however long gpufeed
		// takes to get ready.
		var err error
		if child, held, err = startHeld(command); err != nil {
			return nil, startError(o.Command[0], err)
		}
		// gpufeed's own failure before the window (a WatchError) lets it
		// go, to run unwatched as it would have without gpufeed; a refusal
		// of what was asked cancels it below: it never runs.
		defer held.release()
		cfg.Release, cfg.Held = held.release, held.held
		cmd = &Command{done: make(chan struct{})}
		go func() {
			cmd.code = ExitStatus(child.Wait())
			close(cmd.done)
		}()
		if o.Signals != nil {
			// Passed on for the command's whole life, past the report.
			go relay.run(o.Signals, child.Process, cmd.done, stopWindow)
		}
		cfg.PID, cfg.Command, cfg.Launched, cfg.TargetDone = child.Process.Pid, o.Command, true, cmd.done
	}

	if cmd == nil && o.Signals != nil {
		done := make(chan struct{})
		defer close(done)
		go relay.run(o.Signals, nil, done, stopWindow)
	}
	s, err := sample.New(cfg)
	if err != nil {
		var own *sample.OutOfFilesError
		if cmd != nil && errors.As(err, &own) {
			return nil, &WatchError{Err: err, Command: cmd} // gpufeed's failure; the command goes on
		}
		if cmd != nil {
			held.cancel(child.Process)
			return nil, &EndedEarlyError{Err: err, ExitCode: cmd.Wait()} // it ended before it could be watched
		}
		return nil, err
	}
	// Checked before the CPU profile starts: a refusal leaves nothing running.
	startBPF, err := bpfStarter(fsys, o.Profile, cfg.PID)
	if err != nil {
		if cmd != nil {
			held.cancel(child.Process)
			cmd.Wait()
		}
		return nil, fmt.Errorf("--profile on: %w", err)
	}
	startProfile, err := profileStarter(fsys, o.Profile, cfg.PID)
	if err != nil {
		if cmd != nil {
			held.cancel(child.Process)
			cmd.Wait()
		}
		return nil, fmt.Errorf("--profile on: %w", err)
	}
	obs := Observation{GPU: src, Record: o.Record, Progress: o.Progress, ProgressDone: o.ProgressDone, Warn: o.Warn, Tap: o.Tap,
		EndOfWindow: EndOfWindow{FS: fsys, Kmsg: o.Kmsg, PyStacks: o.PyStacks, PySpy: o.PySpy}, Profile: startProfile, BPF: startBPF}
	if o.PyStacks {
		obs.PySamples, obs.PySamplesRoot = &pysample.Sampler{FS: fsys, Rate: o.PyRate}, cfg.PID
	}
	tl, err := Observe(ctx, s, obs, func(tl *timeline.Timeline) {
		tl.Meta.Notes = append(tl.Meta.Notes, notes...)
		if n := held.note(); n != "" {
			tl.Meta.Notes = append(tl.Meta.Notes, n)
		}
		if st := relay.first(); st != nil {
			if tl.Meta.Ended == "interrupted" {
				tl.Meta.Ended = "stopped by " + signalName(st.Signal)
			}
			tl.Meta.Notes = append([]string{st.note(tl.Meta.Started, cmd != nil)}, tl.Meta.Notes...)
		}
		if zombie != nil && zombie.HasExit {
			code := zombie.ShellStatus()
			tl.Meta.Target.ExitCode = &code
		}
		if cmd == nil {
			return
		}
		if tl.Meta.Ended == "target exited" {
			<-cmd.done // the tree is gone; the reaper is about to report
		}
		select {
		case <-cmd.done:
			code := cmd.code
			tl.Meta.Target.ExitCode = &code
		default:
		}
	})

	if tl == nil {
		var se *StartError
		if cmd != nil && errors.As(err, &se) {
			cmd.Wait() // the held child that could not exec the command
			return nil, se
		}
		if cmd != nil {
			return nil, &WatchError{Err: err, Command: cmd}
		}
		return nil, err
	}
	res := &Result{Timeline: tl, Report: Judge(tl, nil), Command: cmd}
	errors.As(err, &res.RecordErr)
	return res, nil
}

// WatchError says the watch of a launched command failed after it started
// (gpufeed ran out of descriptors, /proc could not be read): there is no
// report, and the command goes on; Command is there to wait for it.
type WatchError struct {
	Err     error
	Command *Command
}

func (e *WatchError) Error() string { return e.Err.Error() }
func (e *WatchError) Unwrap() error { return e.Err }

// startError says why a command could not be started, with the status a
// shell would give: 127 when it is not found, 126 when it is found but
// cannot be run (no execute permission, a directory, not a program this
// kernel runs).
func startError(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &StartError{Name: name, Err: err, ExitCode: ExitNotFound}
	}
	return &StartError{Name: name, Err: err, ExitCode: ExitNotExecutable}
}

// ExitStatus maps a command's end (what Wait returned) to a shell-style
// exit status: its own code, or 128+signal when a signal killed it.
func ExitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

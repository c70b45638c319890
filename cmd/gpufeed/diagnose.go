package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/gpusource"
	"github.com/gpufeed/gpufeed/internal/gpu/nvml"
	"github.com/gpufeed/gpufeed/internal/kmsg"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
	"github.com/gpufeed/gpufeed/internal/triage"
)

func init() { subcommands = append(subcommands, newDiagnoseCmd) }

// openGPU resolves --device (auto|none|nvml|sim:PATH) into a source and its
// name, or, when no source is used, the one line saying why; an error is
// kept for a device that was asked for and cannot be opened. targetEnv is
// the target's allowlisted environment (GPUFEED_SIMDEV selects the simulated
// device under auto); procRoot is --proc-root, through which NVML's PIDs
// (the host's) are mapped to the processes gpufeed samples.
func openGPU(spec string, targetEnv map[string]string, procRoot string) (gpu.Source, string, error) {
	return gpusource.OpenWith(spec, targetEnv, gpusource.Options{ProcRoot: procRoot, OpenNVML: openNVML})
}

// openNVML opens NVML for the NVML source (nil: the system's library); tests
// replace it with a fake host.
var openNVML func(nvml.Options) (gpu.Source, error)

type diagnoseOpts struct {
	pid      int
	duration time.Duration
	interval time.Duration
	format   string
	record   string
	procRoot string
	sysRoot  string
	device   string
	kmsgPath string
	pyStacks bool
	// cmdOutput is where a launched command's stdout and stderr go ("":
	// gpufeed's stderr; stdout is the report's).
	cmdOutput string
}

func newDiagnoseCmd() *cobra.Command {
	var o diagnoseOpts
	cmd := &cobra.Command{
		Use:   "diagnose (--pid PID | [flags] -- COMMAND [ARGS...])",
		Short: "Watch a running job (or run one) and say what starves the GPU",
		Long: `diagnose samples a job for a window: the target process and all its
descendants (DataLoader workers, torchrun ranks), every thread of each, the
host and the GPUs, then prints the report.

  gpufeed diagnose --pid 27431
  gpufeed diagnose --duration 30s -- python3 train.py --lr 3e-4

With a command, diagnose runs it, watches it and exits with the command's own
exit status (127 when it is not found, 126 when it cannot be executed); if the
command ends before --duration the report covers what was seen. Standard
output is the report's: the command's output goes to standard error, or to
--cmd-output FILE. gpufeed only reads: it never changes the job it watches.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.pid == 0) == (len(args) == 0) {
				return errors.New("give either --pid PID or -- COMMAND [ARGS...]")
			}
			if o.pid < 0 {
				return fmt.Errorf("--pid %d: want a process id", o.pid)
			}
			if o.cmdOutput != "" && len(args) == 0 {
				return errors.New("--cmd-output is where a launched command's output goes: give -- COMMAND [ARGS...], not --pid")
			}
			if err := checkFormat(o.format); err != nil {
				return err
			}
			if err := checkWindow(o.duration, o.interval); err != nil {
				return err
			}
			return runDiagnose(cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.pid, "pid", 0, "attach to this running process (and its descendants)")
	f.DurationVar(&o.duration, "duration", sample.DefaultDuration, "sampling window")
	f.DurationVar(&o.interval, "interval", sample.DefaultInterval, "per-thread sampling interval")
	f.StringVarP(&o.format, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.record, "record", "", "also save the raw samples to `FILE` (judge it later with gpufeed report)")
	f.StringVar(&o.procRoot, "proc-root", procfs.DefaultProc, "where procfs is mounted (e.g. /host/proc in a container)")
	f.StringVar(&o.sysRoot, "sys-root", procfs.DefaultSys, "where sysfs is mounted")
	f.StringVar(&o.device, "device", "auto", "GPU source: auto, none, nvml or sim:PATH")
	f.StringVar(&o.kmsgPath, "kmsg", kmsg.DefaultPath, "the kernel log device (falls back to dmesg, then journalctl -k)")
	f.StringVar(&o.cmdOutput, "cmd-output", "", "write the launched command's stdout and stderr to `FILE` (default: gpufeed's stderr; stdout is the report's)")
	f.BoolVar(&o.pyStacks, "py-stacks", false, "at the end of the window, dump every Python thread's stack and the GIL holder with py-spy (needs py-spy installed)")
	return cmd
}

func runDiagnose(cmd *cobra.Command, o diagnoseOpts, args []string) error {
	fs, err := procfs.NewFS(o.procRoot, o.sysRoot)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The target's allowlisted environment chooses the GPU source under auto.
	var targetEnv map[string]string
	var notes []string
	var zombie *procfs.Task
	if len(args) > 0 {
		targetEnv = procfs.FilterEnv([]byte(strings.Join(os.Environ(), "\x00")))
	} else {
		task, err := fs.Describe(o.pid)
		switch {
		case procfs.IsVanished(err):
			return fmt.Errorf("no process %d under %s", o.pid, fs.Proc)
		case err != nil && procfs.AsDenied(err) == nil:
			return err
		case task.KernelThread:
			return task.KernelThreadError()
		case task.Zombie:
			// Nothing of it runs; what is left (how it ended, the kernel
			// log since it started, the platform) is still read and judged.
			zombie = &task
			notes = append(notes, task.ZombieNote(fs.Name(task.PPID)))
		}
		// A zombie, or a process whose main thread exited, has no
		// environment left to read: the GPU source is then gpufeed's own.
		if targetEnv, err = fs.ReadEnv(o.pid); err != nil && procfs.AsDenied(err) == nil && !procfs.IsVanished(err) {
			return err
		}
	}
	src, srcName, err := openGPU(o.device, targetEnv, fs.Proc)
	if err != nil {
		return fmt.Errorf("--device %s: %w", o.device, err)
	}
	if src != nil {
		defer src.Close()
	}

	cfg := sample.Config{FS: fs, PID: o.pid, Interval: o.interval, Duration: o.duration,
		GPU: src, GPUSource: srcName, Tool: "gpufeed " + version}

	var child *exec.Cmd
	var childDone chan struct{}
	var childCode int
	if len(args) > 0 {
		child = exec.Command(args[0], args[1:]...)
		// Standard output is the report's: the command writes elsewhere.
		child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stderr, os.Stderr
		if o.cmdOutput != "" {
			out, err := os.Create(o.cmdOutput)
			if err != nil {
				return fmt.Errorf("--cmd-output: %w", err)
			}
			defer out.Close()
			child.Stdout, child.Stderr = out, out
		}
		if err := child.Start(); err != nil {
			return startFailure(args[0], err)
		}
		childDone = make(chan struct{})
		go func() {
			childCode = exitStatus(child.Wait())
			close(childDone)
		}()
		cfg.PID, cfg.Command, cfg.Launched, cfg.TargetDone = child.Process.Pid, args, true, childDone
	}

	s, err := sample.New(cfg)
	if err != nil {
		if child != nil {
			<-childDone // it ended before it could be watched
			warn("%v", err)
			return exitCode(childCode)
		}
		return err
	}
	tc := triage.Config{FS: fs, Kmsg: kmsg.Reader{Path: o.kmsgPath}, PyStacks: o.pyStacks}
	tl, err := observe(ctx, s, fs, src, tc, o.record, func(tl *timeline.Timeline) {
		tl.Meta.Notes = append(tl.Meta.Notes, notes...)
		if zombie != nil && zombie.HasExit {
			code := zombie.ShellStatus()
			tl.Meta.Target.ExitCode = &code
		}
		if child == nil {
			return
		}
		if tl.Meta.Ended == "target exited" {
			<-childDone // the tree is gone; the reaper is about to report
		}
		select {
		case <-childDone:
			code := childCode
			tl.Meta.Target.ExitCode = &code
		default:
		}
	})
	if tl == nil {
		return err
	}
	if err := writeReport(cmd.OutOrStdout(), judgeTimeline(tl, nil), o.format); err != nil {
		return err
	}
	if child != nil {
		<-childDone // gpufeed only watches: the command runs to its end
		return exitCode(childCode)
	}
	return nil
}

// observe runs a prepared sampler for its window (recording to record when
// set, with a progress line on a terminal), adds the facts read once per run
// (afterWindow, frozen-job triage's end of window), lets finish complete the
// timeline, then closes the recording. A nil timeline comes with the error
// that prevented sampling; other problems are warnings on stderr.
func observe(ctx context.Context, s *sample.Sampler, fs procfs.FS, src gpu.Source, tc triage.Config, record string, finish func(*timeline.Timeline)) (*timeline.Timeline, error) {
	var rec *timeline.Writer
	var recFile *os.File
	if record != "" {
		var err error
		if recFile, err = os.Create(record); err != nil {
			return nil, err
		}
		rec = timeline.NewWriter(recFile)
		s.SetRecorder(rec)
	}
	if isTerminal(os.Stderr) {
		s.SetProgress(progress)
	}
	tl, runErr := s.Run(ctx)
	if isTerminal(os.Stderr) {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if tl == nil {
		if recFile != nil {
			recFile.Close()
		}
		return nil, runErr
	}
	if runErr != nil {
		warn("warning: %v", runErr)
	}
	afterWindow(ctx, tl, fs, src)
	if finish != nil {
		finish(tl)
	}
	// What frozen-job triage reads once at the end: descriptor kinds, CUDA
	// use and memory limits of each process, the kernel log over the job's
	// life, Python stacks when asked. Recorded too, so report judges alike.
	var events triage.EventWriter
	if rec != nil {
		events = rec
	}
	triage.EndOfWindow(ctx, tc, tl, events)
	if rec != nil {
		err := rec.Close(tl)
		if cerr := recFile.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			warn("warning: recording %s: %v", record, err)
		}
	}
	return tl, nil
}

// Shells' statuses for a command that could not be run (POSIX, "Exit
// Status for Commands"): not found, or found but not executable.
const (
	exitNotFound      = 127
	exitNotExecutable = 126
)

// startFailure says why a command could not be started and exits as a shell
// would: 127 when it is not found, 126 when it is found but cannot be run
// (no execute permission, a directory, not a program this kernel runs).
func startFailure(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		warn("cannot run %s: command not found (%v)", name, err)
		return exitCode(exitNotFound)
	}
	warn("cannot run %s: not executable (%v)", name, err)
	return exitCode(exitNotExecutable)
}

// MinInterval is the shortest --interval: user and system times advance in
// USER_HZ ticks (10 ms, fixed at 100 Hz on every architecture Linux
// exposes), so below it two readings of a thread's stat cannot differ by
// more than one tick, and the observer's cost grows with nothing to show
// for it (a 1 us interval took more than a core).
const MinInterval = 10 * time.Millisecond

// checkWindow bounds --duration and --interval: both positive, the interval
// at least MinInterval and no longer than the window (one interval is the
// least a rate needs).
func checkWindow(duration, interval time.Duration) error {
	switch {
	case duration <= 0:
		return fmt.Errorf("--duration %v: want a positive window (e.g. 10s)", duration)
	case interval < MinInterval:
		return fmt.Errorf("--interval %v: want at least %v (CPU times advance in 10 ms clock ticks; shorter intervals cost CPU and show nothing more)", interval, MinInterval)
	case interval > duration:
		return fmt.Errorf("--interval %v is longer than --duration %v: the window must hold at least one interval (gpufeed judges a window of at least 20 intervals)", interval, duration)
	}
	return nil
}

// warn writes a line on stderr, with text from outside (names, paths,
// messages of the target's files) escaped for the terminal.
func warn(format string, args ...any) {
	fmt.Fprintln(os.Stderr, "gpufeed: "+safetext.Escape(fmt.Sprintf(format, args...)))
}

// exitStatus maps a command's end to a shell-style exit status: its own
// code, or 128+signal when a signal killed it.
func exitStatus(err error) int {
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

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func progress(elapsed, window time.Duration, procs, threads int) {
	fmt.Fprintf(os.Stderr, "\r\033[Kgpufeed: sampling %.1f/%.1f s: %d processes, %d threads",
		elapsed.Seconds(), window.Seconds(), procs, threads)
}

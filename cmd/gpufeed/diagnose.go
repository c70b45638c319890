package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/gpusource"
	"github.com/gpufeed/gpufeed/internal/gpu/nvml"
	"github.com/gpufeed/gpufeed/internal/kmsg"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/sample"
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
	opts := diagnose.Options{FS: fs, PID: o.pid, Command: args, Interval: o.interval, Duration: o.duration,
		OpenGPU: func(env map[string]string) (gpu.Source, string, error) {
			src, name, err := openGPU(o.device, env, fs.Proc)
			if err != nil {
				return nil, "", fmt.Errorf("--device %s: %w", o.device, err)
			}
			return src, name, nil
		},
		Kmsg: kmsg.Reader{Path: o.kmsgPath}, PyStacks: o.pyStacks, Record: o.record, Warn: func(m string) { warn("%s", m) },
		Tool: "gpufeed " + version}
	if len(args) > 0 {
		// Standard output is the report's: the command writes elsewhere.
		opts.CommandStdin, opts.CommandOutput = os.Stdin, os.Stderr
		if o.cmdOutput != "" {
			out, err := os.Create(o.cmdOutput)
			if err != nil {
				return fmt.Errorf("--cmd-output: %w", err)
			}
			defer out.Close()
			opts.CommandOutput = out
		}
	}
	if isTerminal(os.Stderr) {
		opts.Progress, opts.ProgressDone = progress, progressDone
	}
	res, err := diagnose.Run(ctx, opts)
	var start *diagnose.StartError
	var early *diagnose.EndedEarlyError
	switch {
	case errors.As(err, &start):
		warn("%v", start)
		return exitCode(start.ExitCode)
	case errors.As(err, &early):
		warn("%v", early)
		return exitCode(early.ExitCode)
	case err != nil:
		return err
	}
	if err := writeReport(cmd.OutOrStdout(), res.Report, o.format); err != nil {
		return err
	}
	if res.Command != nil {
		// gpufeed only watches: the command runs to its end.
		return exitCode(res.Command.Wait())
	}
	return nil
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

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func progress(elapsed, window time.Duration, procs, threads int) {
	fmt.Fprintf(os.Stderr, "\r\033[Kgpufeed: sampling %.1f/%.1f s: %d processes, %d threads",
		elapsed.Seconds(), window.Seconds(), procs, threads)
}

// progressDone clears the progress line.
func progressDone() { fmt.Fprint(os.Stderr, "\r\033[K") }

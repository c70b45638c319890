package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpusource"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/live"
	"github.com/gpufeed/gpufeed/internal/nvml"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/sample"
)

func init() { subcommands = append(subcommands, newDiagnoseCmd) }

// openGPU resolves --device (auto|none|nvml|sim:PATH) into a source and its
// name, or, when no source is used, the one line saying why; an error is
// kept for a device that was asked for and cannot be opened. targetEnv is
// the target's allowlisted environment (GPUFEED_SIMDEV selects the simulated
// device under auto); procRoot is --root's proc, through which NVML's PIDs
// (the host's) are mapped to the processes gpufeed samples.
func openGPU(spec string, targetEnv map[string]string, procRoot string) (gpu.Source, string, error) {
	return gpusource.OpenWith(spec, targetEnv, gpusource.Options{ProcRoot: procRoot, OpenNVML: openNVML})
}

// openNVML opens NVML for the NVML source (nil: the system's library); tests
// replace it with a fake host.
var openNVML func(nvml.Options) (gpu.Source, error)

type diagnoseOpts struct {
	pid      pidValue
	duration time.Duration
	interval time.Duration
	out      outputFlags
	record   string
	perfetto string
	// root is --root (the host's / seen from a container); procRoot and
	// sysRoot the deprecated --proc-root and --sys-root, which name /proc
	// and /sys themselves.
	root     string
	procRoot string
	sysRoot  string
	device   string
	kmsgPath string
	pyStacks bool
	profile  string
	sched    string
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

A window shorter than ` + thresholds.MinWindow.String() + ` or holding fewer than ` + fmt.Sprint(thresholds.MinIntervals) + ` intervals cannot give a
verdict and is refused before anything runs, as is a --pid that names no
process.

With a command, diagnose runs it, watches it and exits with the command's own
exit status (its code; 128+N when signal N ended it; 127 when it is not
found, 126 when it cannot be executed), so wrapping a job in gpufeed never
changes its outcome for a scheduler or a CI job; gpufeed's own failure there
exits 125. If the command ends before --duration the report covers what was
seen. Standard output is the report's: the command's output goes to standard
error, or to --cmd-output FILE. gpufeed only reads: it never changes the job
it watches.

SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to gpufeed are
passed on to the command (as timeout(1) does), except a terminal's Ctrl-C,
Ctrl-\ and hang-up, which reach the command already; the first four end the
window, and the report says which signal stopped the run and when.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.pid == 0) == (len(args) == 0) {
				return usagef("give either --pid PID or -- COMMAND [ARGS...]")
			}
			if err := gpusource.CheckSpec(o.device); err != nil {
				return asUsage(err)
			}
			if o.cmdOutput != "" && len(args) == 0 {
				return usagef("--cmd-output is where a launched command's output goes: give -- COMMAND [ARGS...], not --pid")
			}
			if err := checkWindow(o.duration, o.interval); err != nil {
				return err
			}
			return runDiagnose(cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.Var(&o.pid, "pid", "attach to the running process `PID` (and its descendants)")
	addDurationFlag(f, &o.duration, "duration", sample.DefaultDuration, "how long to observe (the window holds at most 2,000,000 thread samples: on a large job a long window ends there, says so, and names the --interval that holds it all)")
	addDurationFlag(f, &o.interval, "interval", sample.DefaultInterval, "per-thread sampling interval")
	o.out.add(cmd, liveFormats)
	addPerfettoFlag(f, &o.perfetto)
	f.StringVar(&o.record, "record", "", "also save the raw samples to `FILE` (judge it later with gpufeed report)")
	addRootFlag(f, &o.root)
	deprecatedAlias(f, stringValue(&o.procRoot), "proc-root", "use --root DIR, which reads DIR/proc and DIR/sys (e.g. --root /host)")
	deprecatedAlias(f, stringValue(&o.sysRoot), "sys-root", "use --root DIR, which reads DIR/proc and DIR/sys (e.g. --root /host)")
	f.StringVar(&o.device, "device", "auto", "GPU source: auto, none, nvml or sim:PATH")
	f.StringVar(&o.kmsgPath, "kmsg", kernlog.DefaultPath, "the kernel log device (under --root DIR: DIR/dev/kmsg; falls back to dmesg, then journalctl -k)")
	f.StringVar(&o.cmdOutput, "cmd-output", "", "write the launched command's stdout and stderr to `FILE` (default: gpufeed's stderr; stdout is the report's)")
	f.StringVar(&o.profile, "profile", diagnose.ProfileAuto, "CPU profile of the job's threads (where their CPU goes: CUDA launches, syncs, the interpreter, decoding), their syscalls and CUDA driver calls (eBPF): auto (where allowed; otherwise says what is missing), on (fail if not allowed) or off")
	f.StringVar(&o.sched, "sched", schedDefault(), "where the threads' run time, run-queue wait and context switches come from: auto (the default: the kernel's own counters, read for all threads at once by an eBPF task iterator, where allowed; otherwise /proc, and -v says why), bpf (fail if not allowed) or proc (/proc per thread); GPUFEED_SCHED sets the default")
	f.BoolVar(&o.pyStacks, "py-stacks", false, "read every Python thread's stack and the GIL holder (built-in CPython 3.8-3.13 reader; py-spy for other versions where installed; needs CAP_SYS_PTRACE for another user's process)")
	return cmd
}

func runDiagnose(cmd *cobra.Command, o diagnoseOpts, args []string) error {
	fs, err := openRoot(o.root, o.procRoot, o.sysRoot)
	if err != nil {
		return err
	}
	if o.root != "" && !cmd.Flags().Changed("kmsg") {
		o.kmsgPath = agentcmd.UnderRoot(o.root).Kmsg // the host's kernel log, as the agent reads it
	}
	// What cannot succeed fails now, before the window starts.
	if o.pid > 0 {
		if err := checkTarget(fs, int(o.pid)); err != nil {
			return err
		}
	}
	format, err := o.out.parse()
	if err != nil {
		return err
	}
	if err := checkProbeModes(fs, o.profile, o.sched); err != nil {
		return err
	}
	if err := checkPerfetto(o.perfetto); err != nil {
		return err
	}
	if err := checkOutputFile("--record", o.record); err != nil {
		return err
	}
	// A stop signal ends the window (the report of what was seen follows);
	// with a command, every signal here is passed on to it for its whole
	// life (diagnose.StopSignals, PassOnSignals).
	sigs := make(chan os.Signal, 8)
	caught := slices.Clone(diagnose.StopSignals)
	if len(args) > 0 {
		caught = append(caught, diagnose.PassOnSignals...)
	}
	// A signal ignored when gpufeed started stays ignored, for gpufeed and
	// the command it starts (nohup's SIGHUP, a shell's SIGINT and SIGQUIT
	// for a background job): catching it would hand the command a default
	// action its caller turned off.
	caught = slices.DeleteFunc(caught, signal.Ignored)
	signal.Notify(sigs, caught...)
	defer signal.Stop(sigs)
	ctx := cmd.Context()
	var stream *live.Stream
	var win *live.Window
	opts := diagnose.Options{FS: fs, PID: int(o.pid), Command: args, Interval: o.interval, Duration: o.duration,
		OpenGPU: func(env map[string]string) (gpu.Source, string, error) {
			src, name, err := openGPU(o.device, env, fs.Proc)
			if err != nil {
				return nil, "", fmt.Errorf("--device %s: %w", o.device, err)
			}
			if s, ok := src.(interface{ Path() string }); ok && win != nil {
				win.SimPaths = []string{s.Path()}
			}
			return src, name, nil
		},
		Kmsg: kernlog.Reader{Path: o.kmsgPath}, PyStacks: o.pyStacks, Profile: o.profile, Sched: o.sched, Record: o.record, Warn: func(m string) { warn("%s", m) },
		Tool: "gpufeed " + version, Signals: sigs}
	if len(args) > 0 {
		// Standard output is the report's: the command writes elsewhere.
		opts.CommandStdin, opts.CommandOutput = os.Stdin, os.Stderr
		if o.cmdOutput != "" {
			out, err := os.Create(o.cmdOutput)
			if err != nil {
				return usagef("--cmd-output: %w", err)
			}
			defer out.Close()
			opts.CommandOutput = out
		}
	}
	if format == render.FormatJSONL {
		opts.Tap, stream, win = jsonlTap(cmd.OutOrStdout(), fs, o.duration)
	} else if isTerminal(os.Stderr) {
		opts.Progress, opts.ProgressDone = progress, progressDone
	}
	res, err := diagnose.Run(ctx, opts)
	var start *diagnose.StartError
	var early *diagnose.EndedEarlyError
	var watch *diagnose.WatchError
	switch {
	case errors.As(err, &watch):
		// gpufeed failed; the command did not: it runs to its end, and the
		// wrapper ends with it.
		warn("%v", watch.Err)
		warn("the command goes on unwatched: gpufeed waits for it to end")
		return commandEnd(watch.Command, []error{errors.New("no report: gpufeed could not watch the command")})
	case errors.As(err, &start):
		warn("%v", start)
		return exitCode(start.ExitCode)
	case errors.As(err, &early):
		warn("%v", early)
		return exitCode(early.ExitCode)
	case err != nil:
		return err
	}
	// Every output asked for is attempted; one that could not be written
	// is gpufeed's failure, said after the others.
	var failed []error
	if res.RecordErr != nil {
		failed = append(failed, res.RecordErr)
	}
	var outErr error
	if stream != nil {
		outErr = stream.Flush()
	}
	if outErr == nil {
		outErr = writeReport(cmd, "diagnose", res.Report, o.out)
	}
	if outErr != nil {
		failed = append(failed, fmt.Errorf("writing the report: %w", outErr))
	}
	if err := perfettoReport(o.perfetto, res.Report); err != nil {
		failed = append(failed, err)
	}
	return commandEnd(res.Command, failed)
}

// commandEnd is how a diagnose run ends once its outputs are written:
// failed lists the outputs that could not be, said at once. A launched
// command is waited for (gpufeed only watches: the command runs to its
// end, and the wrapper ends with it); its status is diagnose's, unless an
// output failed: then gpufeed's own failure status (125), after saying the
// command's status. Attached, a failed output exits 3.
func commandEnd(c *diagnose.Command, failed []error) error {
	// Said at once, not when a long command ends.
	for _, err := range failed {
		warn("%v", err)
	}
	if c == nil {
		if len(failed) > 0 {
			return exitCode(exitRuntime)
		}
		return nil
	}
	code := c.Wait()
	if len(failed) > 0 {
		warn("the command exited with status %d; gpufeed exits %d because of its own failure above", code, exitWrapperFailed)
		return exitCode(exitWrapperFailed)
	}
	return exitCode(code)
}

// jsonlTap is the Tap of a run streamed as JSON lines (-o jsonl): a live
// window of the last sample.DefaultDuration (the whole run when shorter)
// judged every second, each interval written to w as a line.
func jsonlTap(w io.Writer, fs procfs.FS, duration time.Duration) (func(sample.Recorder) sample.Recorder, *live.Stream, *live.Window) {
	win := live.NewWindow(min(duration, sample.DefaultDuration))
	win.FS = fs
	stream := live.NewStream(w, win)
	return func(next sample.Recorder) sample.Recorder {
		win.Next = next
		return win
	}, stream, win
}

// MinInterval is the shortest --interval: user and system times advance in
// USER_HZ ticks (10 ms, fixed at 100 Hz on every architecture Linux
// exposes), so below it two readings of a thread's stat cannot differ by
// more than one tick, and the observer's cost grows with nothing to show
// for it (a 1 us interval took more than a core).
const MinInterval = agentcmd.MinInterval

// checkWindow bounds --duration (the window diagnose and demo judge) and
// --interval (agentcmd.CheckWindow, the rule top and the agent apply to
// their --window).
func checkWindow(duration, interval time.Duration) error {
	return asUsage(agentcmd.CheckWindow("duration", duration, interval))
}

// addRootFlag adds --root, the one name every command gives the directory
// the host's / is mounted at (agentcmd.UnderRoot resolves it).
var addRootFlag = agentcmd.AddRootFlag

// openRoot opens /proc and /sys under --root, or where the deprecated
// --proc-root and --sys-root say.
func openRoot(root, procRoot, sysRoot string) (procfs.FS, error) {
	under := agentcmd.UnderRoot(root)
	proc, sys := under.Proc, under.Sys
	if procRoot != "" {
		proc = procRoot
	}
	if sysRoot != "" {
		sys = sysRoot
	}
	fs, err := procfs.NewFS(proc, sys)
	if err != nil && root != "" {
		return fs, usagef("--root %s: no proc directory under it (mount the host's /proc at %s): %w", root, proc, err)
	}
	return fs, asUsage(err)
}

// checkTarget refuses, before the window starts, a --pid that names no
// process, a kernel thread or this gpufeed process itself.
func checkTarget(fs procfs.FS, pid int) error {
	task, err := fs.Describe(pid)
	switch {
	case procfs.IsVanished(err):
		return usagef("--pid %d: no such process under %s", pid, fs.Proc)
	case err == nil && task.KernelThread:
		return asUsage(task.KernelThreadError())
	case pid == os.Getpid() && fs.Proc == "/proc":
		return usagef("pid %d is this gpufeed process itself (a shell that runs its last command in its own place gives it the shell's $$): point --pid at the job, or use -- COMMAND", pid)
	}
	return nil // a denied read is judged as far as it goes
}

// checkWritable says whether path can be created or overwritten, without
// touching it.
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return errors.New("is a directory")
		}
		return syscall.Access(path, 2 /* W_OK */)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("its directory %s does not exist", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := syscall.Access(dir, 2|1 /* W_OK|X_OK */); err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	return nil
}

// stringValue is a plain string flag value, for an alias of its own.
func stringValue(p *string) pflag.Value { return (*plainString)(p) }

type plainString string

func (s *plainString) Set(v string) error { *s = plainString(v); return nil }
func (s *plainString) String() string     { return string(*s) }
func (s *plainString) Type() string       { return "string" }

// warn writes a line on stderr, with text from outside (names, paths,
// messages of the target's files) escaped for the terminal.
func warn(format string, args ...any) {
	fmt.Fprintln(os.Stderr, "gpufeed: "+safetext.Escape(fmt.Sprintf(format, args...)))
}

// isTerminal says whether f is a terminal: one that answers the terminal
// ioctl, not any character device (/dev/null is one, and a full-screen
// view written there cannot open a terminal).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func progress(elapsed, window time.Duration, procs, threads int) {
	fmt.Fprintf(os.Stderr, "\r\033[Kgpufeed: sampling %.1f/%.1f s: %d processes, %d threads",
		elapsed.Seconds(), window.Seconds(), procs, threads)
}

// progressDone clears the progress line.
func progressDone() { fmt.Fprint(os.Stderr, "\r\033[K") }

// checkProbeModes checks --profile and --sched before a command is started
// or a window opened (diagnose and demo take both): a value that is not a
// mode is a usage error; a mode that insists (--profile on, --sched bpf)
// where this host does not allow it is a failure naming what is missing.
func checkProbeModes(fs procfs.FS, profile, sched string) error {
	if err := diagnose.CheckProfile(fs, profile); err != nil {
		if profile == diagnose.ProfileOn {
			return fmt.Errorf("--profile on: %w", err)
		}
		return usagef("%v", err)
	}
	if err := diagnose.CheckSched(fs, sched); err != nil {
		if sched == sample.SchedBPF {
			return err
		}
		return usagef("%v", err)
	}
	return nil
}

// schedDefault is --sched's default: GPUFEED_SCHED when it names a mode,
// else auto. The kernel's counters cost gpufeed less than /proc at 100,
// 1,000 and 10,000 threads since one program run reads a process's threads
// (Linux 6.7 and later), a job that does nothing but switch threads what
// /proc does (2.5-2.6 %), and give the same verdicts (docs/PERFORMANCE.md,
// docs/RULES.md); their load adds about 0.3 s before the window. Where
// they cannot load (no CAP_BPF and CAP_PERFMON, no BTF), /proc gives the
// same report.
func schedDefault() string {
	switch m := os.Getenv("GPUFEED_SCHED"); m {
	case sample.SchedAuto, sample.SchedBPF, sample.SchedProc:
		return m
	}
	return sample.SchedAuto
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpusource"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/render"
)

func init() { subcommands = append(subcommands, newCheckCmd) }

// openGPUSource resolves --device to a GPU source, or, when none is used, the
// one line saying why (every driver-based check then reports absent). Tests
// replace it.
var openGPUSource = func(spec, procRoot string) (gpu.Source, string, error) {
	return gpusource.OpenWith(spec, nil, gpusource.Options{ProcRoot: procRoot})
}

func newCheckCmd() *cobra.Command {
	var (
		pid        pidValue
		data       string
		root       string
		out        outputFlags
		quiet      bool
		device     string
		window     time.Duration
		failOn     string
		requireGPU bool
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the platform facts that silently starve a GPU (PCIe links, NUMA, CPU, limits, /dev/shm, memory, storage)",
		Long: `check reads /proc, /sys and (with a driver) the GPUs once, and reports
what starves a GPU without any code at fault: a downgraded PCIe link, a process
bound to the far NUMA node, a powersave governor, a 64 MiB /dev/shm, a dataset
on NFS that retransmits. Failures and warnings come one line each (-v: with
their evidence and the change to make; --quiet: failures only).

As a gate (a Slurm prolog, a CI job), --fail-on warn also fails on warnings,
and --require-gpu fails a node where no GPU answers through the driver: one
whose driver or libnvidia-ml.so.1 is missing, or where NVML cannot start,
while /dev/nvidia0 or an NVIDIA PCI device says the GPU is there.

  gpufeed check --require-gpu --fail-on fail -o json > /var/log/gpufeed-check.json

Exit status: 0 when no result is at least as severe as --fail-on, 1 when one
is (fail: a check failed; warn: a check failed or warned), 2 on a usage error
(a flag gpufeed cannot use, a --data path that does not exist, a --pid that
names no process or a kernel thread), 3 when gpufeed could not do its work
(--device nvml and NVML cannot start).`,
		Args: wrapArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := out.parse()
			if err != nil {
				return err
			}
			if err := gpusource.CheckSpec(device); err != nil {
				return asUsage(err)
			}
			opts := check.Options{PID: int(pid), DataPath: data, Window: window, RequireGPU: requireGPU, DriverSkipped: device == "none"}
			if root != "" {
				opts.ProcRoot, opts.SysRoot, opts.DevRoot = filepath.Join(root, "proc"), filepath.Join(root, "sys"), filepath.Join(root, "dev")
			}
			procRoot := opts.ProcRoot
			if procRoot == "" {
				procRoot = "/proc"
			}
			if _, err := os.Stat(filepath.Join(procRoot, "self")); err != nil {
				return usagef("--root %s: no proc/self under it (mount the host's /proc at %s): %w", root, procRoot, err)
			}
			if requireGPU && device == "none" {
				return usagef("--require-gpu asks for a GPU and --device none for none: give one of them")
			}
			if pid > 0 {
				if _, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(int(pid)))); err != nil {
					return usagef("--pid %d: no such process under %s", pid, procRoot)
				}
				exited, err := describeCheckTarget(procRoot, int(pid))
				if err != nil {
					return asUsage(err)
				}
				opts.TargetExited = exited
			}
			if data != "" {
				var err error
				if data, err = checkDataPath(data, root, procRoot, int(pid)); err != nil {
					return asUsage(err)
				}
				opts.DataPath = data
			}
			src, note, err := openGPUSource(device, procRoot)
			if err != nil {
				return fmt.Errorf("--device %s: %w", device, err)
			}
			if src != nil {
				defer src.Close()
				opts.GPU = src
			} else {
				opts.GPUNote = note
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			rep := render.NewCheckReport(check.Run(ctx, opts))
			if failOn == "warn" && rep.Summary.Warn > 0 {
				rep.ExitStatus = render.CheckExitFailed
			}
			rep.Root, rep.PID, rep.DataPath, rep.Window = root, int(pid), data, window
			rep.Header = render.NewHeader("check", version, checkedHostname(procRoot))
			if src != nil {
				rep.GPUSource = note
			} else {
				rep.GPUNote = note
			}
			w := cmd.OutOrStdout()
			ro := out.options(w)
			ro.Quiet = quiet
			if err := render.Write(w, format, rep, ro); err != nil {
				return err
			}
			if rep.ExitStatus != render.CheckExitOK {
				return exitCode(rep.ExitStatus)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(&pid, "pid", "the target process `PID` (a training or inference job); without it, per-process facts are gpufeed's own")
	f.StringVar(&data, "data", "", "dataset directory, as the target names it")
	f.StringVar(&root, "root", "", "read `DIR`/proc, DIR/sys and DIR/dev instead of /proc, /sys and /dev (a container with the host's / mounted at DIR, e.g. /host)")
	out.add(cmd, documentFormats)
	f.BoolVarP(&quiet, "quiet", "q", false, "print failed checks only (text)")
	f.StringVar(&device, "device", "auto", "GPU driver source: auto, nvml (an error if NVML cannot start) or none (driver checks report absent)")
	durationFlag := newSeconds(&window, time.Second)
	f.Var(durationFlag, "duration", "time between the two readings of interrupt and PCIe replay counters (seconds, or with a unit: 500ms; 0: counts since boot)")
	deprecatedAlias(f, durationFlag, "window", "use --duration, the name every command gives how long gpufeed observes")
	f.Var(newChoice(&failOn, "fail", "fail", "warn"), "fail-on", "exit 1 when any result is at least this severe: fail or warn")
	f.BoolVar(&requireGPU, "require-gpu", false, "fail when no GPU answers through the driver (no driver, NVML cannot start, no GPU): for GPU nodes' gates")
	return cmd
}

// describeCheckTarget refuses a kernel thread (nothing of a job to check)
// and, for a zombie, says what it is: its per-process checks are absent.
// A target that cannot be described (a fixture tree without stat, a denied
// read) is checked as given.
func describeCheckTarget(procRoot string, pid int) (exited string, err error) {
	fs, err := procfs.NewFS(procRoot, "")
	if err != nil {
		return "", nil
	}
	task, err := fs.Describe(pid)
	switch {
	case err != nil:
		return "", nil
	case task.KernelThread:
		return "", task.KernelThreadError()
	case task.Zombie:
		return fmt.Sprintf("%s has exited (%s) and is a zombie: its parent, %s, has not reaped it; no running process is left whose limits, mounts or placement could be checked",
			task.Comm, task.End(), fs.Name(task.PPID)), nil
	}
	return "", nil
}

// checkDataPath makes sure --data names something that exists, as the
// target sees it: under /proc/PID/root when that is readable (the target's
// own mount namespace), else under --root (the host's / seen from a
// container), else in gpufeed's own view. A path gpufeed may not look into
// is kept (the mount table still tells its filesystem); one that does not
// exist is a usage error, not "a local filesystem". A relative path is made
// absolute only in gpufeed's own view.
func checkDataPath(data, root, procRoot string, pid int) (string, error) {
	if !filepath.IsAbs(data) {
		if pid > 0 || root != "" {
			return "", fmt.Errorf("--data %s: want an absolute path, as the job names it", data)
		}
		abs, err := filepath.Abs(data)
		if err != nil {
			return "", fmt.Errorf("--data %s: %w", data, err)
		}
		data = abs
	}
	missing := func(where string) error {
		return fmt.Errorf("--data %s: does not exist%s: give the dataset directory the job reads", data, where)
	}
	if pid > 0 {
		targetRoot := filepath.Join(procRoot, strconv.Itoa(pid), "root")
		if _, err := os.Stat(targetRoot); err == nil {
			_, err := os.Lstat(filepath.Join(targetRoot, data))
			switch {
			case err == nil:
				return data, nil
			case notExist(err):
				return "", missing(fmt.Sprintf(" in pid %d's filesystem", pid))
			}
			return data, nil // not visible: the mount table still answers
		}
	}
	base := "/"
	if root != "" {
		base = root
	}
	if _, err := os.Lstat(filepath.Join(base, data)); notExist(err) {
		if root != "" {
			return "", missing(" under --root " + root)
		}
		return "", missing("")
	}
	return data, nil
}

// notExist: no such file, or a component of the path is not a directory.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// checkedHostname is the checked host's name: its proc/sys/kernel/hostname
// (under --root, the host's), "" when it cannot be read.
func checkedHostname(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "hostname"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

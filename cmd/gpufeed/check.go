package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/gpusource"
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
		pid    int
		data   string
		root   string
		output string
		device string
		window time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the platform facts that silently starve a GPU (PCIe links, NUMA, CPU, limits, /dev/shm, memory, storage)",
		Long: `check reads /proc, /sys and (with a driver) the GPUs once, and reports
what starves a GPU without any code at fault: a downgraded PCIe link, a process
bound to the far NUMA node, a powersave governor, a 64 MiB /dev/shm, a dataset
on NFS that retransmits. Failures and warnings come first, with their evidence
and the change to make.

Exit status: 0 when no check failed, 1 when a check failed (warnings do not
change it), 2 when gpufeed itself failed or was given what it cannot check
(a --data path that does not exist, a --pid that is a kernel thread). Use it
to gate a Slurm prolog.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			opts := check.Options{PID: pid, DataPath: data, Window: window}
			if root != "" {
				opts.ProcRoot, opts.SysRoot = filepath.Join(root, "proc"), filepath.Join(root, "sys")
			}
			procRoot := opts.ProcRoot
			if procRoot == "" {
				procRoot = "/proc"
			}
			if _, err := os.Stat(filepath.Join(procRoot, "self")); err != nil {
				return fmt.Errorf("--root %q: no proc/self under it: %w", root, err)
			}
			if pid < 0 {
				return fmt.Errorf("--pid %d: want a process id", pid)
			}
			if pid > 0 {
				if _, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(pid))); err != nil {
					return fmt.Errorf("--pid %d: no such process under %s", pid, procRoot)
				}
				exited, err := describeCheckTarget(procRoot, pid)
				if err != nil {
					return err
				}
				opts.TargetExited = exited
			}
			if data != "" {
				var err error
				if data, err = checkDataPath(data, root, procRoot, pid); err != nil {
					return err
				}
				opts.DataPath = data
			}
			src, note, err := openGPUSource(device, procRoot)
			if err != nil {
				return fmt.Errorf("--device %q: %w", device, err)
			}
			if src != nil {
				defer src.Close()
				opts.GPU = src
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			rep := render.NewCheckReport(check.Run(ctx, opts))
			rep.Root, rep.PID, rep.DataPath, rep.WindowSec = root, pid, data, window.Seconds()
			if src != nil {
				rep.GPUSource = note
			} else {
				rep.GPUNote = note
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				err = rep.WriteJSON(out)
			} else {
				err = rep.WriteText(out)
			}
			if err != nil {
				return err
			}
			if rep.ExitStatus != render.CheckExitOK {
				return exitCode(rep.ExitStatus)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&pid, "pid", 0, "target process (a training or inference job); without it, per-process facts are gpufeed's own")
	f.StringVar(&data, "data", "", "dataset directory, as the target names it")
	f.StringVar(&root, "root", "", "read DIR/proc and DIR/sys (a container with the host mounted at DIR)")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&device, "device", "", "GPU driver source (e.g. nvml); none: driver checks report absent")
	f.DurationVar(&window, "window", time.Second, "time between the two readings of interrupt and PCIe replay counters (0: counts since boot)")
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

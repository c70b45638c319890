package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/drill"
	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sim"
)

func init() { subcommands = append(subcommands, newDrillCmd) }

type drillFlags struct {
	driver   string
	gpu      int
	out      outputFlags
	kernels  int
	reps     int
	kernelNS uint64
	cpu      int
	bytes    uint64
	python   string
	items    int
	workers  int
	window   time.Duration
	json     string
}

func newDrillCmd() *cobra.Command {
	var fl drillFlags
	cmd := &cobra.Command{
		Use:   "drill [NAME]",
		Short: "Run an experiment of what the CPU side does to a GPU job, beside published numbers",
		Long: `drill runs one small experiment on this machine and prints its table beside
reference numbers measured on an i9-13900K + RTX 4090 (torch 2.8, Python 3.12):

  jitter    2000 tiny kernels launched one by one: quiet, with busy processes
            on every CPU, pinned with a busy SMT sibling, pinned on a quiet
            core; then the same kernels as one CUDA graph replay
  cow       forked DataLoader-style Python workers over a list of objects
            versus flat numpy storage: their unique memory (USS) over time
  copy      host-to-device and device-to-host copies, pinned versus pageable,
            against the PCIe link the device negotiated
  syscalls  the system calls of a small multi-worker training loop

Without NAME it lists them. The GPU side calls the CUDA driver API of the
library loaded at run time: libcuda.so.1 on a GPU host, gpufeed's simulated
driver on a simulated GPU elsewhere (--driver), through the same code.

Exit status: 0 when the drill ran, 2 on a usage error, 3 when it could not
run here (a drill that is not available in this build says why).`,
		Args: wrapArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return listDrills(cmd)
			}
			info, ok := drill.Lookup(args[0])
			if !ok {
				return asUsage(fmt.Errorf("no drill %q: gpufeed drill lists them", args[0]))
			}
			format, err := fl.out.parse()
			if err != nil {
				return asUsage(err)
			}
			return runDrill(cmd, info, format, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.driver, "driver", "auto", "the CUDA driver: auto (libcuda.so.1, else a simulated GPU), cuda, sim, sim:SOCKET, or a library's path")
	f.IntVar(&fl.gpu, "gpu", 0, "the CUDA device ordinal")
	fl.out.add(cmd, tableFormats)
	f.StringVar(&fl.json, "json", "", "also write the result as JSON to `FILE` (one run for a script that keeps both: -o chooses what goes to stdout)")
	f.IntVar(&fl.kernels, "kernels", 2000, "jitter: tiny kernels per burst")
	f.IntVar(&fl.reps, "reps", 5, "jitter, copy: repetitions per row")
	f.Uint64Var(&fl.kernelNS, "kernel-ns", 885, "jitter: each tiny kernel's duration on the simulator, in nanoseconds (a real GPU runs an empty kernel)")
	f.IntVar(&fl.cpu, "cpu", -1, "jitter: the CPU to pin the launch thread to (default: the biggest core with an SMT sibling)")
	f.Uint64Var(&fl.bytes, "bytes", 64<<20, "copy: bytes per copy")
	f.StringVar(&fl.python, "python", "", "cow: the Python interpreter (default /usr/bin/python3 when present, else python3)")
	f.IntVar(&fl.items, "items", 1_000_000, "cow: items in the dataset")
	f.IntVar(&fl.workers, "workers", 4, "cow: forked workers; syscalls: DataLoader workers (at most 2 by default)")
	durationFlag := newSeconds(&fl.window, 5*time.Second)
	f.Var(durationFlag, "duration", "syscalls: how long the system calls are counted (seconds, or with a unit: 500ms, 2m)")
	deprecatedAlias(f, durationFlag, "window", "use --duration, the name every command gives how long gpufeed observes")
	return cmd
}

func listDrills(cmd *cobra.Command) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPU SIDE\tWHAT IT RUNS")
	for _, d := range drill.Drills {
		gpu := "-"
		if d.NeedsGPU {
			gpu = "CUDA driver"
		}
		title := d.Title
		if d.Waiting != "" {
			title += " (not available yet: " + d.Waiting + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Name, gpu, title)
	}
	return tw.Flush()
}

func runDrill(cmd *cobra.Command, info drill.Info, format render.Format, fl drillFlags) error {
	if info.Waiting != "" {
		return fmt.Errorf("drill %s is not available in this build: %s", info.Name, info.Waiting)
	}
	if err := drill.ValidDriver(fl.driver); err != nil {
		return asUsage(err)
	}
	if fl.gpu < 0 {
		return asUsage(errors.New("--gpu: want a CUDA device ordinal, 0 or more"))
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--kernels", fl.kernels}, {"--reps", fl.reps}, {"--workers", fl.workers}, {"--items", fl.items}} {
		if c.v < 1 {
			return usagef("%s %d: want 1 or more", c.flag, c.v)
		}
	}
	if fl.bytes < 1 {
		return usagef("--bytes 0: want 1 or more")
	}
	if fl.window <= 0 {
		return usagef("--duration %s: want a positive duration (e.g. 5 or 5s)", humanDuration(fl.window))
	}
	if err := checkOutputFile("--json", fl.json); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs, err := procfs.NewFS("", "")
	if err != nil {
		return err
	}
	if info.Name == "jitter" && fl.cpu != -1 {
		topo, err := drill.ReadTopology(fs)
		if err != nil {
			return err
		}
		if fl.cpu < 0 || !topo.Allowed.Contains(fl.cpu) {
			return usagef("--cpu %d: want a CPU this process may run on (%s), or leave it out for the biggest core with an SMT sibling", fl.cpu, topo.Allowed)
		}
	}
	var b *drill.Backend
	var fallback string
	if info.NeedsGPU {
		b, fallback, err = drill.Open(ctx, fl.driver, fl.gpu, sim.Options{})
		if err != nil {
			return err
		}
		defer b.Close()
		if fallback != "" {
			fmt.Fprintf(os.Stderr, "gpufeed drill %s: no usable CUDA driver here (%s): running on a simulated GPU\n", info.Name, fallback)
		}
	}
	var rep *drillresult.Report
	switch info.Name {
	case "jitter":
		rep, err = drill.Jitter(ctx, b, fs, drill.JitterOptions{Kernels: fl.kernels, Reps: fl.reps, KernelNS: fl.kernelNS, CPU: fl.cpu})
	case "copy":
		rep, err = drill.Copy(ctx, b, fs, drill.CopyOptions{Bytes: fl.bytes, Reps: fl.reps})
	case "syscalls":
		rep, err = drill.Syscalls(ctx, fs, drill.SyscallsOptions{Python: fl.python, Workers: min(fl.workers, 2), Window: fl.window})
	case "cow":
		rep, err = drill.Cow(ctx, fs, drill.CowOptions{Python: fl.python, Items: fl.items, Workers: fl.workers})
	default:
		err = fmt.Errorf("drill %s has no runner", info.Name)
	}
	if err != nil {
		return err
	}
	if fallback != "" {
		rep.Notes = append(rep.Notes, "ran on a simulated GPU: no usable CUDA driver here ("+fallback+")")
	}
	doc := &render.DrillReport{Header: render.NewHeader("drill", version, hostname()), Report: *rep}
	if fl.json != "" {
		if err := writeDocFile("--json", fl.json, render.FormatJSON, doc); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	return render.Write(w, format, doc, fl.out.options(w))
}

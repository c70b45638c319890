package main

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/sim"
)

func init() { subcommands = append(subcommands, newSimdevCmd) }

func newSimdevCmd() *cobra.Command {
	var (
		socket string
		link   string
		opt    sim.Options
	)
	cmd := &cobra.Command{
		Use:   "simdev --socket PATH",
		Short: "Run a simulated GPU (a queueing model of CUDA streams) on a Unix socket",
		Long: `simdev serves a simulated GPU for machines without one. Workloads drive it
through the simulated CUDA driver (libgpufeed-simcuda.so, the driver API's
names; launches go through shared memory with no system call, waits spin,
yield or block as CUDA's), from C, Go or python/gpufeed_simdev.py; kernels
carry their durations, copies their bytes over a PCIe link. diagnose observes it with
--device sim:PATH, or by itself when the target's environment has
GPUFEED_SIMDEV=PATH. It runs until interrupted.`,
		Args: wrapArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return usagef("simdev: --socket PATH is required")
			}
			gen, width, err := sim.ParseLink(link)
			if err != nil {
				return usagef("simdev: --link: %w", err)
			}
			opt.LinkGen, opt.LinkWidth = gen, width
			if err := checkSimdevFlags(opt); err != nil {
				return usagef("simdev: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := sim.Listen(socket, opt)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "simdev: %d simulated GPU(s) on %s (PCIe Gen%d x%d); export GPUFEED_SIMDEV=%s\n",
				opt.Devices, socket, gen, width, socket)
			return srv.Serve(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "socket", "", "Unix socket path to listen on")
	f.StringVar(&link, "link", "gen4x16", "PCIe link, GENxWIDTH: copy bandwidth derives from it")
	f.Var(newDecimalInt(&opt.Devices, 1), "devices", "number of simulated GPUs")
	addDurationFlag(f, &opt.PointWindow, "point-window", sim.DefaultPointWindow, "width of a fine-grained utilisation point")
	f.Var(newDecimalInt(&opt.MaxPending, sim.DefaultMaxPending), "max-pending", "operations a stream holds before a submit blocks")
	f.Var(newDecimalFloat(&opt.PageableFactor, sim.DefaultPageableFactor), "pageable-factor", "pageable/pinned copy bandwidth ratio")
	f.DurationVar(&opt.LaunchCost, "launch-cost", sim.DefaultLaunchCost, "user CPU each launch, async copy or event record costs the launching thread in the driver")
	f.StringVar(&opt.Name, "name", "", "device name in reports (default \"gpufeed simulated GPU\")")
	return cmd
}

// minLaunchCost is the least --launch-cost: below it the calibrated loop is
// shorter than a clock read.
const minLaunchCost = 100 * time.Nanosecond

// checkSimdevFlags refuses what the model cannot run with, naming the flag:
// on the command line every value is given (the defaults are shown), so a
// zero or negative is a mistake, not a request for the default.
func checkSimdevFlags(o sim.Options) error {
	switch {
	case o.Devices < 1 || o.Devices > sim.MaxDevices:
		return fmt.Errorf("--devices %d: want 1 to %d simulated GPUs", o.Devices, sim.MaxDevices)
	case o.MaxPending < 1 || o.MaxPending > sim.MaxPendingLimit:
		return fmt.Errorf("--max-pending %d: want 1 to %d operations a stream holds before a submit blocks", o.MaxPending, sim.MaxPendingLimit)
	case math.IsNaN(o.PageableFactor) || o.PageableFactor < sim.MinPageableFactor || o.PageableFactor > 1:
		return fmt.Errorf("--pageable-factor %g: want a ratio from %g to 1: a pageable copy runs at this share of a pinned copy's bandwidth", o.PageableFactor, sim.MinPageableFactor)
	case o.LaunchCost < minLaunchCost || o.LaunchCost > sim.MaxLaunchCost:
		return fmt.Errorf("--launch-cost %v: want %v to %v of CPU per launch", o.LaunchCost, minLaunchCost, sim.MaxLaunchCost)
	case o.PointWindow < sim.MinPointWindow || o.PointWindow > sim.DefaultRetention:
		return fmt.Errorf("--point-window %v: want %v to %v", o.PointWindow, sim.MinPointWindow, sim.DefaultRetention)
	}
	return nil
}

package main

import (
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/demo"
)

func init() {
	// A Go demo workload launches from the main goroutine; locking it to the
	// main thread here, before main runs, makes the launching thread the
	// process's main thread, as in a PyTorch job.
	if len(os.Args) > 1 && os.Args[1] == demo.WorkloadCommand {
		runtime.LockOSThread()
	}
	subcommands = append(subcommands, newWorkloadCmd)
}

// newWorkloadCmd is the hidden command the demo runner re-executes the
// binary with to run a Go workload as a process of its own.
func newWorkloadCmd() *cobra.Command {
	return &cobra.Command{
		Use:                demo.WorkloadCommand + " NAME [ARGS]",
		Short:              "Run a built-in demo workload (used by gpufeed demo)",
		Hidden:             true,
		Args:               cobra.MinimumNArgs(1),
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := demo.RunWorkload(args[0], args[1:]); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}

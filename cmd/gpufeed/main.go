// Command gpufeed measures why a GPU is not fed: it names the bottleneck,
// shows the numbers behind the claim, and says what to change.
//
// main holds flags and wiring only; every subcommand lives in its own file and
// registers itself in subcommands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// subcommands are added by each command's file in its init function, so that
// commands can be added without touching this file.
var subcommands []func() *cobra.Command

// exitCode lets a command choose the process's exit status (a launched
// command's own status, check's documented failure status) without printing
// an error.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpufeed",
		Short: "Find out why the GPU is waiting: measured answers, with evidence and what to change",
		Long: `gpufeed watches a GPU job (its threads, processes, the host and the GPUs) or
reads a profiler trace, and names what starves the GPU: kernel submission,
synchronisation, preprocessing, storage, transfers, too little parallel work,
or nothing (GPU-bound). Every verdict carries the numbers that prove it and
the change to make.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

func main() {
	err := newRootCmd().Execute()
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	default:
		// Errors quote names from outside (paths, process names, file
		// content): escaped, so none can reorder or forge a line.
		fmt.Fprintln(os.Stderr, "gpufeed:", safetext.Escape(err.Error()))
		os.Exit(2)
	}
}

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
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// version and commit are set at build time with -ldflags "-X main.version=...
// -X main.commit=..." (make build does); without them, the module version go
// install recorded ("dev" for a checkout) and the commit go build recorded.
var (
	version = "dev"
	commit  = ""
)

// subcommands are added by each command's file in its init function, so that
// commands can be added without touching this file.
var subcommands []func() *cobra.Command

// exitCode lets a command choose the process's exit status (a launched
// command's own status, check's documented failure status) without printing
// an error.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// The exit statuses gpufeed itself gives (a launched command's own status
// is passed through as it is: see exitStatusHelp).
const (
	exitOK = 0
	// exitFound: the answer asked for is "no": check found a result at
	// least as severe as --fail-on, demo's verdict was not the scenario's.
	exitFound = 1
	// exitUsage: gpufeed was called in a way it cannot run (a flag, an
	// argument, a value naming nothing usable); nothing was observed.
	exitUsage = 2
	// exitRuntime: gpufeed started and could not do its work (a source
	// that failed, a file it could not write, a tool it needs missing).
	exitRuntime = 3
	// exitWrapperFailed: gpufeed's own failure in diagnose -- COMMAND,
	// where every other status is the command's: 125, the status env(1),
	// nice(1) and timeout(1) give for their own failures, so no status a
	// command gives is mistaken for gpufeed's.
	exitWrapperFailed = 125
)

// exitStatusHelp documents the exit statuses in the root command's help
// (the README says the same).
const exitStatusHelp = `Exit status:
  0    done (check: no result at least as severe as --fail-on)
  1    check: a result at least as severe as --fail-on (default: fail);
       demo: the verdict is not the one the scenario produces;
       compare: the inputs differ (beyond the noise, for runs)
  2    usage: a flag, argument or value gpufeed cannot use; nothing ran
  3    gpufeed could not do its work (a source failed, a file could not be
       written, a tool it needs is missing); explain: no finding has the ID
  diagnose -- COMMAND exits with the command's own status (its code; 128+N
  when signal N ended it; 127 not found, 126 not executable, as a shell
  does), so wrapping a job never changes its outcome; gpufeed's own failure
  there is 125 (as env(1) and timeout(1) give for theirs).`

// versionString is the version and the commit the binary was built from
// (Go records the commit when it builds from a git checkout).
func versionString() string {
	info, _ := debug.ReadBuildInfo()
	return describeVersion(version, commit, info)
}

// describeVersion says the version, the commit (with "with uncommitted
// changes" when the tree was modified), its time and the Go release, from
// what the build stamped.
func describeVersion(version, commit string, info *debug.BuildInfo) string {
	v := version
	if info == nil {
		info = &debug.BuildInfo{}
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	rev, at := commit, ""
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if rev == "" {
				rev = s.Value
			}
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		c := "commit " + rev
		if modified {
			c += " with uncommitted changes"
		}
		parts = append(parts, c)
	} else {
		parts = append(parts, "no commit recorded: built outside a git checkout or with -buildvcs=false; make build records it")
	}
	if at != "" {
		parts = append(parts, at)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpufeed",
		Short: "Find out why the GPU is waiting: measured answers, with evidence and what to change",
		Long: `gpufeed watches a GPU job (its threads, processes, the host and the GPUs) or
reads a profiler trace, and names what starves the GPU: kernel submission,
synchronisation, preprocessing, storage, transfers, too little parallel work,
or nothing (GPU-bound). Every verdict carries the numbers that prove it and
the change to make.

` + exitStatusHelp,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Flags().BoolP("version", "V", false, "print the version and the commit it was built from")
	root.SetVersionTemplate("gpufeed {{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

// removalWait bounds how long gpufeed waits at exit for its CUDA driver
// probes to be removed (a second or two on a 6.x kernel).
const removalWait = 30 * time.Second

func main() {
	cmd, err := newRootCmd().ExecuteC()
	code := exitStatus(cmd, err, os.Args[1:])
	// The CUDA driver probes are removed in the background once a window
	// ends; exiting in the middle would leave one in the kernel.
	if !diagnose.AwaitProbesRemoved(removalWait) {
		fmt.Fprintf(os.Stderr, "gpufeed: the CUDA driver probes were still being removed after %v; exiting now may leave one in the kernel (its log says \"leaking uprobe\")\n", removalWait)
	}
	os.Exit(code)
}

// exitStatus prints err (when it is gpufeed's to print) and returns the
// process's exit status.
func exitStatus(cmd *cobra.Command, err error, args []string) int {
	var code exitCode
	if err == nil {
		return exitOK
	}
	if errors.As(err, &code) {
		return int(code)
	}
	// Errors quote names from outside (paths, process names, file
	// content): escaped, so none can reorder or forge a line.
	fmt.Fprintln(os.Stderr, "gpufeed:", safetext.Escape(err.Error()))
	if cmd != nil && cmd.Name() == "diagnose" && slices.Contains(args, "--") {
		return exitWrapperFailed
	}
	var usage usageError
	if errors.As(err, &usage) || strings.HasPrefix(err.Error(), "unknown command ") {
		return exitUsage
	}
	return exitRuntime
}

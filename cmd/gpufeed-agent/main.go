// Command gpufeed-agent is gpufeed agent on its own: the node agent,
// built without what only the other commands use (the trace readers, the
// Nsight SQLite reader among them), so that its resident memory is the
// agent's own. It takes the same flags as gpufeed agent.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	cmd := agentcmd.New(version, nil)
	cmd.Use = "gpufeed-agent"
	cmd.Version = version
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gpufeed-agent:", safetext.Escape(err.Error()))
		// As gpufeed: 2 for a flag or value it cannot use, 3 when it
		// started and could not do its work.
		if u := (agentcmd.UsageError{}); errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(3)
	}
}

package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func init() { subcommands = append(subcommands, newReportCmd) }

func newReportCmd() *cobra.Command {
	var out outputFlags
	var perfetto string
	cmd := &cobra.Command{
		Use:   "report FILE",
		Short: "Judge a recording made with diagnose --record, with no process present",
		Long: `report reads a recording (diagnose --record FILE) and prints the same report
diagnose printed live: the same analysis and rules run over the same samples.
A truncated recording (a crash, a full disk) is judged on what it holds, with
a note saying so.`,
		Args: wrapArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := out.parse(); err != nil {
				return err
			}
			if err := checkPerfetto(perfetto); err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return asUsage(err)
			}
			defer f.Close()
			tl, warnings, err := timeline.Decode(f, args[0])
			if err != nil {
				return asUsage(err) // not a recording gpufeed can read: what was given cannot be used
			}
			for _, w := range warnings {
				warn("warning: %s", w)
			}
			rep := diagnose.Judge(tl, warnings)
			if err := writeReport(cmd, "report", rep, out); err != nil {
				return err
			}
			return perfettoReport(perfetto, rep)
		},
	}
	out.add(cmd, documentFormats)
	addPerfettoFlag(cmd.Flags(), &perfetto)
	return cmd
}

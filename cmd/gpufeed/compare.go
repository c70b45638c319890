package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/compare"
	"github.com/gpufeed/gpufeed/internal/render"
)

func init() { subcommands = append(subcommands, newCompareCmd) }

func newCompareCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "compare FILE FILE...",
		Short: "Set nodes' check reports, and runs of one job, side by side: what differs, the straggler, who died first",
		Long: `compare reads what gpufeed wrote on several nodes, or before and after a change,
and says what differs:

  - check documents (gpufeed check -o json), one per node: the results whose
    status differs between the nodes (a downgraded PCIe link, a process bound
    to the far NUMA node, another governor, SMT, driver, mounts, limits), and
    which nodes differ;
  - runs: recordings (--record) or diagnose/report JSON documents: each
    quantity per interval side by side (GPU busy, the launch thread on a CPU
    and waiting for one, the job's and the host's CPU); with two runs (one
    job before and after a change) what moved, by how much, and whether that
    is beyond the noise measured within each run (half the spread of the
    middle 80 % of its per-interval values); across nodes the straggler, the
    run whose GPU was busy the least beyond that noise;
  - across the runs' kernel logs, the members that died (OOM kills,
    segfaults, fatal traps) and which died first, and where.

A recording keeps every interval, so its noise is measured; a JSON report
keeps percentiles, and only the GPU's spread (p10 to p90) among them.
Change one thing at a time between two runs, so that what moved is its.

"-" reads one of the documents from standard input (gpufeed check -o json |
gpufeed compare - other-node.json); it may be given once.

Exit status: 0 when nothing differs beyond the noise, 1 when something does
(a check's status, a quantity, a verdict, a straggler), 2 when a file cannot
be read as a gpufeed document or recording.`,
		Args: wrapArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := out.parse()
			if err != nil {
				return err
			}
			if n := countStdin(args); n > 1 {
				return usagef("\"-\" given %d times: standard input holds one document", n)
			}
			var inputs []*compare.Input
			for _, name := range args {
				in, err := loadCompareInput(name)
				if err != nil {
					return asUsage(err)
				}
				inputs = append(inputs, in)
			}
			res := compare.Compare(inputs)
			rep := &render.CompareReport{Header: render.NewHeader("compare", version, ""), Result: res}
			w := cmd.OutOrStdout()
			if err := render.Write(w, format, rep, out.options(w)); err != nil {
				return err
			}
			if res.Differs {
				return exitCode(render.CompareExitDiffer)
			}
			return nil
		},
	}
	out.add(cmd, tableFormats)
	return cmd
}

func countStdin(args []string) int {
	n := 0
	for _, a := range args {
		if a == "-" {
			n++
		}
	}
	return n
}

func loadCompareInput(name string) (*compare.Input, error) {
	var r io.Reader = os.Stdin
	if name == "-" {
		name = "standard input"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	in, err := compare.Load(name, r)
	if err != nil {
		return nil, err
	}
	for _, w := range in.Warnings {
		warn("warning: %s", w)
	}
	if in.Kind == "" {
		return nil, fmt.Errorf("%s: not a gpufeed document", name)
	}
	return in, nil
}

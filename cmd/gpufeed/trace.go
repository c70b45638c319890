package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/trace/analysis"
	"github.com/gpufeed/gpufeed/internal/trace/kineto"
	"github.com/gpufeed/gpufeed/internal/trace/load"
	tracerender "github.com/gpufeed/gpufeed/internal/trace/render"
)

func init() { subcommands = append(subcommands, newTraceCmd) }

func newTraceCmd() *cobra.Command {
	var (
		output   string
		lastStep bool
		workers  int
	)
	cmd := &cobra.Command{
		Use:   "trace FILE|DIR...",
		Short: "Explain every GPU idle gap in a PyTorch profiler (Kineto) or Nsight Systems trace",
		Long: `trace reads PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, one
file or a directory of rank files, and Nsight Systems SQLite exports
(nsys export --type sqlite). For each rank it attributes every GPU idle gap to
what the launching CPU thread was doing instead (DataLoader, synchronisation,
pageable copy, CPU operators, launch calls), gives the verdict live diagnose
gives, and prints HTA-compatible and Nsight-style numbers to check it against.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			files, err := load.Expand(args)
			if err != nil {
				return err
			}
			limitMemory(files)
			var res tracerender.Result
			var summaries []analysis.RankSummary
			for _, f := range files {
				traces, err := load.Read(f, load.Options{Kineto: kineto.Options{Workers: workers}})
				if err != nil {
					return err
				}
				for _, t := range traces {
					r := analysis.Analyze(t, analysis.Options{IncludeLastStep: lastStep})
					res.Reports = append(res.Reports, r)
					summaries = append(summaries, analysis.Summarize(r, t))
				}
			}
			if len(summaries) > 1 {
				m := analysis.CompareRanks(summaries)
				res.Multi = &m
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				return tracerender.JSON(out, res)
			}
			return tracerender.Text(out, res)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&lastStep, "include-last-step", false, "keep the last ProfilerStep (HTA leaves it out by default)")
	cmd.Flags().IntVar(&workers, "workers", 0, "decoder threads (0: one per CPU)")
	return cmd
}

// memoryShare is the part of the largest trace's uncompressed size the
// analysis aims to stay within (issue 6: peak memory at most a quarter of
// the trace), with a margin for what the Go heap limit does not cover
// (binary, stacks).
const memoryShare = 0.25 * 0.85

// minMemoryLimit keeps small traces from making the collector run
// constantly: below it, fixed costs (decoder buffers, runtime) dominate.
const minMemoryLimit = 32 << 20

// limitMemory sets a soft heap limit proportional to the largest input, so
// the collector returns garbage before the process grows past it. Traces are
// decoded and analysed one at a time, so the largest one sets the peak. A
// GOMEMLIMIT set by the user wins.
func limitMemory(files []string) {
	// Traces are large, short-lived and pointer-free: collecting more often
	// costs little and keeps the peak near the live data.
	debug.SetGCPercent(40)
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var largest int64
	for _, f := range files {
		if n, err := load.UncompressedSize(f); err == nil {
			largest = max(largest, n)
		}
	}
	debug.SetMemoryLimit(max(int64(float64(largest)*memoryShare), minMemoryLimit))
}

package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/traceload"
)

func init() { subcommands = append(subcommands, newTraceCmd) }

func newTraceCmd() *cobra.Command {
	var (
		out      outputFlags
		rank     int
		lastStep bool
		workers  int
		perfetto string
	)
	cmd := &cobra.Command{
		Use:   "trace FILE|DIR|-...",
		Short: "Explain every GPU idle gap in a PyTorch profiler (Kineto) or Nsight Systems trace",
		Long: `trace reads PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, one
file or a directory of rank files, and Nsight Systems SQLite exports
(nsys export --type sqlite). For each rank it attributes every GPU idle gap to
what the launching CPU thread was doing instead (DataLoader, synchronisation,
pageable copy, CPU operators, launch calls), gives the verdict live diagnose
gives, and (-v) prints HTA-compatible and Nsight-style numbers to check it
against. With a directory of ranks the ranks table comes first; --rank N
shows one rank.

"-" reads a Kineto trace from standard input (so do /dev/stdin and
<(zcat trace.json.gz)). A file that cannot be read is listed with the reason
at the end of the report and the others are reported; the exit status is 2
only when nothing could be read.`,
		Args: wrapArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := out.parse()
			if err != nil {
				return err
			}
			files, skipped, err := traceload.Expand(args)
			if err != nil {
				return asUsage(err)
			}
			// Traces are large, short-lived and pointer-free: collecting more
			// often costs little and keeps the peak near the live data.
			debug.SetGCPercent(40)
			if err := checkPerfetto(perfetto); err != nil {
				return err
			}
			var res render.TraceReport
			var summaries []tracejudge.RankSummary
			// readErr keeps each unreadable file's error, to return as is
			// when it is the only file.
			readErr := map[string]error{}
			failed := 0
			for _, p := range files {
				lf, err := traceload.Open(p)
				var traces []*trace.Trace
				if err == nil {
					limitMemory(lf.SizeHint)
					traces, err = lf.Read(traceload.Options{Kineto: kineto.Options{Workers: workers}})
				}
				if err != nil {
					name := p
					if lf != nil {
						name = lf.Name
					}
					skipped = append(skipped, traceload.Skipped{File: name, Reason: traceload.Reason(name, err)})
					readErr[name] = err
					failed++
					continue
				}
				for _, t := range traces {
					r := tracejudge.Analyze(t, tracejudge.Options{Derive: tracestats.Options{IncludeLastStep: lastStep}, KeepGaps: perfetto != "" || format == render.FormatHTML})
					res.Reports = append(res.Reports, r)
					if perfetto != "" {
						// The timeline needs each trace and its gaps kept until
						// the end; without --perfetto each is dropped once judged.
						res.Traces = append(res.Traces, t)
					}
					summaries = append(summaries, tracejudge.Summarize(r, t))
				}
			}
			slices.SortStableFunc(skipped, func(a, b traceload.Skipped) int { return strings.Compare(a.File, b.File) })
			if len(res.Reports) == 0 {
				return asUsage(nothingRead(skipped, readErr)) // nothing given was a trace gpufeed can read
			}
			for _, s := range skipped {
				res.Skipped = append(res.Skipped, render.TraceSkipped{File: s.File, Reason: s.Reason})
			}
			if len(summaries) > 1 {
				m := tracejudge.CompareRanks(summaries)
				res.Multi = &m
			}
			res.Header = render.NewHeader("trace", version, hostname())
			w := cmd.OutOrStdout()
			ro := out.options(w)
			if cmd.Flags().Changed("rank") {
				ro.Rank = &rank
			}
			err = render.Write(w, format, &res, ro)
			if err == nil && len(skipped) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gpufeed: %d of %d files not read (listed at the end of the report); the report covers the others\n",
					len(skipped), len(skipped)+len(files)-failed)
			}
			if err == nil {
				err = writePerfetto(perfetto, &res)
			}
			return err
		},
	}
	out.add(cmd, documentFormats)
	cmd.Flags().IntVar(&rank, "rank", 0, "with a directory of rank files: this rank's verdict and findings (-v: its tables too)")
	addPerfettoFlag(cmd.Flags(), &perfetto)
	cmd.Flags().BoolVar(&lastStep, "include-last-step", false, "keep the last ProfilerStep (HTA leaves it out by default)")
	cmd.Flags().IntVar(&workers, "workers", 0, "decoder threads (0: one per CPU)")
	return cmd
}

// nothingRead is the error when no file could be read: the file's own error
// when there was one file, else each file with its reason, on one line (an
// error is printed as one escaped line).
func nothingRead(skipped []traceload.Skipped, readErr map[string]error) error {
	if len(skipped) == 1 {
		if err := readErr[skipped[0].File]; err != nil {
			return err
		}
		return errors.New(skipped[0].File + ": " + skipped[0].Reason)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "none of the %d files could be read as a trace", len(skipped))
	for i, s := range skipped {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s: %s", sep, s.File, s.Reason)
	}
	return errors.New(b.String())
}

// memoryShare is the part of a trace's uncompressed size the analysis aims
// to stay within (peak memory at most a quarter of the trace), with a
// margin for what the Go heap limit does not cover (binary, stacks).
const memoryShare = 0.25 * 0.85

// minMemoryLimit keeps small traces from making the collector run
// constantly: below it, fixed costs (decoder buffers, runtime) dominate.
const minMemoryLimit = 32 << 20

// limitMemory sets a soft heap limit proportional to the trace about to be
// read (its estimated uncompressed size: traceload.File.SizeHint, which for a
// gzip file cut short is what it holds, not what its last bytes claim), so
// the collector returns garbage before the process grows past it. Traces
// are decoded and analysed one at a time and only a small summary of each
// is kept, so the trace being read sets the peak. Without an estimate (a
// pipe) there is no limit. A GOMEMLIMIT set by the user wins.
func limitMemory(hint int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if hint <= 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		return
	}
	debug.SetMemoryLimit(max(int64(float64(hint)*memoryShare), minMemoryLimit))
}

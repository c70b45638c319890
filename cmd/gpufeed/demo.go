package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufeed/gpufeed/internal/demo"
	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/live"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/sim"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

func newDemoCmd() *cobra.Command {
	var (
		list     bool
		duration time.Duration
		interval time.Duration
		out      outputFlags
		record   string
		perfetto string
		launch   bool
		alone    bool
		prof     string
		sched    string
	)
	cmd := &cobra.Command{
		Use:   "demo [NAME]",
		Short: "Run a built-in scenario on a simulated GPU and diagnose it",
		Long: `demo starts a small workload that really produces one bottleneck on this
machine (a submission-bound launch loop, a pipeline of worker processes, readers waiting
on a throttled disk...), driving a simulated GPU (its own gpufeed simdev process), and
diagnoses it exactly as gpufeed diagnose --pid would (with --launch, from
the workload's start, as gpufeed diagnose -- COMMAND would). Without NAME it
runs the ` + demo.Default + ` scenario; --list shows them all.

Exit status: 0 when the verdict is the one the scenario produces, 1 when it
is not, 2 on a usage error (an unknown scenario, a flag it cannot use), 3
when the scenario could not run on this machine.`,
		Args: wrapArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				return listScenarios(cmd)
			}
			if err := checkWindow(duration, interval); err != nil {
				return err
			}
			name := demo.Default
			if len(args) == 1 {
				name = args[0]
			}
			sc, err := demo.Lookup(name)
			if err != nil {
				return asUsage(err)
			}
			if err := checkPerfetto(perfetto); err != nil {
				return err
			}
			if _, err := out.parse(); err != nil {
				return err
			}
			pfs, err := procfs.NewFS("", "")
			if err != nil {
				return err
			}
			if err := checkProbeModes(pfs, prof, sched); err != nil {
				return err
			}
			if alone && sc.Neighbours == 0 {
				return asUsage(fmt.Errorf("--without-neighbours: scenario %s runs no neighbours", sc.Name))
			}
			return runDemo(cmd, sc, duration, interval, out, record, perfetto, prof, sched, launch, alone)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the scenarios")
	addDurationFlag(f, &duration, "duration", sample.DefaultDuration, "how long to observe")
	addDurationFlag(f, &interval, "interval", sample.DefaultInterval, "per-thread sampling interval")
	out.add(cmd, liveFormats)
	addPerfettoFlag(f, &perfetto)
	f.StringVar(&record, "record", "", "also save the raw samples to `FILE` (judge it later with gpufeed report)")
	f.BoolVar(&alone, "without-neighbours", false, "run a scenario that has CPU hogs beside the job (noisy-neighbour) without them: the baseline to compare it with")
	f.StringVar(&prof, "profile", diagnose.ProfileAuto, "CPU profile, syscall summary and CUDA driver calls of the workload, as diagnose takes them: auto (where allowed; otherwise says what is missing), on (fail if not allowed) or off")
	f.StringVar(&sched, "sched", schedDefault(), "where the threads' run time, run-queue wait and context switches come from, as diagnose takes them: auto, bpf or proc")
	f.BoolVar(&launch, "launch", false, "observe from the workload's start, as diagnose -- COMMAND does (default: attach once it is working, as diagnose --pid does)")
	return cmd
}

func listScenarios(cmd *cobra.Command) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEXPECTED VERDICT\tWHAT IT RUNS")
	for _, s := range demo.Scenarios() {
		name := s.Name
		var notes []string
		if name == demo.Default {
			notes = append(notes, "default")
		}
		for _, old := range demo.Aliases(s.Name) {
			notes = append(notes, "was "+old)
		}
		if len(notes) > 0 {
			name += " (" + strings.Join(notes, ", ") + ")"
		}
		expect := string(s.Expect)
		if s.WithoutProbes != "" {
			expect += " (" + string(s.WithoutProbes) + " without the CPU profile)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, expect, s.Title)
	}
	return tw.Flush()
}

func runDemo(cmd *cobra.Command, sc demo.Scenario, duration, interval time.Duration, out outputFlags, record, perfetto, prof, sched string, launch, alone bool) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gpufeed demo %s: %s\n", sc.Name, sc.Title)
	run, err := demo.Start(ctx, sc, demo.Options{Exe: exe, WorkloadArgs: []string{demo.WorkloadCommand},
		Lifetime: duration + 2*time.Minute, Launch: launch, WithoutNeighbours: alone})
	if err != nil {
		return fmt.Errorf("demo %s: %w", sc.Name, err)
	}
	defer run.Stop()
	for _, n := range run.Notes {
		fmt.Fprintf(os.Stderr, "gpufeed demo %s: %s\n", sc.Name, n)
	}
	fmt.Fprintf(os.Stderr, "gpufeed demo %s: workload pid %d on a simulated GPU at %s; diagnosing for %v\n", sc.Name, run.PID, run.Socket, duration)

	fs, err := procfs.NewFS("", "")
	if err != nil {
		return err
	}
	cfg := sample.Config{FS: fs, PID: run.PID, Interval: interval, Duration: duration, Tool: "gpufeed " + version, Sched: sched}
	if launch {
		cfg.Command, cfg.Launched = run.Command, true
	}
	var src gpu.Source
	if sc.NoGPU {
		cfg.GPUSource = "no GPU: this scenario runs without one (as diagnose --device none)"
	} else {
		dev, err := sim.Dial(run.Socket)
		if err != nil {
			return err
		}
		defer dev.Close()
		src, cfg.GPU, cfg.GPUSource = dev, dev, dev.Name()
	}
	s, err := sample.New(cfg)
	if err != nil {
		return fmt.Errorf("demo %s: the workload cannot be watched: %w (%s)", sc.Name, err, run.Stderr())
	}
	// The probes diagnose takes (--profile auto by default): where the host
	// allows them, they tell a launching thread from one that spins in a
	// synchronisation or decodes its own input.
	startProfile, startBPF, err := diagnose.Probes(fs, prof, run.PID)
	if err != nil {
		return fmt.Errorf("--profile on: %w", err)
	}
	obs := diagnose.Observation{GPU: src, Record: record, Warn: func(m string) { warn("%s", m) },
		EndOfWindow: diagnose.EndOfWindow{FS: fs, Kmsg: kernlog.Reader{Path: kernlog.DefaultPath}}, Profile: startProfile, BPF: startBPF}
	var stream *live.Stream
	if format, _ := out.parse(); format == render.FormatJSONL {
		var win *live.Window
		obs.Tap, stream, win = jsonlTap(cmd.OutOrStdout(), fs, duration)
		win.SimPaths = []string{run.Socket}
	} else if isTerminal(os.Stderr) {
		obs.Progress, obs.ProgressDone = progress, progressDone
	}
	tl, err := diagnose.Observe(ctx, s, obs, nil)
	if tl == nil {
		return err
	}
	recErr := err // a recording that could not be written: a failure, after the report
	if stream != nil {
		if err := stream.Flush(); err != nil {
			return err
		}
	}
	run.Stop()
	rep := diagnose.Judge(tl, nil)
	if err := writeReport(cmd, "demo", rep, out); err != nil {
		return err
	}
	if err := perfettoReport(perfetto, rep); err != nil {
		return err
	}
	if recErr != nil {
		return recErr
	}
	if alone {
		fmt.Fprintf(os.Stderr, "gpufeed demo %s: verdict %s without the neighbours (the scenario's own verdict needs them: not checked)\n", sc.Name, verdictClass(rep))
		return nil
	}
	if problem := sc.Check(rep.Verdict, rep.Findings, probed(rep)); problem != "" {
		fmt.Fprintf(os.Stderr, "gpufeed demo %s: %s\n", sc.Name, problem)
		return exitCode(exitFound)
	}
	fmt.Fprintf(os.Stderr, "gpufeed demo %s: verdict %s, as this scenario produces\n", sc.Name, rep.Verdict.Class)
	return nil
}

// probed says whether a report holds the CPU profile or the driver calls
// (the probes that tell a launching thread from a spinning or decoding one).
func probed(rep *render.Report) bool {
	return (rep.CPUProfile != nil && rep.CPUProfile.State == profile.StateOn) ||
		(rep.DriverCalls != nil && rep.DriverCalls.State == profile.StateOn)
}

func verdictClass(rep *render.Report) string {
	if rep.Verdict == nil {
		return "none"
	}
	return string(rep.Verdict.Class)
}

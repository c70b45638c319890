package tracestats

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// SetupLaunches are the kernel launch calls that look like one-off set-up
// rather than steady-state submission: module loading on a kernel's first
// launch (CUDA lazy loading, ROCm code-object loading), lazy initialisation
// of the runtime, first-call compilation. The GPU idle time spent inside
// them is attributed to CauseSetup and kept out of the submission share.
type SetupLaunches struct {
	// Calls are the set-up launches, longest first.
	Calls []SetupCall `json:"calls,omitempty"`
	// TotalNs sums their durations.
	TotalNs int64 `json:"total_ns"`
	// MedianUs and MADUs describe the durations of every kernel launch in
	// scope; ThresholdUs is the duration above which a first launch is an
	// outlier (median + 3.5 MAD / 0.6745, and at least HTA's 50 us cut-off).
	MedianUs    float64 `json:"median_launch_us"`
	MADUs       float64 `json:"mad_launch_us"`
	ThresholdUs float64 `json:"threshold_us"`
	// Launches is the number of kernel launch calls the statistics cover.
	Launches int `json:"launches"`
}

// SetupCall is one set-up launch.
type SetupCall struct {
	// API is the runtime call as the trace names it (cudaLaunchKernel, hipLaunchKernel).
	API string `json:"api"`
	// Kernel is the operation it launched, the first of that name in the trace.
	Kernel  string `json:"kernel"`
	StartNs int64  `json:"start_ns"`
	DurNs   int64  `json:"dur_ns"`
}

// setupModifiedZ is the outlier cut-off on the modified z-score
// 0.6745 (x - median) / MAD: Iglewicz and Hoaglin, "How to Detect and Handle
// Outliers" (ASQC Basic References in Quality Control 16, 1993), recommend
// labelling |z| > 3.5 as potential outliers. The median and MAD are robust:
// the outliers being looked for cannot hide themselves by inflating them, as
// they would a mean and standard deviation.
const setupModifiedZ = 3.5

// minSetupLaunches: with fewer launch calls there is no steady state to
// compare a launch with.
const minSetupLaunches = 3

// findSetupLaunches marks the kernel launch calls in scope that are set-up.
// A launch is set-up when all three hold:
//  1. it launches the first operation of its name in the trace: module
//     loading and first-call compilation happen once per kernel, on its
//     first launch; a later slow launch of the same kernel is the steady
//     state (a descheduled thread, driver contention) and stays submission;
//  2. its duration is an outlier among all kernel launches in scope:
//     modified z-score above setupModifiedZ (with a MAD of zero, any launch
//     longer than the median);
//  3. it is longer than the launch runtime cut-off (HTA's 50 us): a launch within
//     it is an ordinary launch, whatever the spread of the others.
//
// It returns the set-up calls (by index into t.Runtime) and their summary.
func findSetupLaunches(s *scope, runtimeCutoff int64) (map[int32]bool, SetupLaunches) {
	t := s.t
	var info SetupLaunches
	var durs []float64
	for i := range t.Runtime {
		r := &t.Runtime[i]
		if r.Kind == trace.Launch && s.cpuIn(r.Start) {
			durs = append(durs, float64(r.Dur()))
		}
	}
	info.Launches = len(durs)
	if len(durs) < minSetupLaunches {
		return nil, info
	}
	slices.Sort(durs)
	med := Quantile(durs, 0.5)
	dev := make([]float64, len(durs))
	for i, d := range durs {
		dev[i] = math.Abs(d - med)
	}
	slices.Sort(dev)
	mad := Quantile(dev, 0.5)
	threshold := med
	if mad > 0 {
		threshold = med + setupModifiedZ*mad/0.6745
	}
	threshold = math.Max(threshold, float64(runtimeCutoff))
	info.MedianUs, info.MADUs, info.ThresholdUs = med/1e3, mad/1e3, threshold/1e3

	// The first launch of each operation name: the earliest launch call
	// (by start) whose linked operation has that name.
	type first struct {
		call  int32
		start int64
	}
	firsts := map[trace.NameID]first{}
	for i := range t.Runtime {
		r := &t.Runtime[i]
		if r.Kind != trace.Launch || r.GPU < 0 || !s.cpuIn(r.Start) {
			continue
		}
		name := t.GPU[r.GPU].Name
		if f, ok := firsts[name]; !ok || r.Start < f.start {
			firsts[name] = first{int32(i), r.Start}
		}
	}
	var setup map[int32]bool
	for name, f := range firsts {
		r := &t.Runtime[f.call]
		if float64(r.Dur()) <= threshold {
			continue
		}
		if setup == nil {
			setup = map[int32]bool{}
		}
		setup[f.call] = true
		info.Calls = append(info.Calls, SetupCall{API: t.Name(r.Name), Kernel: t.Name(name), StartNs: r.Start, DurNs: r.Dur()})
		info.TotalNs += r.Dur()
	}
	slices.SortFunc(info.Calls, func(a, b SetupCall) int {
		if c := cmp.Compare(b.DurNs, a.DurNs); c != 0 {
			return c
		}
		return cmp.Compare(a.StartNs, b.StartNs)
	})
	return setup, info
}

// Package tracestats derives, from one rank's trace (the trace model of
// internal/trace), the numbers its judgement reads: HTA-compatible
// breakdowns (idle time per stream, temporal breakdown, launch statistics,
// queue length), what Nsight-Systems-style rules measure (pageable copies,
// blocking copies and memsets, synchronisations, long gaps, low-use
// windows), the attribution of every GPU idle gap to what the launching CPU
// thread was doing instead, per step, and the one-off set-up launches.
//
// Everything here is a pure function of the trace and the Options; which
// parameters and thresholds apply, and what the numbers mean, is
// internal/judge/tracejudge's.
package tracestats

import (
	"cmp"
	"slices"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// Options are the derivation's parameters. Every one must be set: the
// caller (internal/judge/tracejudge) fills them from the shared thresholds.
type Options struct {
	// ConsecutiveKernelDelay separates kernel_wait from other idle (HTA: 30 us).
	ConsecutiveKernelDelay int64
	// RuntimeCutoff and LaunchDelayCutoff are HTA's launch-statistics
	// cut-offs (50 us, 100 us); a launch within RuntimeCutoff is never a
	// one-off set-up launch.
	RuntimeCutoff, LaunchDelayCutoff int64
	// GapThreshold is the smallest GPU gap the gaps rule lists (Nsight: 500 ms).
	GapThreshold int64
	// LowUsePct and LowUseChunks parametrise the low-use windows rule
	// (Nsight gpu_time_util: 50 %, 30 chunks).
	LowUsePct    float64
	LowUseChunks int
	// SmallKernelBlocksPerSM: a kernel giving each SM fewer thread blocks
	// than this counts as small.
	SmallKernelBlocksPerSM float64
	// IncludeLastStep keeps the last ProfilerStep (HTA's include_last_profiler_step).
	IncludeLastStep bool
}

// ScopeInfo describes the analysed part of the trace.
type ScopeInfo struct {
	// StartNs and EndNs bound the GPU work analysed, on the trace's clock.
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// Steps analysed and steps left out (the last one, HTA-style).
	Steps        int `json:"steps"`
	DroppedSteps int `json:"dropped_steps"`
	// GPUOps is the number of GPU operations analysed.
	GPUOps int    `json:"gpu_ops"`
	Note   string `json:"note,omitempty"`
}

// Rank is every quantity derived from one rank's trace.
type Rank struct {
	Scope ScopeInfo
	// HTA-compatible numbers.
	Temporal    Temporal
	Idle        []StreamIdle
	Launch      LaunchStats
	QueueLength []QueueLength
	// What the Nsight-Systems-style rules measure.
	Rules NsightRules
	// Attribution of device idle gaps to the launching thread's activity,
	// and the one-off set-up launches it keeps out of the submission share.
	Attribution   Attribution
	SetupLaunches SetupLaunches
	// Steps summarises each ProfilerStep in scope.
	Steps []StepSummary
	// CopyBusyPct is host-device copy time as a share of GPU busy time;
	// SmallKernelPct the share of kernel time in kernels with fewer thread
	// blocks than SMs (-1 when no kernel records blocks per SM).
	CopyBusyPct, SmallKernelPct float64

	scope *scope
}

// InScope reports whether a CPU-side timestamp lies in the analysed part
// of the trace.
func (r *Rank) InScope(ts int64) bool { return r.scope.cpuIn(ts) }

// Derive computes every quantity of one trace. onGap, when not nil, sees
// each device idle gap as it is attributed, with its causes and the step it
// falls in (GapDetail.StepPos): judgement weighs its evidence from them.
func Derive(t *trace.Trace, opt Options, onGap func(*GapDetail)) *Rank {
	s := newScope(t, opt.IncludeLastStep && t.Format == "kineto", t.Format == "kineto")
	r := &Rank{scope: s}
	r.Scope = ScopeInfo{StartNs: s.start, EndNs: s.end, Steps: len(s.steps), DroppedSteps: s.droppedSteps, GPUOps: s.work}
	switch {
	case s.filtered && s.droppedSteps > 0:
		r.Scope.Note = "the last ProfilerStep and the GPU work it launched are left out (HTA's default: the profiler usually stops inside it)"
	case len(s.steps) <= 1:
		r.Scope.Note = "fewer than two ProfilerSteps: the whole trace is analysed"
	}
	kinds := make([]KernelType, len(t.Names))
	for i, n := range t.Names {
		kinds[i] = ClassifyKernel(n)
	}
	r.Temporal, _ = temporalBreakdown(s, kinds)
	r.Idle = idleBreakdown(s, opt.ConsecutiveKernelDelay)
	r.Launch = launchStats(s, opt.RuntimeCutoff, opt.LaunchDelayCutoff)
	r.QueueLength = queueLengths(s)

	r.Rules = callRules(s)
	r.Rules.GapThresholdNs, r.Rules.LowUsePct = opt.GapThreshold, opt.LowUsePct
	stepIdle := make([]int64, len(s.steps))
	stepCause := make([]ByCause, len(s.steps))
	setup, setupInfo := findSetupLaunches(s, opt.RuntimeCutoff)
	r.SetupLaunches = setupInfo
	at, busy, byDev := attribute(s, opt.ConsecutiveKernelDelay, s.steps, setup, func(gd *GapDetail) {
		if gd.StepPos >= 0 {
			stepIdle[gd.StepPos] += gd.DurNs
			for c, v := range gd.ByCause {
				stepCause[gd.StepPos][c] += v
			}
		}
		if onGap != nil {
			onGap(gd)
		}
		if gd.DurNs >= opt.GapThreshold {
			r.Rules.Gaps = append(r.Rules.Gaps, Gap{Device: gd.Device, StartNs: gd.StartNs, DurNs: gd.DurNs})
		}
	})
	r.Attribution = at
	slices.SortFunc(r.Rules.Gaps, func(a, b Gap) int {
		if c := cmp.Compare(b.DurNs, a.DurNs); c != 0 {
			return c
		}
		return cmp.Compare(a.StartNs, b.StartNs)
	})
	for _, dev := range sortedDevices(byDev) {
		b := busy[dev]
		r.Rules.LowUse = append(r.Rules.LowUse, lowUse(t, byDev[dev], b[0].Start, b[len(b)-1].End, opt.LowUseChunks, opt.LowUsePct)...)
	}
	r.Steps = summariseSteps(s, busy)
	for i := range r.Steps {
		r.Steps[i].IdleNs, r.Steps[i].ByCause = stepIdle[i], stepCause[i]
	}
	r.CopyBusyPct, r.SmallKernelPct = gpuWorkStats(s, busy, opt.SmallKernelBlocksPerSM)
	return r
}

func sortedDevices(m map[int32][]int32) []int32 {
	out := make([]int32, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// gpuWorkStats returns host-device copy time as a share of busy time, and
// the share of kernel time in kernels with fewer than smallBlocksPerSM
// blocks per SM (-1 when no kernel records blocks per SM).
func gpuWorkStats(s *scope, busy map[int32][]span, smallBlocksPerSM float64) (copyBusyPct, smallKernelPct float64) {
	t := s.t
	var copyNs, kernelNs, smallNs, busyNs int64
	for _, b := range busy {
		busyNs += total(b)
	}
	for i := range t.GPU {
		if !s.gpu[i] {
			continue
		}
		g := &t.GPU[i]
		switch {
		case g.Kind == trace.Memcpy && (g.Copy == trace.HtoD || g.Copy == trace.DtoH):
			copyNs += g.Dur()
		case g.Kind == trace.Kernel && g.BlocksPerSM > 0:
			kernelNs += g.Dur()
			if float64(g.BlocksPerSM) < smallBlocksPerSM {
				smallNs += g.Dur()
			}
		}
	}
	if busyNs > 0 {
		copyBusyPct = min(100, 100*float64(copyNs)/float64(busyNs))
	}
	smallKernelPct = -1
	if kernelNs > 0 {
		smallKernelPct = 100 * float64(smallNs) / float64(kernelNs)
	}
	return copyBusyPct, smallKernelPct
}

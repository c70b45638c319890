// Package analysis turns one trace (one rank) into numbers and a verdict:
// HTA-compatible breakdowns (idle time per stream, temporal breakdown,
// launch statistics, queue length), Nsight-Systems-style rules (pageable
// copies, blocking copies and memsets, synchronisations, long gaps, low-use
// windows), and, beyond both, the attribution of every GPU idle gap to what
// the launching CPU thread was doing instead, per step, ending in a
// finding.Verdict with the classes live diagnose uses.
package analysis

import (
	"cmp"
	"slices"

	"github.com/gpufeed/gpufeed/internal/judge/thresholds"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// Options tune the analyses; the zero value means the documented defaults.
type Options struct {
	// ConsecutiveKernelDelay separates kernel_wait from other idle (HTA: 30 us).
	ConsecutiveKernelDelay int64
	// RuntimeCutoff and LaunchDelayCutoff are HTA's launch-statistics cut-offs (50 us, 100 us).
	RuntimeCutoff, LaunchDelayCutoff int64
	// GapThreshold is the smallest GPU gap listed by the gaps rule (Nsight: 500 ms).
	GapThreshold int64
	// LowUsePct and LowUseChunks parametrise the low-use windows rule
	// (Nsight gpu_time_util: 50 %, 30 chunks).
	LowUsePct    float64
	LowUseChunks int
	// IncludeLastStep keeps the last ProfilerStep (HTA's include_last_profiler_step).
	IncludeLastStep bool
}

func (o Options) withDefaults() Options {
	if o.ConsecutiveKernelDelay <= 0 {
		o.ConsecutiveKernelDelay = thresholds.ConsecutiveKernelDelay.Nanoseconds()
	}
	if o.RuntimeCutoff <= 0 {
		o.RuntimeCutoff = thresholds.LaunchRuntimeOutlier.Nanoseconds()
	}
	if o.LaunchDelayCutoff <= 0 {
		o.LaunchDelayCutoff = thresholds.LaunchDelayOutlier.Nanoseconds()
	}
	if o.GapThreshold <= 0 {
		o.GapThreshold = NsightGapThreshold
	}
	if o.LowUsePct <= 0 {
		o.LowUsePct = NsightLowUsePct
	}
	if o.LowUseChunks <= 0 {
		o.LowUseChunks = NsightLowUseChunks
	}
	return o
}

// Report is everything the analysis of one rank found.
type Report struct {
	Source string `json:"source"`
	Format string `json:"format"`
	// Rank is the distributed rank, -1 when unknown.
	Rank int `json:"rank"`
	// Scope says what part of the trace was analysed.
	Scope ScopeInfo `json:"scope"`

	// HTA-compatible numbers.
	Temporal    Temporal      `json:"temporal_breakdown"`
	Idle        []StreamIdle  `json:"idle_time_breakdown"`
	Launch      LaunchStats   `json:"kernel_launch_stats"`
	QueueLength []QueueLength `json:"queue_length"`

	// Nsight-Systems-style rules.
	Rules Rules `json:"rules"`

	// Attribution of device idle gaps to the launching thread's activity.
	Attribution Attribution `json:"attribution"`
	// SetupLaunches are the one-off set-up launches the attribution keeps
	// out of the submission share.
	SetupLaunches SetupLaunches `json:"setup_launches"`
	// Confidence says what the verdict's confidence is made of.
	Confidence Confidence `json:"confidence"`
	// Shares are the candidate bottlenecks as shares of the device span.
	Shares Shares `json:"shares"`
	// Steps summarises each ProfilerStep in scope.
	Steps []StepSummary `json:"steps,omitempty"`

	Verdict  finding.Verdict   `json:"verdict"`
	Findings []finding.Finding `json:"findings"`

	Warnings []string     `json:"warnings,omitempty"`
	Counts   trace.Counts `json:"counts"`
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

// Analyze runs every analysis on one trace.
func Analyze(t *trace.Trace, opt Options) *Report {
	opt = opt.withDefaults()
	s := newScope(t, opt.IncludeLastStep && t.Format == "kineto", t.Format == "kineto")
	r := &Report{
		Source:   t.Source,
		Format:   t.Format,
		Rank:     t.Meta.Rank,
		Warnings: t.Warnings,
		Counts:   t.Counts,
	}
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
	setup, setupInfo := findSetupLaunches(s)
	ev := newEvidence(len(s.steps))
	r.SetupLaunches = setupInfo
	at, busy, byDev := attribute(s, opt.ConsecutiveKernelDelay, s.steps, setup, func(gd *GapDetail) {
		if gd.stepPos >= 0 {
			stepIdle[gd.stepPos] += gd.DurNs
			for c, v := range gd.ByCause {
				stepCause[gd.stepPos][c] += v
			}
		}
		ev.addGap(gd)
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
	copyBusy, small := gpuWorkStats(s, busy)
	r.Shares = computeShares(&r.Attribution, r.Attribution.AfterSync, copyBusy, small)
	var byID map[string]*finding.Finding
	vo := newVocab(s)
	r.Findings, byID = buildFindings(r, r.Shares, vo)
	r.Verdict, r.Confidence = decide(r.Shares, s.work, r.Attribution.SpanNs, byID, ev, vo)
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
// the share of kernel time in kernels with less than one block per SM (-1
// when no kernel records blocks per SM).
func gpuWorkStats(s *scope, busy map[int32][]span) (copyBusyPct, smallKernelPct float64) {
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
			if float64(g.BlocksPerSM) < thresholds.TooLittleWorkBlocksPerSM {
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

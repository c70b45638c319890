// Package tracejudge judges one rank's profiler trace: from the quantities
// internal/derive/tracestats derives (HTA-compatible breakdowns,
// Nsight-Systems-style call statistics, the attribution of every GPU idle
// gap to what the launching CPU thread was doing instead) it draws findings
// and a finding.Verdict with the classes live diagnose uses, judged against
// the same thresholds (internal/judge/thresholds), and compares ranks
// (stragglers).
package tracejudge

import (
	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// Options tune the analyses; the zero value means the documented defaults.
type Options struct {
	// Derive is the derivation's settings (HTA's and Nsight's cut-offs,
	// the last step); a zero field takes the default the judge's
	// thresholds give it.
	Derive tracestats.Options
	// KeepGaps keeps every device idle gap with its attribution in the
	// report (RankReport.Gaps), for the timeline renderers.
	KeepGaps bool
}

// derivation is the derivation's options with their defaults.
func (o Options) derivation() tracestats.Options {
	d := o.Derive
	if d.ConsecutiveKernelDelay <= 0 {
		d.ConsecutiveKernelDelay = thresholds.ConsecutiveKernelDelay.Nanoseconds()
	}
	if d.RuntimeCutoff <= 0 {
		d.RuntimeCutoff = thresholds.LaunchRuntimeOutlier.Nanoseconds()
	}
	if d.LaunchDelayCutoff <= 0 {
		d.LaunchDelayCutoff = thresholds.LaunchDelayOutlier.Nanoseconds()
	}
	if d.GapThreshold <= 0 {
		d.GapThreshold = thresholds.NsightGapThresholdNs
	}
	if d.LowUsePct <= 0 {
		d.LowUsePct = thresholds.NsightLowUsePct
	}
	if d.LowUseChunks <= 0 {
		d.LowUseChunks = thresholds.NsightLowUseChunks
	}
	if d.SmallKernelBlocksPerSM <= 0 {
		d.SmallKernelBlocksPerSM = thresholds.TooLittleWorkBlocksPerSM
	}
	return d
}

// RankReport is everything the analysis of one rank's trace found: the
// derived numbers, the findings and the verdict.
type RankReport struct {
	Source string `json:"source"`
	Format string `json:"format"`
	// Rank is the distributed rank, -1 when unknown.
	Rank int `json:"rank"`
	// Scope says what part of the trace was analysed.
	Scope tracestats.ScopeInfo `json:"scope"`

	// HTA-compatible numbers.
	Temporal    tracestats.Temporal      `json:"temporal_breakdown"`
	Idle        []tracestats.StreamIdle  `json:"idle_time_breakdown"`
	Launch      tracestats.LaunchStats   `json:"kernel_launch_stats"`
	QueueLength []tracestats.QueueLength `json:"queue_length"`

	// Nsight-Systems-style rules.
	Rules tracestats.NsightRules `json:"rules"`

	// Attribution of device idle gaps to the launching thread's activity.
	Attribution tracestats.Attribution `json:"attribution"`
	// SetupLaunches are the one-off set-up launches the attribution keeps
	// out of the submission share.
	SetupLaunches tracestats.SetupLaunches `json:"setup_launches"`
	// Confidence says what the verdict's confidence is made of.
	Confidence Confidence `json:"confidence"`
	// Shares are the candidate bottlenecks as shares of the device span.
	Shares Shares `json:"shares"`
	// Steps summarises each ProfilerStep in scope.
	Steps []tracestats.StepSummary `json:"steps,omitempty"`

	Verdict  finding.Verdict   `json:"verdict"`
	Findings []finding.Finding `json:"findings"`

	Warnings []string     `json:"warnings,omitempty"`
	Counts   trace.Counts `json:"counts"`

	// Gaps are every device idle gap with its attribution, in the order
	// found; kept only with Options.KeepGaps.
	Gaps []tracestats.GapDetail `json:"-"`
}

// Analyze derives the numbers of one trace and judges them.
func Analyze(t *trace.Trace, opt Options) *RankReport {
	ev := newEvidence(0)
	onGap := ev.addGap
	var gaps []tracestats.GapDetail
	if opt.KeepGaps {
		onGap = func(g *tracestats.GapDetail) { ev.addGap(g); gaps = append(gaps, *g) }
	}
	d := tracestats.Derive(t, opt.derivation(), onGap)
	ev.setSteps(d.Scope.Steps)
	r := &RankReport{
		Source:   t.Source,
		Format:   t.Format,
		Rank:     t.Meta.Rank,
		Warnings: t.Warnings,
		Counts:   t.Counts,

		Scope: d.Scope, Temporal: d.Temporal, Idle: d.Idle, Launch: d.Launch, QueueLength: d.QueueLength,
		Rules: d.Rules, Attribution: d.Attribution, SetupLaunches: d.SetupLaunches, Steps: d.Steps,
		Gaps: gaps,
	}
	r.Shares = computeShares(&r.Attribution, r.Attribution.AfterSync, d.CopyBusyPct, d.SmallKernelPct)
	var byID map[string]*finding.Finding
	vo := newVocab(t, d.InScope)
	r.Findings, byID = judgeRules(r, r.Shares, vo)
	r.Verdict, r.Confidence = decide(r.Shares, r.Scope.GPUOps, r.Attribution.SpanNs, byID, ev, vo)
	finding.VerdictFirst(&r.Verdict, r.Findings)
	return r
}

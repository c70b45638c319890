package tracejudge

import (
	"path/filepath"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// Rule is one judgement of one rank's trace, shaped like a live rule
// (internal/judge): one finding ID and the function that draws that
// finding from the rank's derived numbers, nil when it has nothing to say.
// A finding whose cause is the same as a live finding's carries the live
// ID (CauseID; docs/RULES.md lists the mapping). A new rule's ID needs an
// entry in explain.txt, or in internal/judge's when it is a live ID.
type Rule struct {
	ID  string
	Run func(in *Input) *finding.Finding
}

// registry lists the rules in the order their findings are drawn (the
// report then puts the verdict's first, internal/finding's VerdictFirst).
var registry = []Rule{
	{"no-gpu-activity", ruleNoGPUActivity},
	{"gpu-idle", ruleGPUIdle},
	{"gpu-busy", ruleGPUBusy},
	{"host-wait-dataloader", ruleHostWaitDataLoader},
	{"input-bound-steps", ruleInputBoundSteps},
	{"launch-thread-waits-on-gpu", ruleWaitsOnGPU},
	{"sync-calls", ruleSyncCalls},
	{"sync-copies", ruleSyncCopies},
	{"sync-memsets", ruleSyncMemsets},
	{"pageable-copies", rulePageableCopies},
	{"copies-dominate", ruleCopiesDominate},
	{"launch-thread-saturated", ruleSubmission},
	{"setup-launches", ruleSetupLaunches},
	{"short-kernels", ruleShortKernels},
	{"launch-runtime-outliers", ruleLaunchRuntimeOutliers},
	{"launch-delay-outliers", ruleLaunchDelayOutliers},
	{"launch-queue-full", ruleLaunchQueueFull},
	{"gpu-side-wait", ruleGPUSideWait},
	{"host-wait-other-api", ruleHostWaitOtherAPI},
	{"host-wait-untraced", ruleHostWaitUntraced},
	{"gpu-underfed", ruleSmallKernels},
	{"gpu-gaps", ruleGPUGaps},
	{"low-use-windows", ruleLowUseWindows},
	{"trace-problems", ruleTraceProblems},
}

// Rules lists every trace rule, in the order they run.
func Rules() []Rule { return append([]Rule(nil), registry...) }

// Input is what every trace rule reads: the rank's derived numbers, the
// shares of the span each cause took, the trace's own names for its calls,
// and what every piece of evidence cites.
type Input struct {
	// Rank is the rank's report being judged; Shares its time shares.
	Rank   *RankReport
	Shares Shares
	// vocab names the trace's runtime calls as its profiler wrote them.
	vocab *vocab
	// ctx: the window and file every piece of evidence cites.
	ctx evidenceCtx
	// Attribution is where the GPU's idle gaps went; ByCause its time by cause.
	Attribution *tracestats.Attribution
	ByCause     *tracestats.ByCause
	// HasWork: the trace holds GPU operations.
	HasWork bool
}

func newInput(r *RankReport, sh Shares, v *vocab) *Input {
	return &Input{Rank: r, Shares: sh, vocab: v, ctx: evidenceCtx{window: windowText(r), file: filepath.Base(r.Source)},
		Attribution: &r.Attribution, ByCause: &r.Attribution.ByCause, HasWork: r.Scope.GPUOps > 0}
}

// sev is a cause finding's severity: a warning from HighSharePct of the span.
func (in *Input) sev(share float64) finding.Severity {
	if share >= thresholds.HighSharePct {
		return finding.Warning
	}
	return finding.Info
}

// judgeRules runs every rule. It returns the findings by id as well, for
// the verdict.
func judgeRules(r *RankReport, sh Shares, v *vocab) ([]finding.Finding, map[string]*finding.Finding) {
	in := newInput(r, sh, v)
	var out []finding.Finding
	for _, rule := range registry {
		if f := rule.Run(in); f != nil {
			f.ID = rule.ID
			out = append(out, *f)
		}
	}
	byID := map[string]*finding.Finding{}
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	return out, byID
}

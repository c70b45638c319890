package tracejudge

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Shares are the candidate bottlenecks of a rank, each as a percentage of
// the device span (the time the GPU should have been busy).
type Shares struct {
	// IdlePct is all device idle time.
	IdlePct float64 `json:"idle_pct"`
	// Input: the launching thread waited in DataLoader __next__.
	Input float64 `json:"input_pct"`
	// Sync: the thread was blocked in a synchronisation, or busy refilling
	// the queue after a synchronisation had drained it.
	Sync float64 `json:"sync_pct"`
	// Transfer: the thread was inside a pageable "async" copy (while the GPU
	// waited for it to launch, or while already-queued work did not start);
	// plus the copy time itself when host-device copies are most of the
	// GPU's work.
	Transfer float64 `json:"transfer_pct"`
	// Submission: the thread was busy in CPU operators or launch calls
	// (not after a sync), plus launch latency between operations.
	Submission float64 `json:"submission_pct"`
	// OtherAPI: the thread was inside CUDA calls that launch nothing
	// (allocation, frees, stream creation, module loading).
	OtherAPI float64 `json:"other_api_pct"`
	// Setup: the thread was inside one-off set-up launches (a kernel's
	// first launch, far longer than the others: module loading, lazy
	// initialisation, first-call compilation). Not submission: the steady
	// state does not pay it.
	Setup float64 `json:"setup_pct"`
	// Untraced: the thread was in nothing the profiler recorded.
	Untraced float64 `json:"untraced_pct"`
	// GPUWait: operations were enqueued in time but waited on other streams,
	// events or devices.
	GPUWait float64 `json:"gpu_wait_pct"`
	// Unattributed: the operation after the gap had no launch record.
	Unattributed float64 `json:"unattributed_pct"`
	// CopyBusyPct is host-device copy time as a share of GPU busy time.
	CopyBusyPct float64 `json:"copy_busy_pct"`
	// SmallKernelPct is the share of kernel time spent in kernels with fewer
	// thread blocks than SMs (Kineto's blocks per SM below one); -1 when the
	// trace does not say.
	SmallKernelPct float64 `json:"small_kernel_pct"`
}

// computeShares derives Shares from the attribution and GPU statistics.
func computeShares(at *tracestats.Attribution, afterSync tracestats.ByCause, copyBusyPct, smallKernelPct float64) Shares {
	sh := Shares{CopyBusyPct: copyBusyPct, SmallKernelPct: smallKernelPct}
	if at.SpanNs <= 0 {
		return sh
	}
	pct := func(ns int64) float64 { return 100 * float64(ns) / float64(at.SpanNs) }
	b := &at.ByCause
	sh.IdlePct = pct(at.IdleNs)
	sh.Input = pct(b[tracestats.CauseDataLoader])
	sh.Sync = pct(b[tracestats.CauseSync] + afterSync[tracestats.CauseCPUOps] + afterSync[tracestats.CauseLaunchAPI] + afterSync[tracestats.CauseOtherAPI] + afterSync[tracestats.CauseUntraced])
	// GPU-side waits while the host was stuck in a pageable copy count as
	// transfer: the driver stages such copies synchronously.
	stagedWait := at.DuringGPUWait[tracestats.CausePageableCopy]
	sh.Transfer = pct(b[tracestats.CausePageableCopy] + stagedWait)
	if copyBusyPct >= thresholds.CopiesDominatePct {
		sh.Transfer += (100 - sh.IdlePct) * copyBusyPct / 100
	}
	sh.Submission = pct(b[tracestats.CauseCPUOps] - afterSync[tracestats.CauseCPUOps] + b[tracestats.CauseLaunchAPI] - afterSync[tracestats.CauseLaunchAPI] + b[tracestats.CauseLaunchLatency])
	sh.OtherAPI = pct(b[tracestats.CauseOtherAPI] - afterSync[tracestats.CauseOtherAPI])
	sh.Setup = pct(b[tracestats.CauseSetup])
	sh.Untraced = pct(b[tracestats.CauseUntraced] - afterSync[tracestats.CauseUntraced])
	sh.GPUWait = pct(b[tracestats.CauseGPUWait] - stagedWait)
	sh.Unattributed = pct(b[tracestats.CauseNoLaunch])
	return sh
}

// hostWait is the share of the span the GPU idled while the launching
// thread was the one not enqueuing work: every host-side cause.
func (sh Shares) hostWait() float64 {
	return sh.Input + sh.Sync + sh.Transfer + sh.Submission + sh.OtherAPI + sh.Setup + sh.Untraced
}

// partOfIdle says how much of the idle time one cause holds: "mostly" only
// when it is at least half of it, the bare share otherwise.
func partOfIdle(share, idle float64) string {
	if idle > 0 && 2*share >= idle {
		return fmt.Sprintf("mostly (%.0f %% of the time)", share)
	}
	return fmt.Sprintf("%.0f %% of the time", share)
}

// isChurn: the other-API finding names allocator churn (churnClaim).
func isChurn(f *finding.Finding) bool {
	return f != nil && f.Decision == churnDecision
}

// candidate is one class a rank could be bound by, with its share.
type candidate struct {
	class   finding.Class
	share   float64
	finding string
}

// decide picks the verdict from the shares. The rules, in order:
//  1. No GPU work: inconclusive.
//  2. Idle below GPUBoundIdleMaxPct: the GPU is fed. Too-little-work when
//     most kernel time runs kernels that leave SMs empty, GPU-bound otherwise.
//  3. Otherwise the largest cause among input, sync, transfer and
//     submission wins when it reaches ModerateSharePct of the span; when the
//     largest share is GPU-side waiting, untraced host time, unlinked
//     operations, CUDA calls that launch nothing or one-off set-up
//     launches, the trace cannot say why the steady state waits and the
//     verdict is inconclusive.
//
// The confidence of a class verdict is its strength (how strongly the
// shares point to the class) times the evidence behind it (evidence.go: how
// many gaps and steps carry it, over how much GPU activity); with evidence
// below thresholds.TraceEvidenceMin the verdict is inconclusive and names the leading cause.
func decide(sh Shares, ops int, spanNs int64, byID map[string]*finding.Finding, ev *evidence, vo *vocab) (finding.Verdict, Confidence) {
	v, why := decideClass(sh, ops, spanNs, byID, vo)
	if v.Class == finding.Inconclusive {
		c := Confidence{Gaps: -1, Steps: -1, SpanNs: spanNs}
		c.explain(v, "")
		return v, c
	}
	var basisClass finding.Class // gpu-bound and too-little-work rest on busy time
	if evIndex(v.Class) >= 0 {
		basisClass = v.Class
	}
	c := ev.basis(basisClass, spanNs)
	c.Strength = v.Confidence
	if c.Evidence < thresholds.TraceEvidenceMin {
		lead := v
		v = finding.Verdict{
			Class:   finding.Inconclusive,
			Summary: fmt.Sprintf("The leading candidate is %s (%s), but it rests on %s: too little to tell a pattern from an accident.", lead.Class, why, c.describe()),
			Because: lead.Because,
			Missing: fmt.Sprintf("more of the same: a cause carried by at least %.0f gaps over %.0f steps and %.0f ms of GPU activity; profile more steps (torch.profiler.schedule(wait=1, warmup=1, active=3))", thresholds.TraceEvidenceFullGaps, thresholds.TraceEvidenceFullSteps, float64(thresholds.TraceEvidenceFullSpanNs)/1e6),
		}
		c.explain(v, why)
		return v, c
	}
	v.Confidence = math.Round(c.Strength*c.Evidence*100) / 100
	c.explain(v, why)
	return v, c
}

// decideClass picks the class and its strength (as Confidence), and says
// why in a few words.
func decideClass(sh Shares, ops int, spanNs int64, byID map[string]*finding.Finding, vo *vocab) (finding.Verdict, string) {
	if ops == 0 {
		return finding.Verdict{
			Class:   finding.Inconclusive,
			Summary: "The trace holds no GPU operations, so there is nothing to explain.",
			Missing: "record GPU activity: torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]), or trace a GPU job with nsys --trace=cuda",
		}, ""
	}
	if ops < thresholds.TraceMinGPUOps || spanNs < thresholds.TraceMinSpanNs {
		return finding.Verdict{
			Class:   finding.Inconclusive,
			Summary: fmt.Sprintf("The trace holds %s over %.3f ms: too little to tell a pattern from an accident.", safetext.Count(ops, "GPU operation", "GPU operations"), float64(spanNs)/1e6),
			Missing: fmt.Sprintf("a longer trace: at least %d GPU operations over %.0f ms, ideally several ProfilerSteps (torch.profiler.schedule(wait=1, warmup=1, active=3))", thresholds.TraceMinGPUOps, float64(thresholds.TraceMinSpanNs)/1e6),
		}, ""
	}
	if sh.IdlePct < thresholds.GPUBoundIdleMaxPct && sh.Transfer < thresholds.ModerateSharePct {
		if sh.SmallKernelPct >= thresholds.TooLittleWorkKernelTimePct {
			return verdictFor(finding.TooLittleWork, math.Min(0.5+0.4*sh.SmallKernelPct/100, 0.9), byID, CauseID[finding.TooLittleWork],
					fmt.Sprintf("The GPU is busy %.0f %% of the time, but %.0f %% of kernel time runs kernels with fewer thread blocks than SMs: too little parallel work per kernel.", 100-sh.IdlePct, sh.SmallKernelPct),
					"Give each kernel more work: a bigger batch, fused operations (torch.compile), fewer tiny per-sample kernels."),
				fmt.Sprintf("%.0f %% of kernel time in kernels with fewer thread blocks than SMs", sh.SmallKernelPct)
		}
		conf := 0.6 + 0.4*(1-sh.IdlePct/thresholds.GPUBoundIdleMaxPct)
		return verdictFor(finding.GPUBound, conf, byID, CauseID[finding.GPUBound],
				fmt.Sprintf("The GPU is busy %.1f %% of the time: the CPU keeps it fed.", 100-sh.IdlePct),
				"The CPU is not the problem: look at kernel efficiency (Nsight Compute), precision and batch size, and at GPU clocks and throttling."),
			fmt.Sprintf("idle %.1f %% of the span, below %.0f %%", sh.IdlePct, thresholds.GPUBoundIdleMaxPct)
	}
	cands := []candidate{
		{finding.Preprocessing, sh.Input, CauseID[finding.Preprocessing]},
		{finding.SyncBound, sh.Sync, CauseID[finding.SyncBound]},
		{finding.TransferBound, sh.Transfer, CauseID[finding.TransferBound]},
		{finding.SubmissionBound, sh.Submission, CauseID[finding.SubmissionBound]},
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.share > b.share:
			return -1
		case a.share < b.share:
			return 1
		}
		return 0
	})
	best := cands[0]
	if best.class == finding.TransferBound && byID["pageable-copies"] == nil {
		best.finding = "copies-dominate"
	}
	unexplained := max(sh.GPUWait, sh.Untraced, sh.Unattributed, sh.OtherAPI, sh.Setup)
	if best.share < thresholds.ModerateSharePct || unexplained > best.share {
		v := finding.Verdict{Class: finding.Inconclusive}
		switch {
		case sh.GPUWait >= unexplained && sh.GPUWait >= thresholds.ModerateSharePct:
			v.Because = []string{"gpu-side-wait"}
			// The CPU is cleared only when the launching thread's side
			// (every host-wait share) is below what counts as a cause;
			// otherwise the verdict says how much it holds, so it never
			// stands beside a finding that names a CPU cause.
			if host := sh.hostWait(); host < thresholds.ModerateSharePct {
				v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time, %s waiting on its own dependencies (other streams, events, collectives), not on the CPU (%.0f %%).", sh.IdlePct, partOfIdle(sh.GPUWait, sh.IdlePct), host)
				v.Missing = "the wait is on the GPU side: compare ranks (stragglers) and stream dependencies; the CPU is not what delays the work"
			} else {
				v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time: %s waiting on its own dependencies (other streams, events, collectives), the largest single cause; the launching thread's causes together hold %.0f %% of the time.", sh.IdlePct, partOfIdle(sh.GPUWait, sh.IdlePct), host)
				v.Missing = fmt.Sprintf("which side to fix first: the GPU-side wait (compare ranks for stragglers, look at stream dependencies) or the launching thread's %.0f %%, spread over causes none of which leads (its findings)", host)
			}
			v.Decision = "Overlap communication with computation and look for a slow rank or a serialising stream dependency."
		case sh.Untraced >= unexplained && sh.Untraced >= thresholds.ModerateSharePct:
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time while the launching thread ran nothing the profiler recorded (%.0f %%).", sh.IdlePct, sh.Untraced)
			v.Because = []string{"host-wait-untraced"}
			v.Missing = "what the launching thread did in the gaps: profile with with_stack=True (Python frames), or run gpufeed diagnose live to see whether it was running, sleeping or blocked"
		case sh.Setup >= unexplained && sh.Setup >= thresholds.ModerateSharePct:
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time, %s while the launching thread sat in one-off set-up launches (first launches of their kernels, far longer than the others: module loading, lazy initialisation, first-call compilation), not in the steady state.", sh.IdlePct, partOfIdle(sh.Setup, sh.IdlePct))
			v.Because = []string{"setup-launches"}
			v.Missing = "steady-state steps: the window is dominated by set-up; profile after a warm-up (torch.profiler.schedule(wait=1, warmup=1, active=3))"
		case sh.OtherAPI >= unexplained && sh.OtherAPI >= thresholds.ModerateSharePct && isChurn(byID["host-wait-other-api"]):
			// Recurring in the steady state: allocator churn, named by
			// its finding. No class holds it (a synchronising free and
			// allocation calls on the launching thread), so the verdict
			// stays inconclusive, but it says the cause and what to do.
			f := byID["host-wait-other-api"]
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time. %s", sh.IdlePct, f.Claim)
			v.Because = []string{"host-wait-other-api"}
			v.Missing = "which tensors are freed and allocated each step: profile with profile_memory=True and with_stack=True, or record the allocator's history (torch.cuda.memory._record_memory_history)"
			v.Decision = f.Decision
		case sh.OtherAPI >= unexplained && sh.OtherAPI >= thresholds.ModerateSharePct:
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time while the launching thread sat in %s calls that launch nothing (%.0f %%): allocation, frees, stream creation, module loading.", sh.IdlePct, vo.api(), sh.OtherAPI)
			v.Because = []string{"host-wait-other-api"}
			v.Missing = "steady-state steps: this looks like set-up inside the profiled window; profile later steps (torch.profiler.schedule(wait=1, warmup=1, active=3))"
			v.Decision = "If these calls recur every step (allocation churn), keep buffers allocated, drop torch.cuda.empty_cache() from the loop, and set PYTORCH_CUDA_ALLOC_CONF to reduce fragmentation."
		case sh.Unattributed >= unexplained && sh.Unattributed >= thresholds.ModerateSharePct:
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time, but the operations after the gaps cannot be tied to the calls that launched them (no launch record, or a correlation id that is not unique).", sh.IdlePct)
			v.Missing = fmt.Sprintf("%s runtime events linked to the GPU operations by unique correlation ids: record CPU activity with the device activity (a trace whose ids repeat was damaged or merged from several)", vo.api())
		default:
			v.Summary = fmt.Sprintf("The GPU is idle %.0f %% of the time, spread over causes none of which reaches %.0f %% of the time.", sh.IdlePct, thresholds.ModerateSharePct)
			v.Missing = "a longer trace (more steps) or a live run (gpufeed diagnose) to see CPU saturation and I/O"
		}
		return v, ""
	}
	total := sh.Input + sh.Sync + sh.Transfer + sh.Submission + sh.OtherAPI + sh.Setup + sh.Untraced + sh.GPUWait + sh.Unattributed
	dominance := 0.0
	if total > 0 {
		dominance = 100 * best.share / total
	}
	conf := 0.4 + 0.3*math.Min(1, best.share/thresholds.HighSharePct) + 0.3*math.Min(1, dominance/thresholds.DominantCausePct)
	if best.class == finding.Preprocessing {
		// A trace shows the wait, not whether workers were busy in CPU or
		// in I/O: preprocessing versus storage needs a live run.
		conf *= 0.85
	}
	// The lead over the next cause: a class a quarter ahead of the next is
	// not one twice the next. A lead of half the winner's share or more
	// counts in full; a close second lowers the confidence and is named.
	next := cands[1]
	lead := 0.0
	if best.share > 0 {
		lead = (best.share - next.share) / best.share
	}
	conf *= 0.5 + 0.5*math.Min(1, lead/traceFullLead)
	f := byID[best.finding]
	summary, decision := "", ""
	if f != nil {
		summary, decision = f.Claim, f.Decision
	}
	why := fmt.Sprintf("%.0f %% of the span, %.0f %% of all idle causes", best.share, dominance)
	if next.share >= thresholds.ModerateSharePct && lead < traceFullLead {
		summary += fmt.Sprintf(" Close behind: %s, %.1f %% of the time (%s).", next.class, next.share, closeBehind[next.class])
		why += fmt.Sprintf(", %.0f %% ahead of %s (%.0f %%)", 100*lead, next.class, next.share)
	}
	return verdictFor(best.class, math.Min(conf, 0.95), byID, best.finding, summary, decision), why
}

// traceFullLead: a winning cause whose share is at least this fraction
// ahead of the next cause's (27.6 % against 20.7 % is 25 % ahead) has its
// confidence counted in full; closer, it falls toward half.
const traceFullLead = 0.5

// closeBehind says in a few words what a runner-up cause is.
var closeBehind = map[finding.Class]string{
	finding.Preprocessing:   "the launching thread inside DataLoader __next__ while the GPU idled: the input pipeline",
	finding.SyncBound:       "synchronisations that drained the queue",
	finding.TransferBound:   "copies from pageable memory",
	finding.SubmissionBound: "the launching thread busy in CPU operators and launch calls",
}

func verdictFor(c finding.Class, conf float64, byID map[string]*finding.Finding, id, summary, decision string) finding.Verdict {
	v := finding.Verdict{Class: c, Confidence: math.Round(conf*100) / 100, Summary: summary, Decision: decision}
	if byID[id] != nil {
		v.Because = append(v.Because, id)
	}
	for _, extra := range supporting[c] {
		if extra != id && byID[extra] != nil {
			v.Because = append(v.Because, extra)
		}
	}
	return v
}

// supporting lists, per class, other findings that back it when present.
var supporting = map[finding.Class][]string{
	finding.SyncBound:       {"sync-calls", "sync-copies", "sync-memsets"},
	finding.SubmissionBound: {"short-kernels", "launch-runtime-outliers"},
	finding.TransferBound:   {"copies-dominate"},
	finding.Preprocessing:   {"input-bound-steps"},
	finding.GPUBound:        {"launch-queue-full"},
}

// CauseID is, for each class a trace can conclude, the ID of the finding
// that states it. Where the cause is the one a live rule finds, the ID is
// the live one (internal/judge's CauseID): the launch thread waiting on the
// GPU, the launch thread with no time left, copies filling the GPU's time,
// too little work, a busy GPU. Two differ because a trace sees a narrower
// or a different thing: host-wait-dataloader is a wait in DataLoader
// __next__ that a trace cannot split into CPU preprocessing and storage
// reads (live: input-pipeline-busy, input-waits-on-storage), and
// pageable-copies is a copy from pageable memory, which only a trace shows
// (copies-dominate, the live transfer cause, is its fallback).
var CauseID = map[finding.Class]string{
	finding.Preprocessing:   "host-wait-dataloader",
	finding.SyncBound:       "launch-thread-waits-on-gpu",
	finding.TransferBound:   "pageable-copies",
	finding.SubmissionBound: "launch-thread-saturated",
	finding.TooLittleWork:   "gpu-underfed",
	finding.GPUBound:        "gpu-busy",
}

package tracejudge

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// topRanges writes the ranges that overlapped the gaps most.
func topRanges(top []tracestats.NamedTime) string {
	var names []string
	for _, o := range top {
		names = append(names, fmt.Sprintf("%s (%.1f ms)", o.Name, ms(o.Ns)))
	}
	return strings.Join(names, "; ")
}

// ruleSubmission: the GPU idled while the launching thread was busy in CPU
// operators and launch calls (not after a sync): the CPU cannot launch fast
// enough, the cause of the live launch-thread-saturated. Sources: 002
// Checklist B; Task 12; symptom 3.
func ruleSubmission(in *Input) *finding.Finding {
	sh, at, b, v, r := in.Shares, in.Attribution, in.ByCause, in.vocab, in.Rank
	if sh.Submission < thresholds.ModerateSharePct {
		return nil
	}
	launches := v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)
	ev := []finding.Evidence{
		in.ctx.ev("share of GPU time lost to CPU submission overhead", sh.Submission, "%", ""),
		in.ctx.ev("idle while the launching thread ran CPU operators", ms(b[tracestats.CauseCPUOps]-at.AfterSync[tracestats.CauseCPUOps]), "ms", "cpu_op, user_annotation"),
		in.ctx.ev("idle while it was inside launch calls", ms(b[tracestats.CauseLaunchAPI]-at.AfterSync[tracestats.CauseLaunchAPI]), "ms", launches),
		in.ctx.ev("launch latency between operations", ms(b[tracestats.CauseLaunchLatency]), "ms", ""),
		in.ctx.ev("median launch call duration", r.Launch.RuntimeUs.P50, "us", launches),
		in.ctx.ev("median GPU operation duration", r.Launch.GPUUs.P50, "us", v.kernelEvents()),
	}
	if len(at.TopOps) > 0 {
		ev = append(ev, in.ctx.text("CPU ranges overlapping the gaps most", topRanges(at.TopOps), "cpu_op, user_annotation"))
	}
	if len(at.TopAPIs) > 0 {
		ev = append(ev, in.ctx.text("runtime calls overlapping the gaps most", topRanges(at.TopAPIs), v.runtimeEvents()))
	}
	return &finding.Finding{
		Severity: in.sev(sh.Submission),
		Claim:    fmt.Sprintf("The CPU cannot launch fast enough: %.1f %% of the time the GPU was idle while the launching thread was busy in operators and launch calls.", sh.Submission),
		Evidence: ev,
		Decision: v.launchAdvice(),
		Supports: finding.SubmissionBound,
	}
}

// ruleSetupLaunches: one-off set-up launches (a kernel's first launch, far
// longer than the median: module loading, lazy initialisation, first-call
// compilation), kept out of the submission share.
func ruleSetupLaunches(in *Input) *finding.Finding {
	r, sh := in.Rank, in.Shares
	su := r.SetupLaunches
	if len(su.Calls) == 0 {
		return nil
	}
	var parts []string
	for _, c := range su.Calls[:min(3, len(su.Calls))] {
		parts = append(parts, fmt.Sprintf("%s %s at +%.3f s before %s", c.API, durText(c.DurNs), float64(c.StartNs-r.Scope.StartNs)/1e9, shortName(c.Kernel, 60)))
	}
	longest := su.Calls[0]
	// What a first launch that long probably is: CUDA's lazy loading
	// (the default since CUDA 12.2) loads a kernel's module on its first
	// launch, ROCm loads code objects the same way, a graph is uploaded
	// to the device on its first launch, and the runtime initialises
	// itself lazily on the first call that needs it.
	probably := "module loading on the kernel's first launch, lazy initialisation of the runtime, or first-call compilation"
	if strings.Contains(longest.API, "GraphLaunch") {
		probably = "uploading the graph to the device on its first launch, or lazy initialisation of the runtime"
	}
	return &finding.Finding{
		Severity: in.sev(sh.Setup),
		Claim: fmt.Sprintf("%d launch call(s) are one-off set-up, not steady-state submission: each is the first launch of its kernel and far longer than the median launch (%.1f us); the longest, %s, took %s, probably %s. The %s of GPU idle inside them (%.1f %% of the time) is left out of the submission share.",
			len(su.Calls), su.MedianUs, longest.API, durText(longest.DurNs), probably, durText(in.ByCause[tracestats.CauseSetup]), sh.Setup),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time idle inside set-up launches", sh.Setup, "%", ""),
			in.ctx.ev("set-up launches", float64(len(su.Calls)), "", longest.API),
			in.ctx.ev("host time in set-up launches", ms(su.TotalNs), "ms", longest.API),
			in.ctx.ev("median launch call", su.MedianUs, "us", longest.API),
			in.ctx.ev("outlier threshold (median + 3.5 MAD / 0.6745, at least 50 us)", su.ThresholdUs, "us", longest.API),
			in.ctx.text("set-up launches, longest first (from the first GPU operation)", strings.Join(parts, "; "), longest.API),
		},
		Decision: "Nothing to change in the steady state: profile after a warm-up (torch.profiler.schedule(wait=1, warmup=1, active=3)) to see it. If such first launches recur every step, kernels are being loaded or compiled again (changing input shapes): keep shapes fixed.",
	}
}

// ruleShortKernels is HTA's short-kernel count: at least half the GPU
// operations ran shorter than the call that launched them. Sources: 002
// Task 12.
func ruleShortKernels(in *Input) *finding.Finding {
	l, v := in.Rank.Launch, in.vocab
	if l.Launches == 0 || float64(l.ShortKernels) < thresholds.ShortKernelsShare*float64(l.Launches) {
		return nil
	}
	launches := v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%d of %s (%.0f %%) ran shorter than the call that launched them (HTA's short kernels).", l.ShortKernels, safetext.Count(l.Launches, "GPU operation", "GPU operations"), 100*float64(l.ShortKernels)/float64(l.Launches)),
		Evidence: []finding.Evidence{
			in.ctx.ev("operations shorter than their launch call", float64(l.ShortKernels), "", launches),
			in.ctx.ev("operations launched", float64(l.Launches), "", launches),
			in.ctx.ev("GPU time of those operations", ms(l.ShortKernelGPUNs), "ms", v.kernelEvents()),
		},
		Decision: "Fuse tiny kernels or batch the work so each launch carries more.",
		Supports: finding.SubmissionBound,
	}
}

// ruleLaunchRuntimeOutliers is HTA's launch-statistics runtime cut-off:
// launch calls longer than LaunchRuntimeOutlier. Sources: 000 §7.
func ruleLaunchRuntimeOutliers(in *Input) *finding.Finding {
	l, v := in.Rank.Launch, in.vocab
	if l.RuntimeOutliers == 0 {
		return nil
	}
	claim := fmt.Sprintf("%d launch calls took longer than %.0f us (HTA's runtime cut-off); the longest %.0f us.", l.RuntimeOutliers, float64(thresholds.LaunchRuntimeOutlier.Microseconds()), l.RuntimeUs.Max)
	if n := len(in.Rank.SetupLaunches.Calls); n > 0 {
		claim += fmt.Sprintf(" %d of them are one-off set-up (setup-launches).", n)
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    claim,
		Evidence: []finding.Evidence{
			in.ctx.ev("launch calls over the cut-off", float64(l.RuntimeOutliers), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
			in.ctx.ev("longest launch call", l.RuntimeUs.Max, "us", ""),
			in.ctx.ev("p95 launch call", l.RuntimeUs.P95, "us", ""),
		},
		Decision: "Slow launch calls come from a descheduled launch thread, driver contention or allocation inside the call: pin the launch thread and check it with gpufeed diagnose.",
		Supports: finding.SubmissionBound,
	}
}

// ruleLaunchDelayOutliers is HTA's launch-delay cut-off: operations that
// started more than LaunchDelayOutlier after their launch call returned.
func ruleLaunchDelayOutliers(in *Input) *finding.Finding {
	l, v := in.Rank.Launch, in.vocab
	if l.DelayOutliers == 0 {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%d operations started more than %.0f us after their launch call returned (HTA's launch-delay cut-off): the queue ahead of them was long.", l.DelayOutliers, float64(thresholds.LaunchDelayOutlier.Microseconds())),
		Evidence: []finding.Evidence{
			in.ctx.ev("operations over the delay cut-off", float64(l.DelayOutliers), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
			in.ctx.ev("p95 launch delay", l.DelayUs.P95, "us", ""),
			in.ctx.ev("longest launch delay", l.DelayUs.Max, "us", ""),
		},
		Decision: "A long queue means the CPU runs ahead of the GPU: that is healthy unless the delay is a cross-stream dependency.",
		Supports: finding.GPUBound,
	}
}

// ruleLaunchQueueFull is HTA's queue-length analysis: a stream's launch
// queue near CUDA's capacity means the CPU ran ahead until launches blocked.
func ruleLaunchQueueFull(in *Input) *finding.Finding {
	q := maxQueue(in.Rank.QueueLength)
	if q.Max < thresholds.LaunchQueueFullShare*tracestats.LaunchQueueCapacity {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("Stream %d's launch queue reached %.0f pending operations (CUDA holds about %d): the CPU ran ahead until launches blocked, so the GPU set the pace.", q.Stream, q.Max, tracestats.LaunchQueueCapacity),
		Evidence: []finding.Evidence{
			in.ctx.ev("largest queue length", q.Max, "operations", in.vocab.runtimeEvents()+" launches, operation starts"),
			in.ctx.ev("mean queue length", q.Mean, "operations", ""),
		},
		Supports: finding.GPUBound,
	}
}

// churn says whether the GPU's waits in runtime calls that launch nothing
// recur step after step (the steady state, not set-up), and which
// allocator calls overlapped the gaps.
type churn struct {
	steps, total int      // steps whose gaps held such waits, steps profiled
	calls        []string // allocation and free calls among those overlapping the gaps most
}

// steady: the waits recur in at least ChurnStepsShare of at least three
// profiled steps, and allocator calls are among them.
func (c churn) steady() bool {
	return c.total >= 3 && float64(c.steps) >= churnStepsShare*float64(c.total) && len(c.calls) > 0
}

// churnStepsShare: what recurs in at least 80 % of the profiled steps is the
// steady state, not start-up (one set-up step in five may be missing).
const churnStepsShare = 0.8

// allocatorCall: the runtime's allocation and free calls (cudaMalloc,
// cudaFree, their Async, Host and Managed forms; hipMalloc, hipFree...).
func allocatorCall(name string) bool {
	for _, p := range []string{"cuda", "hip", "cu"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return strings.HasPrefix(rest, "Malloc") || strings.HasPrefix(rest, "Free") || strings.HasPrefix(rest, "MemAlloc") ||
				strings.HasPrefix(rest, "MemFree") || rest == "HostAlloc" || strings.HasPrefix(rest, "HostMalloc")
		}
	}
	return false
}

func otherAPIChurn(r *RankReport) churn {
	c := churn{total: len(r.Steps)}
	for _, st := range r.Steps {
		if st.ByCause[tracestats.CauseOtherAPI] > 0 {
			c.steps++
		}
	}
	for _, a := range r.Attribution.TopAPIs {
		if allocatorCall(a.Name) {
			c.calls = append(c.calls, a.Name)
		}
	}
	return c
}

// churnClaim names allocator churn: what it costs and in how many steps.
func churnClaim(c churn, share float64) string {
	free := ""
	for _, n := range c.calls {
		if strings.Contains(n, "Free") {
			free = n
			break
		}
	}
	why := "The allocation calls cost the launching thread's CPU time."
	if free != "" {
		why = "Each " + free + " synchronises (it waits for all the device's queued work before it returns, so the queue drains), and the allocation calls cost the launching thread's CPU time."
	}
	return fmt.Sprintf("Allocator churn: in %d of %d profiled steps the GPU waited while the launching thread was in %s (%.1f %% of the time): memory is freed and allocated again every step, the steady state, not set-up. %s",
		c.steps, c.total, strings.Join(c.calls, " and "), share, why)
}

const churnDecision = "Keep buffers allocated across steps: let PyTorch's caching allocator reuse them (no torch.cuda.empty_cache() in the loop), preallocate outputs and reuse them, and set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so a fragmented cache does not fall back to freeing and allocating."

// ruleHostWaitOtherAPI: the GPU waited while the launching thread sat in
// runtime calls that launch nothing (allocation, frees, stream creation).
// When that recurs in (nearly) every profiled step with allocator calls
// among them, it is allocator churn, named with its step count.
func ruleHostWaitOtherAPI(in *Input) *finding.Finding {
	sh, at, b, v := in.Shares, in.Attribution, in.ByCause, in.vocab
	if sh.OtherAPI < thresholds.ModerateSharePct {
		return nil
	}
	ev := []finding.Evidence{
		in.ctx.ev("share of GPU time lost in "+v.api()+" calls that launch nothing", sh.OtherAPI, "%", ""),
		in.ctx.ev("idle while the launching thread was in "+v.api()+" calls that launch nothing", ms(b[tracestats.CauseOtherAPI]-at.AfterSync[tracestats.CauseOtherAPI]), "ms", v.runtimeEvents()),
	}
	c := otherAPIChurn(in.Rank)
	if c.total > 0 {
		ev = append(ev, in.ctx.ev("profiled steps whose gaps held such calls", float64(c.steps), fmt.Sprintf("of %d", c.total), "ProfilerStep#N, "+v.runtimeEvents()))
	}
	if len(at.TopAPIs) > 0 {
		ev = append(ev, in.ctx.text("runtime calls overlapping the gaps most", topRanges(at.TopAPIs), v.runtimeEvents()))
	}
	if c.steady() {
		return &finding.Finding{Severity: in.sev(sh.OtherAPI), Claim: churnClaim(c, sh.OtherAPI), Evidence: ev, Decision: churnDecision}
	}
	return &finding.Finding{
		Severity: in.sev(sh.OtherAPI),
		Claim:    fmt.Sprintf("%.1f %% of the time the GPU waited while the launching thread was in %s calls that launch nothing (allocation, frees, stream creation, module loading).", sh.OtherAPI, v.api()),
		Evidence: ev,
		Decision: "Profile steady-state steps, not start-up; if these calls recur every step, stop allocating and freeing in the loop (no torch.cuda.empty_cache()).",
	}
}

// ruleHostWaitUntraced: the GPU waited while the launching thread ran
// nothing the profiler recorded.
func ruleHostWaitUntraced(in *Input) *finding.Finding {
	sh, at, b := in.Shares, in.Attribution, in.ByCause
	if sh.Untraced < thresholds.ModerateSharePct {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%.1f %% of the time the GPU waited while the launching thread ran nothing the profiler recorded.", sh.Untraced),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time idle while the launching thread ran nothing recorded", sh.Untraced, "%", ""),
			in.ctx.ev("idle with no recorded activity on the launching thread", ms(b[tracestats.CauseUntraced]-at.AfterSync[tracestats.CauseUntraced]), "ms", ""),
		},
		Decision: "Record Python frames (with_stack=True) or run gpufeed diagnose live to see whether the thread was computing, sleeping or blocked.",
	}
}

// ruleSmallKernels: most kernel time runs kernels with fewer thread blocks
// than SMs: too little parallel work per kernel, the cause of the live
// gpu-underfed read from launch geometry. Sources: 002 symptom 8.
func ruleSmallKernels(in *Input) *finding.Finding {
	sh := in.Shares
	if sh.SmallKernelPct < thresholds.TooLittleWorkKernelTimePct {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%.0f %% of kernel time runs kernels with fewer thread blocks than SMs: much of the GPU sits empty even while it is busy.", sh.SmallKernelPct),
		Evidence: []finding.Evidence{
			in.ctx.ev("kernel time in kernels with blocks per SM below 1", sh.SmallKernelPct, "%", "kernel args \"blocks per SM\""),
		},
		Decision: "Bigger batches or fused kernels; for latency-bound inference accept it.",
		Supports: finding.TooLittleWork,
	}
}

package tracejudge

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// ruleNoGPUActivity: the trace holds no GPU operation at all.
func ruleNoGPUActivity(in *Input) *finding.Finding {
	if in.HasWork {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    "The trace records no GPU operations.",
		Evidence: []finding.Evidence{in.ctx.ev("GPU operations", 0, "", in.vocab.gpuEvents()+" events")},
		Decision: "Profile with CUDA activity enabled to see why the GPU waits.",
		Supports: finding.Inconclusive,
	}
}

// ruleGPUIdle: how much of the span the GPU stood idle, and how much of it
// the launching thread caused. Sources: 002 Task 1 (idle time first).
func ruleGPUIdle(in *Input) *finding.Finding {
	if !in.HasWork {
		return nil
	}
	at, b, sh, v := in.Attribution, in.ByCause, in.Shares, in.vocab
	return &finding.Finding{
		Severity: in.sev(sh.IdlePct),
		Claim: fmt.Sprintf("The GPU is idle %.1f %% of the time (%d gaps, %.1f ms); the launching CPU thread is the cause of %.1f ms.",
			sh.IdlePct, at.Gaps, ms(at.IdleNs), ms(b.HostWait())),
		Evidence: []finding.Evidence{
			in.ctx.ev("device idle time", ms(at.IdleNs), "ms", v.gpuEvents()),
			in.ctx.ev("device idle share", sh.IdlePct, "%", ""),
			in.ctx.ev("host-wait idle (GPU waited for the CPU to launch)", ms(b.HostWait()), "ms", v.runtimeEvents()+" launch calls"),
			in.ctx.ev("GPU-side wait idle (launched in time, started late)", ms(b[tracestats.CauseGPUWait]), "ms", ""),
			in.ctx.ev("launch latency idle", ms(b[tracestats.CauseLaunchLatency]), "ms", ""),
		},
	}
}

// ruleGPUBusy: the GPU idled less than GPUBoundIdleMaxPct of the span: the
// CPU keeps it fed (the live gpu-busy). Sources: 002 Checklist E.
func ruleGPUBusy(in *Input) *finding.Finding {
	sh, v := in.Shares, in.vocab
	if !in.HasWork || sh.IdlePct >= thresholds.GPUBoundIdleMaxPct {
		return nil
	}
	tb := in.Rank.Temporal
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("The GPU is busy %.1f %% of the time: the CPU keeps it fed.", 100-sh.IdlePct),
		Evidence: []finding.Evidence{
			in.ctx.ev("GPU busy share", 100-sh.IdlePct, "%", v.gpuEvents()),
			in.ctx.ev("compute share (HTA temporal breakdown)", tb.Pct(tb.ComputeNs), "%", v.kernelEvents()),
			in.ctx.ev("non-compute share (copies, memsets, communication)", tb.Pct(tb.NonComputeNs), "%", v.nonComputeEvents()),
		},
		Decision: "Look at kernel efficiency (Nsight Compute), precision and batch size, and at GPU clocks and throttling (gpufeed check).",
		Supports: finding.GPUBound,
	}
}

// ruleGPUSideWait: the next operation had been launched in time but started
// late: it waited on another stream, an event or another GPU.
func ruleGPUSideWait(in *Input) *finding.Finding {
	sh := in.Shares
	if sh.GPUWait < thresholds.ModerateSharePct {
		return nil
	}
	return &finding.Finding{
		Severity: in.sev(sh.GPUWait),
		Claim:    fmt.Sprintf("%.1f %% of the time the GPU was idle although the next operation had been launched: it waited on another stream, an event or another GPU.", sh.GPUWait),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time idle with work already enqueued", sh.GPUWait, "%", ""),
			in.ctx.ev("idle with work already enqueued", ms(in.ByCause[tracestats.CauseGPUWait]), "ms", in.vocab.calls(trace.StreamWaitEvent)+", collective kernels"),
		},
		Decision: "Look at stream dependencies and collectives: overlap communication with computation; compare ranks for a straggler.",
	}
}

// ruleGPUGaps is Nsight Systems' gpu_gaps rule: GPU idle gaps of at least
// the threshold (500 ms by default).
func ruleGPUGaps(in *Input) *finding.Finding {
	r := in.Rank
	gaps := r.Rules.Gaps
	if len(gaps) == 0 {
		return nil
	}
	var parts []string
	for _, g := range gaps[:min(3, len(gaps))] {
		parts = append(parts, fmt.Sprintf("%.1f ms at +%.3f s", ms(g.DurNs), float64(g.StartNs-r.Scope.StartNs)/1e9))
	}
	return &finding.Finding{
		Severity: finding.Warning,
		Claim:    fmt.Sprintf("The GPU stood idle %d times for %.0f ms or more (Nsight's gpu_gaps rule); the longest %.1f ms.", len(gaps), ms(r.Rules.GapThresholdNs), ms(gaps[0].DurNs)),
		Evidence: []finding.Evidence{
			in.ctx.ev("gaps at or above the threshold", float64(len(gaps)), "", ""),
			in.ctx.text("longest gaps (from the first GPU operation)", strings.Join(parts, "; "), ""),
		},
		Decision: "See the longest gaps below for what the launching thread was doing in each.",
	}
}

// ruleLowUseWindows is Nsight Systems' gpu_time_util rule: windows of the
// span whose GPU time is below a share.
func ruleLowUseWindows(in *Input) *finding.Finding {
	r := in.Rank
	w := r.Rules.LowUse
	if len(w) == 0 {
		return nil
	}
	var lowNs int64
	for _, x := range w {
		lowNs += x.DurNs
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%d windows (%.1f ms in all) had GPU time below %.0f %% (Nsight's gpu_time_util rule, %d chunks).", len(w), ms(lowNs), r.Rules.LowUsePct, thresholds.NsightLowUseChunks),
		Evidence: []finding.Evidence{
			in.ctx.ev("low-use windows", float64(len(w)), "", ""),
			in.ctx.ev("time in low-use windows", ms(lowNs), "ms", ""),
		},
	}
}

// ruleTraceProblems: the reader needed workarounds; the numbers cover what
// the trace holds.
func ruleTraceProblems(in *Input) *finding.Finding {
	w := in.Rank.Warnings
	if len(w) == 0 {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("The trace needed %d workaround(s) to read; the numbers cover what it holds.", len(w)),
		Evidence: []finding.Evidence{in.ctx.text("reader warnings", strings.Join(w, " | "), "")},
	}
}

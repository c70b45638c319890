package tracejudge

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// evidenceCtx carries what every piece of evidence cites: the window it
// covers and the file it came from.
type evidenceCtx struct {
	window string
	file   string
}

func (c evidenceCtx) ev(what string, v float64, unit, events string) finding.Evidence {
	src := c.file
	if events != "" {
		src += ": " + events
	}
	return finding.Evidence{What: what, Value: round3(v), Unit: unit, Window: c.window, Source: src}
}

func (c evidenceCtx) text(what, text, events string) finding.Evidence {
	src := c.file
	if events != "" {
		src += ": " + events
	}
	return finding.Evidence{What: what, Text: text, Window: c.window, Source: src}
}

func round3(v float64) float64 {
	if v >= 1000 || v <= -1000 {
		return float64(int64(v*10+0.5*sign(v))) / 10
	}
	return float64(int64(v*1000+0.5*sign(v))) / 1000
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// windowText describes the analysed window: the steps and the GPU span.
func windowText(r *RankReport) string {
	span := fmt.Sprintf("%.3f s of GPU activity", float64(r.Attribution.SpanNs)/1e9)
	if n := len(r.Steps); n > 0 {
		first, last := r.Steps[0].Number, r.Steps[n-1].Number
		if n == 1 {
			return fmt.Sprintf("ProfilerStep#%d, %s", first, span)
		}
		return fmt.Sprintf("%d steps (ProfilerStep#%d–#%d), %s", n, first, last, span)
	}
	return span
}

// buildFindings turns the measurements into findings. It returns them by
// id as well, for the verdict.
func buildFindings(r *RankReport, sh Shares, v *vocab) ([]finding.Finding, map[string]*finding.Finding) {
	ctx := evidenceCtx{window: windowText(r), file: filepath.Base(r.Source)}
	var out []finding.Finding
	add := func(f finding.Finding) { out = append(out, f) }
	at := &r.Attribution
	b := &at.ByCause
	sev := func(share float64) finding.Severity {
		if share >= thresholds.HighSharePct {
			return finding.Warning
		}
		return finding.Info
	}
	hasWork := r.Scope.GPUOps > 0

	if !hasWork {
		add(finding.Finding{
			ID: "no-gpu-activity", Severity: finding.Info,
			Claim:    "The trace records no GPU operations.",
			Evidence: []finding.Evidence{ctx.ev("GPU operations", 0, "", v.gpuEvents()+" events")},
			Decision: "Profile with CUDA activity enabled to see why the GPU waits.",
			Supports: finding.Inconclusive,
		})
	} else {
		add(finding.Finding{
			ID: "gpu-idle", Severity: sev(sh.IdlePct),
			Claim: fmt.Sprintf("The GPU is idle %.1f %% of the time (%d gaps, %.1f ms); the launching CPU thread is the cause of %.1f ms.",
				sh.IdlePct, at.Gaps, ms(at.IdleNs), ms(b.HostWait())),
			Evidence: []finding.Evidence{
				ctx.ev("device idle time", ms(at.IdleNs), "ms", v.gpuEvents()),
				ctx.ev("device idle share", sh.IdlePct, "%", ""),
				ctx.ev("host-wait idle (GPU waited for the CPU to launch)", ms(b.HostWait()), "ms", v.runtimeEvents()+" launch calls"),
				ctx.ev("GPU-side wait idle (launched in time, started late)", ms(b[tracestats.CauseGPUWait]), "ms", ""),
				ctx.ev("launch latency idle", ms(b[tracestats.CauseLaunchLatency]), "ms", ""),
			},
			Seed: "002 Task 1",
		})
	}

	if hasWork && sh.IdlePct < thresholds.GPUBoundIdleMaxPct {
		tb := r.Temporal
		add(finding.Finding{
			ID: "gpu-bound", Severity: finding.Info,
			Claim: fmt.Sprintf("The GPU is busy %.1f %% of the time: the CPU keeps it fed.", 100-sh.IdlePct),
			Evidence: []finding.Evidence{
				ctx.ev("GPU busy share", 100-sh.IdlePct, "%", v.gpuEvents()),
				ctx.ev("compute share (HTA temporal breakdown)", tb.Pct(tb.ComputeNs), "%", v.kernelEvents()),
				ctx.ev("non-compute share (copies, memsets, communication)", tb.Pct(tb.NonComputeNs), "%", v.nonComputeEvents()),
			},
			Decision: "Look at kernel efficiency (Nsight Compute), precision and batch size, and at GPU clocks and throttling (gpufeed check).",
			Seed:     "002 Checklist E",
			Supports: finding.GPUBound,
		})
	}

	// Input pipeline.
	if sh.Input >= thresholds.ModerateSharePct {
		add(finding.Finding{
			ID: "host-wait-dataloader", Severity: sev(sh.Input),
			Claim: fmt.Sprintf("The GPU waits for the DataLoader: %.1f %% of the time (%.1f ms) the launching thread was inside DataLoader __next__ while the GPU was idle.", sh.Input, ms(b[tracestats.CauseDataLoader])),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time lost to the input pipeline", sh.Input, "%", ""),
				ctx.ev("idle while the launching thread waited in DataLoader __next__", ms(b[tracestats.CauseDataLoader]), "ms", "enumerate(DataLoader)#…__next__"),
			},
			Decision: "Feed the loader faster: raise DataLoader num_workers (until cores or storage saturate), persistent_workers=True, prefetch_factor, pin_memory=True; cache decoded samples. A trace cannot tell CPU preprocessing from storage reads: run gpufeed diagnose live to see which.",
			Seed:     "002 Checklist C; FAQ 2",
			Supports: finding.Preprocessing,
		})
	}
	if med, n := medianInputPct(r.Steps); n > 0 && med >= thresholds.ModerateSharePct {
		level := "moderately"
		if med >= thresholds.HighSharePct {
			level = "highly"
		}
		add(finding.Finding{
			ID: "input-bound-steps", Severity: sev(med),
			Claim: fmt.Sprintf("Steps are %s input-bound: the median step spends %.1f %% of its time in DataLoader __next__ (XProf: 5 %% moderately, 20 %% highly).", level, med),
			Evidence: []finding.Evidence{
				ctx.ev("median share of step time in DataLoader __next__", med, "%", "ProfilerStep#N, enumerate(DataLoader)#…__next__"),
				ctx.ev("steps measured", float64(n), "", "ProfilerStep#N"),
			},
			Decision: "More DataLoader workers, prefetching and pinned memory; overlap loading with the previous step.",
			Seed:     "002 Checklist C",
			Supports: finding.Preprocessing,
		})
	}

	// Synchronisation.
	syncCalls := r.Rules.StreamSyncs.Count + r.Rules.DeviceSyncs.Count + r.Rules.EventSyncs.Count
	syncHost := r.Rules.StreamSyncs.HostNs + r.Rules.DeviceSyncs.HostNs + r.Rules.EventSyncs.HostNs
	medSyncs, nSteps := medianSyncs(r.Steps)
	if sh.Sync >= thresholds.ModerateSharePct {
		add(finding.Finding{
			ID: "host-wait-sync", Severity: sev(sh.Sync),
			Claim: fmt.Sprintf("Synchronisations starve the GPU: %.1f %% of the time the GPU was idle because the launching thread waited for it (%d gaps began inside a sync) and then had to refill an empty queue.", sh.Sync, at.AfterSyncGaps),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time lost to synchronisation", sh.Sync, "%", ""),
				ctx.ev("idle after a sync drained the queue (host busy refilling it)", ms(at.AfterSync[tracestats.CauseCPUOps]+at.AfterSync[tracestats.CauseLaunchAPI]+at.AfterSync[tracestats.CauseOtherAPI]+at.AfterSync[tracestats.CauseUntraced]), "ms", v.calls(trace.StreamSync, trace.DeviceSync, trace.EventSync, trace.MemcpySync)),
				ctx.ev("idle while the launching thread was blocked in a sync", ms(b[tracestats.CauseSync]), "ms", v.calls(trace.StreamSync, trace.DeviceSync, trace.EventSync, trace.MemcpySync)),
				ctx.ev("gaps that began inside a sync", float64(at.AfterSyncGaps), "", ""),
			},
			Decision: "Remove per-step host synchronisations: no .item(), .cpu(), print(tensor) or torch.cuda.synchronize() in the hot loop; accumulate metrics on the GPU and read them every N steps; copy results with non_blocking=True into pinned memory.",
			Seed:     "002 symptom 1; Checklist B step 3",
			Supports: finding.SyncBound,
		})
	}
	if syncCalls > 0 {
		sevc := finding.Info
		claim := fmt.Sprintf("%d host synchronisations blocked the CPU for %.1f ms in total.", syncCalls, ms(syncHost))
		if nSteps > 0 {
			claim = fmt.Sprintf("%d host synchronisations (median %d per step) blocked the CPU for %.1f ms in total.", syncCalls, medSyncs, ms(syncHost))
			if medSyncs > thresholds.SyncsPerStepMax {
				sevc = finding.Warning
			}
		}
		ev := []finding.Evidence{
			ctx.ev(v.countLabel(trace.StreamSync), float64(r.Rules.StreamSyncs.Count), "", v.calls(trace.StreamSync)),
			ctx.ev("host time blocked in stream syncs", ms(r.Rules.StreamSyncs.HostNs), "ms", v.calls(trace.StreamSync)),
			ctx.ev(v.countLabel(trace.DeviceSync), float64(r.Rules.DeviceSyncs.Count), "", v.calls(trace.DeviceSync)),
			ctx.ev("host time blocked in device syncs", ms(r.Rules.DeviceSyncs.HostNs), "ms", v.calls(trace.DeviceSync)),
			ctx.ev(v.countLabel(trace.EventSync), float64(r.Rules.EventSyncs.Count), "", v.calls(trace.EventSync)),
			ctx.ev("host time blocked in event syncs", ms(r.Rules.EventSyncs.HostNs), "ms", v.calls(trace.EventSync)),
		}
		if nSteps > 0 {
			ev = append(ev, ctx.ev("median syncs per step", float64(medSyncs), "", "ProfilerStep#N"))
		}
		add(finding.Finding{
			ID: "sync-calls", Severity: sevc, Claim: claim, Evidence: ev,
			Decision: fmt.Sprintf("Use events (%s) to order streams instead of blocking the host; keep at most one sync per step.", v.call(trace.StreamWaitEvent)),
			Seed:     "002 Checklist B step 3",
			Supports: finding.SyncBound,
		})
	}
	if c := r.Rules.SyncCopies; c.Count > 0 {
		add(finding.Finding{
			ID: "sync-copies", Severity: finding.Info,
			Claim: fmt.Sprintf("%d blocking copies (%s) held the CPU for %.1f ms.", c.Count, v.calls(trace.MemcpySync), ms(c.HostNs)),
			Evidence: []finding.Evidence{
				ctx.ev("blocking copies", float64(c.Count), "", v.calls(trace.MemcpySync)),
				ctx.ev("host time in blocking copies", ms(c.HostNs), "ms", v.calls(trace.MemcpySync)),
				ctx.ev("bytes copied", float64(c.Bytes), "B", v.copyEvents()),
			},
			Decision: fmt.Sprintf("Use %s from pinned memory (tensor.to(device, non_blocking=True) on pinned tensors).", v.call(trace.MemcpyAsync)),
			Seed:     "002 symptom 4",
			Supports: finding.SyncBound,
		})
	}
	if c := r.Rules.SyncMemsets; c.Count > 0 {
		add(finding.Finding{
			ID: "sync-memsets", Severity: finding.Info,
			Claim: fmt.Sprintf("%d blocking memsets (%s) held the CPU for %.1f ms.", c.Count, v.calls(trace.MemsetSync), ms(c.HostNs)),
			Evidence: []finding.Evidence{
				ctx.ev("blocking memsets", float64(c.Count), "", v.calls(trace.MemsetSync)),
				ctx.ev("host time in blocking memsets", ms(c.HostNs), "ms", v.calls(trace.MemsetSync)),
			},
			Decision: fmt.Sprintf("Use %s on the work stream.", v.call(trace.MemsetAsync)),
			Supports: finding.SyncBound,
		})
	}

	// Transfers.
	if c := r.Rules.PageableCopies; c.Count > 0 {
		add(finding.Finding{
			ID: "pageable-copies", Severity: sev(sh.Transfer),
			Claim: fmt.Sprintf("%d \"async\" copies touched pageable memory, so the driver staged them synchronously: %.1f ms of host time, %.1f ms of GPU idle inside them.", c.Count, ms(c.HostNs), ms(b[tracestats.CausePageableCopy])),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time lost to pageable copies", sh.Transfer, "%", ""),
				ctx.ev("async copies from or to pageable memory", float64(c.Count), "", v.calls(trace.MemcpyAsync)+", Memcpy … (Pageable -> Device)/(Device -> Pageable)"),
				ctx.ev("host time in those copies", ms(c.HostNs), "ms", v.calls(trace.MemcpyAsync)),
				ctx.ev("bytes copied", float64(c.Bytes), "B", v.copyEvents()),
				ctx.ev("GPU idle while the launching thread was inside them", ms(b[tracestats.CausePageableCopy]), "ms", ""),
			},
			Decision: "Pin host memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True); keep results on the GPU instead of copying them back to pageable tensors.",
			Seed:     "002 symptom 4; FAQ 5",
			Supports: finding.TransferBound,
		})
	}
	if sh.CopyBusyPct >= copiesDominatePct {
		add(finding.Finding{
			ID: "copies-dominate", Severity: finding.Warning,
			Claim: fmt.Sprintf("Host-device copies fill %.0f %% of the GPU's busy time.", sh.CopyBusyPct),
			Evidence: []finding.Evidence{
				ctx.ev("host-device copy time as share of GPU busy time", sh.CopyBusyPct, "%", v.copyOps()),
			},
			Decision: "Move less data: keep tensors on the GPU, copy once per batch, use pinned memory and overlap copies with compute on a side stream; check the PCIe link (gpufeed check).",
			Seed:     "002 symptom 4",
			Supports: finding.TransferBound,
		})
	}

	// Submission.
	if sh.Submission >= thresholds.ModerateSharePct {
		ev := []finding.Evidence{
			ctx.ev("share of GPU time lost to CPU submission overhead", sh.Submission, "%", ""),
			ctx.ev("idle while the launching thread ran CPU operators", ms(b[tracestats.CauseCPUOps]-at.AfterSync[tracestats.CauseCPUOps]), "ms", "cpu_op, user_annotation"),
			ctx.ev("idle while it was inside launch calls", ms(b[tracestats.CauseLaunchAPI]-at.AfterSync[tracestats.CauseLaunchAPI]), "ms", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
			ctx.ev("launch latency between operations", ms(b[tracestats.CauseLaunchLatency]), "ms", ""),
			ctx.ev("median launch call duration", r.Launch.RuntimeUs.P50, "us", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
			ctx.ev("median GPU operation duration", r.Launch.GPUUs.P50, "us", v.kernelEvents()),
		}
		if len(at.TopOps) > 0 {
			var names []string
			for _, o := range at.TopOps {
				names = append(names, fmt.Sprintf("%s (%.1f ms)", o.Name, ms(o.Ns)))
			}
			ev = append(ev, ctx.text("CPU ranges overlapping the gaps most", strings.Join(names, "; "), "cpu_op, user_annotation"))
		}
		if len(at.TopAPIs) > 0 {
			var names []string
			for _, o := range at.TopAPIs {
				names = append(names, fmt.Sprintf("%s (%.1f ms)", o.Name, ms(o.Ns)))
			}
			ev = append(ev, ctx.text("runtime calls overlapping the gaps most", strings.Join(names, "; "), v.runtimeEvents()))
		}
		add(finding.Finding{
			ID: "host-wait-submission", Severity: sev(sh.Submission),
			Claim:    fmt.Sprintf("The CPU cannot launch fast enough: %.1f %% of the time the GPU was idle while the launching thread was busy in operators and launch calls.", sh.Submission),
			Evidence: ev,
			Decision: v.launchAdvice(),
			Seed:     "002 Checklist B; Task 12; symptom 3",
			Supports: finding.SubmissionBound,
		})
	}
	if su := r.SetupLaunches; len(su.Calls) > 0 {
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
		add(finding.Finding{
			ID: "setup-launches", Severity: sev(sh.Setup),
			Claim: fmt.Sprintf("%d launch call(s) are one-off set-up, not steady-state submission: each is the first launch of its kernel and far longer than the median launch (%.1f us); the longest, %s, took %s, probably %s. The %s of GPU idle inside them (%.1f %% of the time) is left out of the submission share.",
				len(su.Calls), su.MedianUs, longest.API, durText(longest.DurNs), probably, durText(b[tracestats.CauseSetup]), sh.Setup),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time idle inside set-up launches", sh.Setup, "%", ""),
				ctx.ev("set-up launches", float64(len(su.Calls)), "", longest.API),
				ctx.ev("host time in set-up launches", ms(su.TotalNs), "ms", longest.API),
				ctx.ev("median launch call", su.MedianUs, "us", longest.API),
				ctx.ev("outlier threshold (median + 3.5 MAD / 0.6745, at least 50 us)", su.ThresholdUs, "us", longest.API),
				ctx.text("set-up launches, longest first (from the first GPU operation)", strings.Join(parts, "; "), longest.API),
			},
			Decision: "Nothing to change in the steady state: profile after a warm-up (torch.profiler.schedule(wait=1, warmup=1, active=3)) to see it. If such first launches recur every step, kernels are being loaded or compiled again (changing input shapes): keep shapes fixed.",
		})
	}
	if l := r.Launch; l.Launches > 0 && l.ShortKernels*2 >= l.Launches {
		add(finding.Finding{
			ID: "short-kernels", Severity: finding.Info,
			Claim: fmt.Sprintf("%d of %d GPU operations (%.0f %%) ran shorter than the call that launched them (HTA's short kernels).", l.ShortKernels, l.Launches, 100*float64(l.ShortKernels)/float64(l.Launches)),
			Evidence: []finding.Evidence{
				ctx.ev("operations shorter than their launch call", float64(l.ShortKernels), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
				ctx.ev("operations launched", float64(l.Launches), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
				ctx.ev("GPU time of those operations", ms(l.ShortKernelGPUNs), "ms", v.kernelEvents()),
			},
			Decision: "Fuse tiny kernels or batch the work so each launch carries more.",
			Seed:     "002 Task 12",
			Supports: finding.SubmissionBound,
		})
	}
	if l := r.Launch; l.RuntimeOutliers > 0 {
		claim := fmt.Sprintf("%d launch calls took longer than %.0f us (HTA's runtime cut-off); the longest %.0f us.", l.RuntimeOutliers, float64(thresholds.LaunchRuntimeOutlier.Microseconds()), l.RuntimeUs.Max)
		if n := len(r.SetupLaunches.Calls); n > 0 {
			claim += fmt.Sprintf(" %d of them are one-off set-up (setup-launches).", n)
		}
		add(finding.Finding{
			ID: "launch-runtime-outliers", Severity: finding.Info,
			Claim: claim,
			Evidence: []finding.Evidence{
				ctx.ev("launch calls over the cut-off", float64(l.RuntimeOutliers), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
				ctx.ev("longest launch call", l.RuntimeUs.Max, "us", ""),
				ctx.ev("p95 launch call", l.RuntimeUs.P95, "us", ""),
			},
			Decision: "Slow launch calls come from a descheduled launch thread, driver contention or allocation inside the call: pin the launch thread and check it with gpufeed diagnose.",
			Seed:     "000 §7",
			Supports: finding.SubmissionBound,
		})
	}
	if l := r.Launch; l.DelayOutliers > 0 {
		add(finding.Finding{
			ID: "launch-delay-outliers", Severity: finding.Info,
			Claim: fmt.Sprintf("%d operations started more than %.0f us after their launch call returned (HTA's launch-delay cut-off): the queue ahead of them was long.", l.DelayOutliers, float64(thresholds.LaunchDelayOutlier.Microseconds())),
			Evidence: []finding.Evidence{
				ctx.ev("operations over the delay cut-off", float64(l.DelayOutliers), "", v.calls(trace.Launch, trace.MemcpyAsync, trace.MemsetAsync)),
				ctx.ev("p95 launch delay", l.DelayUs.P95, "us", ""),
				ctx.ev("longest launch delay", l.DelayUs.Max, "us", ""),
			},
			Decision: "A long queue means the CPU runs ahead of the GPU: that is healthy unless the delay is a cross-stream dependency.",
			Supports: finding.GPUBound,
		})
	}
	if q := maxQueue(r.QueueLength); q.Max >= 0.9*tracestats.LaunchQueueCapacity {
		add(finding.Finding{
			ID: "launch-queue-full", Severity: finding.Info,
			Claim: fmt.Sprintf("Stream %d's launch queue reached %.0f pending operations (CUDA holds about %d): the CPU ran ahead until launches blocked, so the GPU set the pace.", q.Stream, q.Max, tracestats.LaunchQueueCapacity),
			Evidence: []finding.Evidence{
				ctx.ev("largest queue length", q.Max, "operations", v.runtimeEvents()+" launches, operation starts"),
				ctx.ev("mean queue length", q.Mean, "operations", ""),
			},
			Supports: finding.GPUBound,
		})
	}

	// Other waits.
	if sh.GPUWait >= thresholds.ModerateSharePct {
		add(finding.Finding{
			ID: "gpu-side-wait", Severity: sev(sh.GPUWait),
			Claim: fmt.Sprintf("%.1f %% of the time the GPU was idle although the next operation had been launched: it waited on another stream, an event or another GPU.", sh.GPUWait),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time idle with work already enqueued", sh.GPUWait, "%", ""),
				ctx.ev("idle with work already enqueued", ms(b[tracestats.CauseGPUWait]), "ms", v.calls(trace.StreamWaitEvent)+", collective kernels"),
			},
			Decision: "Look at stream dependencies and collectives: overlap communication with computation; compare ranks for a straggler.",
		})
	}
	if sh.OtherAPI >= thresholds.ModerateSharePct {
		ev := []finding.Evidence{
			ctx.ev("share of GPU time lost in "+v.api()+" calls that launch nothing", sh.OtherAPI, "%", ""),
			ctx.ev("idle while the launching thread was in "+v.api()+" calls that launch nothing", ms(b[tracestats.CauseOtherAPI]-at.AfterSync[tracestats.CauseOtherAPI]), "ms", v.runtimeEvents()),
		}
		if len(at.TopAPIs) > 0 {
			var names []string
			for _, o := range at.TopAPIs {
				names = append(names, fmt.Sprintf("%s (%.1f ms)", o.Name, ms(o.Ns)))
			}
			ev = append(ev, ctx.text("runtime calls overlapping the gaps most", strings.Join(names, "; "), v.runtimeEvents()))
		}
		add(finding.Finding{
			ID: "host-wait-other-api", Severity: sev(sh.OtherAPI),
			Claim:    fmt.Sprintf("%.1f %% of the time the GPU waited while the launching thread was in %s calls that launch nothing (allocation, frees, stream creation, module loading).", sh.OtherAPI, v.api()),
			Evidence: ev,
			Decision: "Profile steady-state steps, not start-up; if these calls recur every step, stop allocating and freeing in the loop (no torch.cuda.empty_cache()).",
		})
	}
	if sh.Untraced >= thresholds.ModerateSharePct {
		add(finding.Finding{
			ID: "host-wait-untraced", Severity: finding.Info,
			Claim: fmt.Sprintf("%.1f %% of the time the GPU waited while the launching thread ran nothing the profiler recorded.", sh.Untraced),
			Evidence: []finding.Evidence{
				ctx.ev("share of GPU time idle while the launching thread ran nothing recorded", sh.Untraced, "%", ""),
				ctx.ev("idle with no recorded activity on the launching thread", ms(b[tracestats.CauseUntraced]-at.AfterSync[tracestats.CauseUntraced]), "ms", ""),
			},
			Decision: "Record Python frames (with_stack=True) or run gpufeed diagnose live to see whether the thread was computing, sleeping or blocked.",
		})
	}
	if sh.SmallKernelPct >= thresholds.TooLittleWorkKernelTimePct {
		add(finding.Finding{
			ID: "small-kernels", Severity: finding.Info,
			Claim: fmt.Sprintf("%.0f %% of kernel time runs kernels with fewer thread blocks than SMs: much of the GPU sits empty even while it is busy.", sh.SmallKernelPct),
			Evidence: []finding.Evidence{
				ctx.ev("kernel time in kernels with blocks per SM below 1", sh.SmallKernelPct, "%", "kernel args \"blocks per SM\""),
			},
			Decision: "Bigger batches or fused kernels; for latency-bound inference accept it (seed 002 FAQ 1).",
			Seed:     "002 symptom 8",
			Supports: finding.TooLittleWork,
		})
	}

	// Nsight-style gaps and low-use windows.
	if gaps := r.Rules.Gaps; len(gaps) > 0 {
		var parts []string
		for _, g := range gaps[:min(3, len(gaps))] {
			parts = append(parts, fmt.Sprintf("%.1f ms at +%.3f s", ms(g.DurNs), float64(g.StartNs-r.Scope.StartNs)/1e9))
		}
		add(finding.Finding{
			ID: "gpu-gaps", Severity: finding.Warning,
			Claim: fmt.Sprintf("The GPU stood idle %d times for %.0f ms or more (Nsight's gpu_gaps rule); the longest %.1f ms.", len(gaps), ms(r.Rules.GapThresholdNs), ms(gaps[0].DurNs)),
			Evidence: []finding.Evidence{
				ctx.ev("gaps at or above the threshold", float64(len(gaps)), "", ""),
				ctx.text("longest gaps (from the first GPU operation)", strings.Join(parts, "; "), ""),
			},
			Decision: "See the longest gaps below for what the launching thread was doing in each.",
		})
	}
	if w := r.Rules.LowUse; len(w) > 0 {
		var lowNs int64
		for _, x := range w {
			lowNs += x.DurNs
		}
		add(finding.Finding{
			ID: "low-use-windows", Severity: finding.Info,
			Claim: fmt.Sprintf("%d windows (%.1f ms in all) had GPU time below %.0f %% (Nsight's gpu_time_util rule, %d chunks).", len(w), ms(lowNs), r.Rules.LowUsePct, NsightLowUseChunks),
			Evidence: []finding.Evidence{
				ctx.ev("low-use windows", float64(len(w)), "", ""),
				ctx.ev("time in low-use windows", ms(lowNs), "ms", ""),
			},
		})
	}
	if len(r.Warnings) > 0 {
		add(finding.Finding{
			ID: "trace-problems", Severity: finding.Info,
			Claim:    fmt.Sprintf("The trace needed %d workaround(s) to read; the numbers cover what it holds.", len(r.Warnings)),
			Evidence: []finding.Evidence{ctx.text("reader warnings", strings.Join(r.Warnings, " | "), "")},
		})
	}
	byID := map[string]*finding.Finding{}
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	return out, byID
}

// medianInputPct returns the median over steps of the DataLoader share of
// step time, and the number of steps with a DataLoader range.
// durText writes a duration in the unit that suits it: microseconds below
// a millisecond, milliseconds above.
func durText(ns int64) string {
	if ns < 1e6 {
		return fmt.Sprintf("%.0f us", float64(ns)/1e3)
	}
	return fmt.Sprintf("%.1f ms", ms(ns))
}

// shortName trims a long kernel name (a C++ signature) to n runes.
func shortName(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func medianInputPct(steps []tracestats.StepSummary) (float64, int) {
	var v []float64
	for _, s := range steps {
		if s.DurNs > 0 && s.DataLoaderNs > 0 {
			v = append(v, 100*float64(s.DataLoaderNs)/float64(s.DurNs))
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return tracestats.Quantile(v, 0.5), len(v)
}

func medianSyncs(steps []tracestats.StepSummary) (int, int) {
	if len(steps) == 0 {
		return 0, 0
	}
	v := make([]int, len(steps))
	for i, s := range steps {
		v[i] = s.Syncs
	}
	slices.Sort(v)
	return v[len(v)/2], len(v)
}

func maxQueue(q []tracestats.QueueLength) tracestats.QueueLength {
	var best tracestats.QueueLength
	for _, x := range q {
		if x.Max > best.Max {
			best = x
		}
	}
	return best
}

package tracejudge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// ruleWaitsOnGPU: the GPU idled because the launching thread waited for it
// in a synchronisation and then had to refill an empty queue: the cause of
// the live launch-thread-waits-on-gpu, read from the trace's sync calls.
// Sources: 002 symptom 1; Checklist B step 3.
func ruleWaitsOnGPU(in *Input) *finding.Finding {
	sh, at, b, v := in.Shares, in.Attribution, in.ByCause, in.vocab
	if sh.Sync < thresholds.ModerateSharePct {
		return nil
	}
	syncs := v.calls(trace.StreamSync, trace.DeviceSync, trace.EventSync, trace.MemcpySync)
	return &finding.Finding{
		Severity: in.sev(sh.Sync),
		Claim:    fmt.Sprintf("Synchronisations starve the GPU: %.1f %% of the time the GPU was idle because the launching thread waited for it (%d gaps began inside a sync) and then had to refill an empty queue.", sh.Sync, at.AfterSyncGaps),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time lost to synchronisation", sh.Sync, "%", ""),
			in.ctx.ev("idle after a sync drained the queue (host busy refilling it)", ms(at.AfterSync[tracestats.CauseCPUOps]+at.AfterSync[tracestats.CauseLaunchAPI]+at.AfterSync[tracestats.CauseOtherAPI]+at.AfterSync[tracestats.CauseUntraced]), "ms", syncs),
			in.ctx.ev("idle while the launching thread was blocked in a sync", ms(b[tracestats.CauseSync]), "ms", syncs),
			in.ctx.ev("gaps that began inside a sync", float64(at.AfterSyncGaps), "", ""),
		},
		Decision: "Remove per-step host synchronisations: no .item(), .cpu(), print(tensor) or torch.cuda.synchronize() in the hot loop; accumulate metrics on the GPU and read them every N steps; copy results with non_blocking=True into pinned memory.",
		Supports: finding.SyncBound,
	}
}

// ruleSyncCalls counts the host synchronisations and how long they held
// the CPU; more than SyncsPerStepMax per step is a warning. Sources: 002
// Checklist B step 3.
func ruleSyncCalls(in *Input) *finding.Finding {
	r, v := in.Rank, in.vocab
	syncCalls := r.Rules.StreamSyncs.Count + r.Rules.DeviceSyncs.Count + r.Rules.EventSyncs.Count
	if syncCalls == 0 {
		return nil
	}
	syncHost := r.Rules.StreamSyncs.HostNs + r.Rules.DeviceSyncs.HostNs + r.Rules.EventSyncs.HostNs
	medSyncs, nSteps := medianSyncs(r.Steps)
	sevc := finding.Info
	claim := fmt.Sprintf("%d host synchronisations blocked the CPU for %.1f ms in total.", syncCalls, ms(syncHost))
	if nSteps > 0 {
		claim = fmt.Sprintf("%d host synchronisations (median %d per step) blocked the CPU for %.1f ms in total.", syncCalls, medSyncs, ms(syncHost))
		if medSyncs > thresholds.SyncsPerStepMax {
			sevc = finding.Warning
		}
	}
	ev := []finding.Evidence{
		in.ctx.ev(v.countLabel(trace.StreamSync), float64(r.Rules.StreamSyncs.Count), "", v.calls(trace.StreamSync)),
		in.ctx.ev("host time blocked in stream syncs", ms(r.Rules.StreamSyncs.HostNs), "ms", v.calls(trace.StreamSync)),
		in.ctx.ev(v.countLabel(trace.DeviceSync), float64(r.Rules.DeviceSyncs.Count), "", v.calls(trace.DeviceSync)),
		in.ctx.ev("host time blocked in device syncs", ms(r.Rules.DeviceSyncs.HostNs), "ms", v.calls(trace.DeviceSync)),
		in.ctx.ev(v.countLabel(trace.EventSync), float64(r.Rules.EventSyncs.Count), "", v.calls(trace.EventSync)),
		in.ctx.ev("host time blocked in event syncs", ms(r.Rules.EventSyncs.HostNs), "ms", v.calls(trace.EventSync)),
	}
	if nSteps > 0 {
		ev = append(ev, in.ctx.ev("median syncs per step", float64(medSyncs), "", "ProfilerStep#N"))
	}
	return &finding.Finding{
		Severity: sevc, Claim: claim, Evidence: ev,
		Decision: fmt.Sprintf("Use events (%s) to order streams instead of blocking the host; keep at most one sync per step.", v.call(trace.StreamWaitEvent)),
		Supports: finding.SyncBound,
	}
}

// ruleSyncCopies: blocking copies (cudaMemcpy and its kin) held the CPU.
// Sources: 002 symptom 4.
func ruleSyncCopies(in *Input) *finding.Finding {
	c, v := in.Rank.Rules.SyncCopies, in.vocab
	if c.Count == 0 {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%d blocking copies (%s) held the CPU for %.1f ms.", c.Count, v.calls(trace.MemcpySync), ms(c.HostNs)),
		Evidence: []finding.Evidence{
			in.ctx.ev("blocking copies", float64(c.Count), "", v.calls(trace.MemcpySync)),
			in.ctx.ev("host time in blocking copies", ms(c.HostNs), "ms", v.calls(trace.MemcpySync)),
			in.ctx.bytesCopied(c.Bytes, v.copyEvents()),
		},
		Decision: fmt.Sprintf("Use %s from pinned memory (tensor.to(device, non_blocking=True) on pinned tensors).", v.call(trace.MemcpyAsync)),
		Supports: finding.SyncBound,
	}
}

// ruleSyncMemsets: blocking memsets held the CPU.
func ruleSyncMemsets(in *Input) *finding.Finding {
	c, v := in.Rank.Rules.SyncMemsets, in.vocab
	if c.Count == 0 {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Info,
		Claim:    fmt.Sprintf("%d blocking memsets (%s) held the CPU for %.1f ms.", c.Count, v.calls(trace.MemsetSync), ms(c.HostNs)),
		Evidence: []finding.Evidence{
			in.ctx.ev("blocking memsets", float64(c.Count), "", v.calls(trace.MemsetSync)),
			in.ctx.ev("host time in blocking memsets", ms(c.HostNs), "ms", v.calls(trace.MemsetSync)),
		},
		Decision: fmt.Sprintf("Use %s on the work stream.", v.call(trace.MemsetAsync)),
		Supports: finding.SyncBound,
	}
}

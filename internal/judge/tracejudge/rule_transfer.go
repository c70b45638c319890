package tracejudge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// rulePageableCopies: "async" copies from or to pageable memory, which the
// driver stages synchronously. Sources: 002 symptom 4; FAQ 5.
func rulePageableCopies(in *Input) *finding.Finding {
	c, sh, v := in.Rank.Rules.PageableCopies, in.Shares, in.vocab
	if c.Count == 0 {
		return nil
	}
	return &finding.Finding{
		Severity: in.sev(sh.Transfer),
		Claim:    fmt.Sprintf("%d \"async\" copies touched pageable memory, so the driver staged them synchronously: %.1f ms of host time, %.1f ms of GPU idle inside them.", c.Count, ms(c.HostNs), ms(in.ByCause[tracestats.CausePageableCopy])),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time lost to pageable copies", sh.Transfer, "%", ""),
			in.ctx.ev("async copies from or to pageable memory", float64(c.Count), "", v.calls(trace.MemcpyAsync)+", Memcpy … (Pageable -> Device)/(Device -> Pageable)"),
			in.ctx.ev("host time in those copies", ms(c.HostNs), "ms", v.calls(trace.MemcpyAsync)),
			in.ctx.bytesCopied(c.Bytes, v.copyEvents()),
			in.ctx.ev("GPU idle while the launching thread was inside them", ms(in.ByCause[tracestats.CausePageableCopy]), "ms", ""),
		},
		Decision: "Pin host memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True); keep results on the GPU instead of copying them back to pageable tensors.",
		Supports: finding.TransferBound,
	}
}

// ruleCopiesDominate: host-device copies fill most of the GPU's busy time
// (the live copies-dominate, read from copy durations instead of PCIe
// counters). Sources: 002 symptom 4.
func ruleCopiesDominate(in *Input) *finding.Finding {
	sh := in.Shares
	if sh.CopyBusyPct < thresholds.CopiesDominatePct {
		return nil
	}
	return &finding.Finding{
		Severity: finding.Warning,
		Claim:    fmt.Sprintf("Host-device copies fill %.0f %% of the GPU's busy time.", sh.CopyBusyPct),
		Evidence: []finding.Evidence{
			in.ctx.ev("host-device copy time as share of GPU busy time", sh.CopyBusyPct, "%", in.vocab.copyOps()),
		},
		Decision: "Move less data: keep tensors on the GPU, copy once per batch, use pinned memory and overlap copies with compute on a side stream; check the PCIe link (gpufeed check).",
		Supports: finding.TransferBound,
	}
}

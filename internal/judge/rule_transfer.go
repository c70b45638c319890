package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "copies-dominate", Title: "GPU idle while host-device copies take the time (transfer-bound)",
		// Sources: 002 « Vous êtes limité par le PCIe », erreur courante 4, Task 3-4
		Run: runTransfer})
}

// runTransfer: copies kept the link near its ceiling, or the launch thread
// waited on the device while the copy engines were busier than the kernels
// (a synchronous copy from pageable memory blocks the caller).
func runTransfer(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.TransferBound]
	if share < thresholds.ModerateSharePct {
		return nil
	}
	j := &in.Job
	copyStats := j.CopyPct.Stats()
	f := finding.Finding{
		ID: "copies-dominate", Severity: in.causeSeverity(share), Supports: finding.TransferBound,
		// Sources: 002 « Vous êtes limité par le PCIe », erreur courante 4, FAQ 3, Task 3-4
	}
	saturated := copyStats.P50 >= thresholds.LinkSaturatedPct
	if saturated {
		f.Claim = fmt.Sprintf("copies keep the PCIe link (%s) %.0f%% busy: the link is the ceiling%s",
			j.LinkName, copyStats.Mean, in.idleBecause(share))
	} else {
		f.Claim = fmt.Sprintf("host-device copies block the launch thread: the copy engines were %.0f%% busy, the kernels %.0f%%%s",
			copyStats.Mean, 100-in.Attribution.IdlePct, in.idleBecause(share))
	}
	if launchThread := j.Launch; launchThread != nil {
		f.Subject = threadSubject(launchThread.T)
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(),
		ev(fmt.Sprintf("copy engines busy (PCIe throughput over the %s link's achievable %.1f GB/s), mean", j.LinkName, j.LinkBytesPerSec/1e9),
			copyStats.Mean, "%", in.window(copyStats.N), "PCIe TX/RX throughput, "+in.gpuSource()))
	share0 := in.shareEvidence(finding.TransferBound, "copies near the link's ceiling, or the launch thread waiting on the device, or on a CPU staging or spinning, while copies outlast kernels")
	for _, d := range j.Devices {
		rx, tx := d.PCIeRxBps.Stats(), d.PCIeTxBps.Stats()
		if rx.N > 0 && !math.IsNaN(rx.P50) {
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("GPU %d host-to-device (PCIe RX) throughput, p50", d.Index), rx.P50/1e9, "GB/s", in.window(rx.N), "PCIe RX, "+in.gpuSource()))
		}
		if tx.N > 0 && !math.IsNaN(tx.P50) && tx.P50 > 0 {
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("GPU %d device-to-host (PCIe TX) throughput, p50", d.Index), tx.P50/1e9, "GB/s", in.window(tx.N), "PCIe TX, "+in.gpuSource()))
		}
	}
	if launchThread := j.Launch; launchThread != nil && launchThread.Waits.Readings() > 0 {
		f.Evidence = append(f.Evidence, in.launchWaitsEvidence())
		f.Evidence = append(f.Evidence, in.launchWakersEvidence()...)
	}
	f.Evidence = append(f.Evidence, share0)
	if saturated {
		f.Decision = "Move less data over the link: keep tensors resident on the GPU, send compact inputs (uint8 images, compressed or quantised features) and expand them on the GPU, " +
			"overlap copies with compute on a side stream; and check the negotiated link (gpufeed check: pcie-link): a Gen3 x8 link caps far below x16."
	} else {
		f.Decision = "Make the copies asynchronous: copy from pinned memory (DataLoader(pin_memory=True), tensor.pin_memory()) with non_blocking=True on a side stream " +
			"so they overlap with compute; copy fewer, larger buffers; keep data resident on the GPU between steps."
	}
	return []finding.Finding{f}
}

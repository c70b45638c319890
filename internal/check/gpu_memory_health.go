package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// DCGM's limits on retired pages (dcgm_gpu_hardware_limits.h): past the
// soft limit the memory is degrading; at the hard limit the GPU needs service.
const (
	retiredPagesWarnAt = 15 // DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT
	retiredPagesFailAt = 63 // DCGM_LIMIT_MAX_RETIRED_PAGES
)

var gpuMemoryHealthCheck = Check{
	ID:    "gpu-memory-health",
	Title: "Remapped rows (pending, failed) and retired pages",
	// Sources: 002 Checklist A
	run: forEachGPU(judgeMemoryHealth),
}

func judgeMemoryHealth(d gpu.DeviceInfo, _ gpu.Sample) Outcome {
	var ev []finding.Evidence
	if d.RemappedRowsPending != nil {
		ev = append(ev, text("row remap pending", yesNo(*d.RemappedRowsPending), nvmlSource("nvmlDeviceGetRemappedRows")))
	}
	if d.RemappedRowsFailed != nil {
		ev = append(ev, text("row remap failed", yesNo(*d.RemappedRowsFailed), nvmlSource("nvmlDeviceGetRemappedRows")))
	}
	if d.RetiredPages != nil {
		ev = append(ev, num("retired pages", float64(*d.RetiredPages), "pages", nvmlSource("nvmlDeviceGetRetiredPages")))
	}
	if len(ev) == 0 {
		return unsupported("row remapping or page retirement", "nvmlDeviceGetRemappedRows or nvmlDeviceGetRetiredPages")
	}
	drain := "Drain the node and have the GPU serviced (RMA); run dcgmi diag -r 3 to confirm."
	switch {
	case d.RemappedRowsFailed != nil && *d.RemappedRowsFailed:
		return Outcome{Status: Fail, Evidence: ev, Claim: "a memory row could not be remapped: the GPU's memory is degraded", Decision: drain}
	case d.RetiredPages != nil && *d.RetiredPages >= retiredPagesFailAt:
		return Outcome{Status: Fail, Evidence: ev, Claim: fmt.Sprintf("%d pages retired, at DCGM's limit of %d", *d.RetiredPages, retiredPagesFailAt), Decision: drain}
	case d.RemappedRowsPending != nil && *d.RemappedRowsPending:
		return Outcome{Status: Warn, Evidence: ev, Claim: "a row remap is pending: it takes effect only after a GPU reset",
			Decision: "Reset the GPU (nvidia-smi -r, or reboot) when the node is idle."}
	case d.RetiredPages != nil && *d.RetiredPages >= retiredPagesWarnAt:
		return Outcome{Status: Warn, Evidence: ev, Claim: fmt.Sprintf("%d pages retired, past DCGM's soft limit of %d", *d.RetiredPages, retiredPagesWarnAt),
			Decision: "Watch the count; schedule service before it reaches " + fmt.Sprint(retiredPagesFailAt) + "."}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: "no pending or failed remaps, retired pages below DCGM's limits"}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

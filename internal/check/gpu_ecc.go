package check

import (
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

var gpuECCCheck = Check{
	ID:    "gpu-ecc",
	Title: "GPU ECC mode",
	// Sources: 002 Checklist A
	run: forEachGPU(judgeECC),
}

func judgeECC(d gpu.DeviceInfo, _ gpu.Sample) Outcome {
	if d.ECCEnabled == nil {
		return unsupported("ECC mode (consumer GPUs have none)", "nvmlDeviceGetEccMode")
	}
	ev := []finding.Evidence{text("ECC mode", onOff(*d.ECCEnabled), nvmlSource("nvmlDeviceGetEccMode"))}
	if !*d.ECCEnabled {
		return Outcome{Status: Warn, Evidence: ev,
			Claim:    "ECC off: memory errors go undetected, and page retirement and row remapping cannot protect the job",
			Decision: "Enable ECC (nvidia-smi -e 1, then reset the GPU) unless the fleet chose otherwise on purpose; nodes should match."}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: "ECC on"}
}

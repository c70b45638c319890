package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// powerLimitWarnFraction: a power limit more than 5% under the default is a
// deliberate cap, and a capped GPU lowers its clocks under load (002
// Erreurs courantes 5).
const powerLimitWarnFraction = 0.95

var gpuPowerLimitCheck = Check{
	ID:    "gpu-power-limit",
	Title: "GPU power limit against its default",
	// Sources: 002 Erreurs courantes 5
	run: forEachGPU(judgePowerLimit),
}

func judgePowerLimit(d gpu.DeviceInfo, s gpu.Sample) Outcome {
	if d.PowerLimitW == nil || d.DefaultPowerLimitW == nil || *d.DefaultPowerLimitW <= 0 {
		return unsupported("its power limit and default", "nvmlDeviceGetPowerManagementLimit and ...DefaultLimit")
	}
	ev := []finding.Evidence{
		num("power limit", *d.PowerLimitW, "W", nvmlSource("nvmlDeviceGetPowerManagementLimit")),
		num("default power limit", *d.DefaultPowerLimitW, "W", nvmlSource("nvmlDeviceGetPowerManagementDefaultLimit")),
	}
	if s.PowerW != nil {
		ev = append(ev, num("power draw", *s.PowerW, "W", nvmlSource("nvmlDeviceGetPowerUsage")))
	}
	if *d.PowerLimitW < *d.DefaultPowerLimitW*powerLimitWarnFraction {
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.GPUBound,
			Claim:    fmt.Sprintf("power limit %.0f W, below the %.0f W default: the GPU lowers its clocks under load", *d.PowerLimitW, *d.DefaultPowerLimitW),
			Decision: "Restore the default (nvidia-smi -pl) unless the cap is a deliberate site policy; compare with an identical node."}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("power limit %.0f W (default %.0f W)", *d.PowerLimitW, *d.DefaultPowerLimitW)}
}

package check

import (
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

var gpuPersistenceCheck = Check{
	ID:    "gpu-persistence",
	Title: "GPU persistence mode",
	// Sources: 002 Checklist A
	run: forEachGPU(judgePersistence),
}

// forEachGPU runs a per-device judgement over every device of the source.
func forEachGPU(judge func(d gpu.DeviceInfo, s gpu.Sample) Outcome) func(*env) []Outcome {
	return func(e *env) []Outcome {
		if r, stop := noDriver(e); stop {
			return r
		}
		var out []Outcome
		for _, d := range e.gpuInfo {
			s, _ := sampleFor(e.gpu1, d.Index)
			r := judge(d, s)
			if r.Subject == "" {
				r.Subject = gpuSubject(d)
			}
			out = append(out, r)
		}
		return out
	}
}

func unsupported(what, call string) Outcome {
	return Outcome{Status: Absent, Claim: "driver does not report " + what, Need: "a driver and GPU that support " + call}
}

// Without persistence mode the driver tears the GPU state down when the last
// client exits, so every job start pays seconds of initialisation and
// application clock settings are lost.
func judgePersistence(d gpu.DeviceInfo, _ gpu.Sample) Outcome {
	if d.PersistenceMode == nil {
		return unsupported("persistence mode", "nvmlDeviceGetPersistenceMode")
	}
	ev := []finding.Evidence{text("persistence mode", onOff(*d.PersistenceMode), nvmlSource("nvmlDeviceGetPersistenceMode"))}
	if !*d.PersistenceMode {
		return Outcome{Status: Warn, Evidence: ev,
			Claim:    "persistence mode off: the driver re-initialises the GPU for every job and forgets its clock settings",
			Decision: "Run nvidia-persistenced on the node (the supported way; nvidia-smi -pm 1 is the legacy one)."}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: "persistence mode on"}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

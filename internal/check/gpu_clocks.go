package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// clockLowFraction: an SM clock under 90% of the application clock while
// the GPU is busy is throttling, not idling (002 Task 11: 705 of 1410 MHz).
const clockLowFraction = 0.9

var gpuClocksCheck = Check{
	ID:    "gpu-clocks",
	Title: "SM clock against the application clock, judged only when the GPU is busy",
	// Sources: 002 Task 11
	run: forEachGPU(judgeClocks),
}

func judgeClocks(d gpu.DeviceInfo, s gpu.Sample) Outcome {
	ref, refName, refCall := d.AppSMClockMHz, "application SM clock", "nvmlDeviceGetApplicationsClock"
	if ref == nil {
		ref, refName, refCall = d.MaxSMClockMHz, "max SM clock", "nvmlDeviceGetMaxClockInfo"
	}
	if s.SMClockMHz == nil || ref == nil || *ref == 0 {
		return unsupported("the SM clock and its application or max clock", "nvmlDeviceGetClockInfo")
	}
	ev := []finding.Evidence{
		num("SM clock", float64(*s.SMClockMHz), "MHz", nvmlSource("nvmlDeviceGetClockInfo")),
		num(refName, float64(*ref), "MHz", nvmlSource(refCall)),
	}
	if d.MaxSMClockMHz != nil && ref != d.MaxSMClockMHz {
		ev = append(ev, num("max SM clock", float64(*d.MaxSMClockMHz), "MHz", nvmlSource("nvmlDeviceGetMaxClockInfo")))
	}
	if s.UtilPercent == nil {
		return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("SM clock %d MHz of %d (utilisation unknown: not judged)", *s.SMClockMHz, *ref)}
	}
	ev = append(ev, num("GPU utilisation", *s.UtilPercent, "%", nvmlSource("nvmlDeviceGetUtilizationRates")))
	low := float64(*s.SMClockMHz) < clockLowFraction*float64(*ref)
	switch {
	case low && *s.UtilPercent >= busyUtilPercent:
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.GPUBound,
			Claim:    fmt.Sprintf("SM clock %d MHz of %d while %.0f%% busy: throttled", *s.SMClockMHz, *ref, *s.UtilPercent),
			Decision: "Look at the throttle reasons (gpu-throttle): power limit, cooling and chassis airflow."}
	case low:
		return Outcome{Status: OK, Evidence: ev,
			Claim: fmt.Sprintf("SM clock %d MHz of %d at %.0f%% utilisation: an idle GPU clocks down; look upstream for what it waits on", *s.SMClockMHz, *ref, *s.UtilPercent)}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("SM clock %d MHz of %d", *s.SMClockMHz, *ref)}
}

package check

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// NVML clock event (throttle) reason bits (nvml.h nvmlClocksEventReason*).
const (
	reasonGPUIdle       = 0x1
	reasonAppClocks     = 0x2
	reasonSWPowerCap    = 0x4
	reasonHWSlowdown    = 0x8
	reasonSyncBoost     = 0x10
	reasonSWThermal     = 0x20
	reasonHWThermal     = 0x40
	reasonHWPowerBrake  = 0x80
	reasonDisplayClocks = 0x100
	hardwareReasons     = reasonHWSlowdown | reasonHWThermal | reasonHWPowerBrake
)

var reasonNames = []struct {
	bit  uint64
	name string
}{
	{reasonGPUIdle, "GPU idle"}, {reasonAppClocks, "application clocks setting"}, {reasonSWPowerCap, "software power cap"},
	{reasonHWSlowdown, "hardware slowdown"}, {reasonSyncBoost, "sync boost"}, {reasonSWThermal, "software thermal slowdown"},
	{reasonHWThermal, "hardware thermal slowdown"}, {reasonHWPowerBrake, "hardware power brake"}, {reasonDisplayClocks, "display clocks setting"},
}

func reasonList(mask uint64) string {
	var out []string
	for _, r := range reasonNames {
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

var gpuThrottleCheck = Check{
	ID:    "gpu-throttle",
	Title: "Why the GPU clocks are held down (NVML clock event reasons)",
	// Sources: 002 Task 11, Erreurs courantes 5
	run: forEachGPU(judgeThrottle),
}

func judgeThrottle(_ gpu.DeviceInfo, s gpu.Sample) Outcome {
	if s.ClockEventReasons == nil {
		return unsupported("clock event reasons", "nvmlDeviceGetCurrentClocksEventReasons")
	}
	mask := *s.ClockEventReasons
	ev := []finding.Evidence{text("clock event reasons", fmt.Sprintf("0x%x: %s", mask, reasonList(mask)), nvmlSource("nvmlDeviceGetCurrentClocksEventReasons"))}
	if s.TempC != nil {
		ev = append(ev, num("temperature", *s.TempC, "°C", nvmlSource("nvmlDeviceGetTemperature")))
	}
	switch {
	case mask&hardwareReasons != 0:
		return Outcome{Status: Fail, Evidence: ev, Supports: finding.GPUBound,
			Claim: "hardware is holding the clocks down: " + reasonList(mask&hardwareReasons),
			Decision: "Hardware slowdown halves clocks or worse: check cooling, chassis airflow and the power supply; " +
				"an external power-brake signal comes from the chassis."}
	case mask&reasonSWThermal != 0:
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.GPUBound,
			Claim:    "the driver is slowing the GPU for temperature",
			Decision: "Check cooling and airflow; the GPU is near its thermal limit."}
	case mask&reasonSWPowerCap != 0:
		return Outcome{Status: OK, Evidence: ev,
			Claim: "clocks limited by the power cap: normal at full load (see gpu-power-limit for whether the cap is lowered)"}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: "no thermal or hardware slowdown (" + reasonList(mask) + ")"}
}

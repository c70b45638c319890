package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

const (
	reasonSWPowerCap = gpu.ClockEventSWPowerCap
	reasonSWThermal  = gpu.ClockEventSWThermal
	hardwareReasons  = gpu.ClockEventsHardware
)

func reasonList(mask uint64) string { return gpu.DescribeClockEvents(mask) }

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

package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// clockLowFraction: an SM clock under 90% of the application clock while
// the GPU is busy is throttling, not idling (002 Task 11: 705 of 1410 MHz).
const clockLowFraction = 0.9

// slowdownReasons are the NVML clock event reasons that hold clocks down
// under load: the power cap, thermal slowdown, and the hardware's own
// slowdowns. A clock under the reference without one of them is the boost
// algorithm's choice (H100 and A100 rarely hold their maximum boost), not
// throttling.
const slowdownReasons = gpu.ClockEventSWPowerCap | gpu.ClockEventSWThermal | gpu.ClockEventsHardware

var gpuClocksCheck = Check{
	ID:    "gpu-clocks",
	Title: "SM clock against the application clock over busy readings, throttled only with a slowdown reason from the driver",
	// Sources: 002 Task 11; NVML nvmlDeviceGetCurrentClocksEventReasons
	run: func(e *env) []Outcome {
		return forEachGPU(func(d gpu.DeviceInfo, s gpu.Sample) Outcome {
			if w, ok := e.opts.GPUWindow[d.Index]; ok && len(w) > 0 {
				return judgeClocks(d, w, "the job's window")
			}
			return judgeClocks(d, checkReadings(e, d.Index, s), "the check's readings")
		})(e)
	},
}

// checkReadings are the check's own readings of one GPU: the first and,
// after a window, the second.
func checkReadings(e *env, index int, s gpu.Sample) []gpu.Sample {
	out := []gpu.Sample{s}
	if e.opts.Window > 0 {
		if s0, ok := sampleFor(e.gpu0, index); ok {
			out = []gpu.Sample{s0, s}
		}
	}
	return out
}

// utilReadings counts what a sample's utilisation rests on: NVML's
// utilisation points when it has them, else one reading.
func utilReadings(s gpu.Sample) int { return max(1, len(s.Points)) }

// judgeClocks judges the SM clock over the busy samples only, against the
// application clock (the sustained reference; the maximum boost clock when
// the driver gives none), and calls it throttled only when the driver says
// why (a slowdown reason) and most busy readings are low; never from one
// reading, never while the GPU was mostly idle over the samples.
func judgeClocks(d gpu.DeviceInfo, samples []gpu.Sample, over string) Outcome {
	ref, refName, refCall := d.AppSMClockMHz, "application SM clock", "nvmlDeviceGetApplicationsClock"
	if ref == nil {
		ref, refName, refCall = d.MaxSMClockMHz, "max boost SM clock", "nvmlDeviceGetMaxClockInfo"
	}
	var (
		utilSum              float64
		utilN, readings      int
		busyN, lowN          int
		busyClk              float64
		minClk               uint32
		reasons              uint64
		reasonsKnown, anyClk bool
	)
	for _, s := range samples {
		if s.SMClockMHz != nil {
			anyClk = true
		}
		if s.UtilPercent == nil {
			continue
		}
		utilSum += *s.UtilPercent
		utilN++
		readings += utilReadings(s)
		if *s.UtilPercent < busyUtilPercent || s.SMClockMHz == nil {
			continue
		}
		busyN++
		busyClk += float64(*s.SMClockMHz)
		if minClk == 0 || *s.SMClockMHz < minClk {
			minClk = *s.SMClockMHz
		}
		if ref != nil && float64(*s.SMClockMHz) < clockLowFraction*float64(*ref) {
			lowN++
		}
		if s.ClockEventReasons != nil {
			reasonsKnown = true
			reasons |= *s.ClockEventReasons
		}
	}
	if !anyClk || ref == nil || *ref == 0 {
		return unsupported("the SM clock and its application or max clock", "nvmlDeviceGetClockInfo")
	}
	ev := []finding.Evidence{num(refName, float64(*ref), "MHz", nvmlSource(refCall))}
	if d.MaxSMClockMHz != nil && ref != d.MaxSMClockMHz {
		ev = append(ev, num("max boost SM clock", float64(*d.MaxSMClockMHz), "MHz", nvmlSource("nvmlDeviceGetMaxClockInfo")))
	}
	if utilN == 0 {
		last := samples[len(samples)-1]
		if last.SMClockMHz != nil {
			ev = append(ev, num("SM clock", float64(*last.SMClockMHz), "MHz", nvmlSource("nvmlDeviceGetClockInfo")))
		}
		return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("utilisation unknown over %s: clocks not judged", over)}
	}
	util := utilSum / float64(utilN)
	ev = append(ev, num("GPU utilisation, mean over "+over, util, "%", nvmlSource("nvmlDeviceGetSamples, nvmlDeviceGetUtilizationRates")),
		num("busy samples (utilisation at least "+fmt.Sprint(busyUtilPercent)+"%)", float64(busyN), fmt.Sprintf("of %d", utilN), nvmlSource("nvmlDeviceGetSamples")))
	switch {
	case util < busyUtilPercent:
		return Outcome{Status: OK, Evidence: ev,
			Claim: fmt.Sprintf("GPU busy %.0f%% over %s: an idle GPU clocks down, so its clock says nothing about throttling; look upstream for what it waits on", util, over)}
	case busyN == 0 || readings < 2:
		return Outcome{Status: OK, Evidence: ev,
			Claim: fmt.Sprintf("one busy reading over %s: throttling is judged over a sustained load, not one instant", over)}
	}
	mean := busyClk / float64(busyN)
	ev = append(ev, num("SM clock in busy samples, mean", mean, "MHz", nvmlSource("nvmlDeviceGetClockInfo")),
		num("SM clock in busy samples, lowest", float64(minClk), "MHz", nvmlSource("nvmlDeviceGetClockInfo")))
	if reasonsKnown {
		ev = append(ev, text("clock event reasons in busy samples", fmt.Sprintf("0x%x: %s", reasons, reasonList(reasons)), nvmlSource("nvmlDeviceGetCurrentClocksEventReasons")))
	}
	low := lowN*2 > busyN
	switch {
	case low && reasonsKnown && reasons&slowdownReasons != 0:
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.GPUBound,
			Claim: fmt.Sprintf("SM clock %.0f MHz (mean over the busy readings, %d of %d; %.0f%% busy over %s) under %.0f%% of the %d MHz %s, held down by %s: throttled",
				mean, busyN, utilN, util, over, 100*clockLowFraction, *ref, refName, reasonList(reasons&slowdownReasons)),
			Decision: "Look at the throttle reasons (gpu-throttle): power limit, cooling and chassis airflow."}
	case low && reasonsKnown:
		return Outcome{Status: OK, Evidence: ev,
			Claim: fmt.Sprintf("SM clock %.0f MHz of %d while busy, with no power, thermal or hardware slowdown reason: the boost clock's own choice, not throttling", mean, *ref)}
	case low:
		return Outcome{Status: OK, Evidence: ev,
			Claim: fmt.Sprintf("SM clock %.0f MHz of %d while busy; the driver gives no clock event reasons, so throttling cannot be told from ordinary boost behaviour: not judged", mean, *ref)}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("SM clock %.0f MHz of %d while busy", mean, *ref)}
}

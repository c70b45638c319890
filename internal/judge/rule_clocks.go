package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "gpu-clocks", Title: "GPU clocks: dropping between bursts, or low under load",
		// Sources: 002 Task 1, Task 11, erreur courante 5
		Run: runClocks, Emits: []string{"gpu-clocks-drop-between-bursts", "gpu-clocks-low-under-load"}})
}

// runClocks reads each used GPU's SM clock per interval against its maximum:
//   - gpu-clocks-drop-between-bursts (information): in idle-ish intervals
//     (utilisation below 50 %) the clock falls under ClockDropPct of its
//     maximum: the GPU is idle long enough to downclock, the sign to look
//     upstream (002 Task 1);
//   - gpu-clocks-low-under-load (warning): in busy intervals (idle under
//     GPUBoundIdleMaxPct) the clock stays under ClockThrottledPct: power or
//     thermal throttling (002 Task 11, erreur courante 5), unless the
//     driver's clock event reasons were read and name no slowdown.
func runClocks(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, d := range in.Job.Devices {
		if d.Info == nil || d.Info.MaxSMClockMHz == nil || *d.Info.MaxSMClockMHz == 0 {
			continue
		}
		if u := d.UtilPct.Stats(); u.N == 0 || u.Max < 50 {
			continue // no bursts: a GPU that never works has nothing to drop between
		}
		maxClk := float64(*d.Info.MaxSMClockMHz)
		var idleLow, idleN, busyLow, busyN int
		var idleMin, busyClk float64 = math.Inf(1), 0
		for i := range d.SMClockMHz {
			clk, u := d.SMClockMHz[i], d.UtilPct[i]
			if math.IsNaN(clk) || math.IsNaN(u) {
				continue
			}
			pct := clk / maxClk * 100
			switch {
			case u < 50:
				idleN++
				idleMin = math.Min(idleMin, pct)
				if pct < thresholds.ClockDropPct {
					idleLow++
				}
			case 100-u < thresholds.GPUBoundIdleMaxPct:
				busyN++
				busyClk += pct
				if pct < thresholds.ClockThrottledPct {
					busyLow++
				}
			}
		}
		src := "SM clock and utilisation, " + in.gpuSource()
		if idleLow > 0 && idleLow*2 >= idleN {
			out = append(out, finding.Finding{
				ID: "gpu-clocks-drop-between-bursts", Severity: finding.Info, Subject: fmt.Sprintf("GPU %d", d.Index),
				// Sources: 002 Task 1, erreur courante 5
				Claim: fmt.Sprintf("GPU %d's SM clock fell below %.0f%% of its %0.f MHz maximum in %d of %d low-utilisation intervals: it idles long enough to downclock", d.Index, thresholds.ClockDropPct, maxClk, idleLow, idleN),
				Evidence: []finding.Evidence{
					ev("SM clock, lowest in low-utilisation intervals", idleMin, "% of maximum", in.window(idleN), src),
					ev("low-utilisation intervals (under 50%) with the clock under "+fmt.Sprint(thresholds.ClockDropPct)+"%", float64(idleLow), fmt.Sprintf("of %d", idleN), in.window(idleN), src),
				},
				Decision: "Nothing to change on the GPU: it downclocks because it waits. Find what it waits for upstream (the verdict).",
			})
		}
		// A clock under the maximum while busy is throttling only when
		// the driver, asked, gives a slowdown reason (power cap, thermal,
		// hardware): without one it is the boost clock's own choice (H100
		// and A100 rarely hold their maximum boost), not a fault.
		slowdown := gpu.ClockEventSWPowerCap | gpu.ClockEventSWThermal | gpu.ClockEventsHardware
		boostOnly := d.ClockEventsRead && d.ClockEventReasons&slowdown == 0
		if busyLow > 0 && busyLow*2 >= busyN && !boostOnly {
			reasons := ""
			if d.ClockEventReasons&^gpu.ClockEventGPUIdle != 0 {
				reasons = "; clock event reasons: " + gpu.DescribeClockEvents(d.ClockEventReasons&^gpu.ClockEventGPUIdle)
			}
			out = append(out, finding.Finding{
				ID: "gpu-clocks-low-under-load", Severity: finding.Warning, Supports: finding.GPUBound, Subject: fmt.Sprintf("GPU %d", d.Index),
				// Sources: 002 Task 11, erreur courante 5
				Claim: fmt.Sprintf("GPU %d ran under %.0f%% of its maximum SM clock in %d of %d busy intervals%s: it is throttled", d.Index, thresholds.ClockThrottledPct, busyLow, busyN, reasons),
				Evidence: []finding.Evidence{
					ev("SM clock in busy intervals, mean", busyClk/float64(busyN), "% of maximum", in.window(busyN), src),
				},
				Decision: "Check power limits, cooling and chassis airflow (nvidia-smi -q -d CLOCK,POWER,TEMPERATURE; gpufeed check).",
			})
		}
	}
	return out
}

package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// swapUsedWarnFraction: a tenth of RAM's worth of pages on swap means the
// job or its neighbours were pushed out; swap-ins stall whoever touches them.
const swapUsedWarnFraction = 0.10

var memorySwapCheck = Check{
	ID:    "memory-swap",
	Title: "Swap in use",
	// Sources: 002 Task 14
	run: runMemorySwap,
}

func runMemorySwap(e *env) []Outcome {
	src := procFile("meminfo")
	mi, err := e.memInfo()
	if err != nil {
		return []Outcome{readFailure("", "memory", src, err, "a procfs", "read access to /proc")}
	}
	if mi.SwapTotal == nil || mi.SwapFree == nil || mi.MemTotal == nil {
		return []Outcome{{Status: Absent, Claim: "SwapTotal or SwapFree absent from " + src, Need: "a procfs meminfo"}}
	}
	if *mi.SwapTotal == 0 {
		return []Outcome{{Status: OK, Claim: "no swap configured", Evidence: []finding.Evidence{bytesEv("SwapTotal", 0, src)}}}
	}
	used := *mi.SwapTotal - min(*mi.SwapFree, *mi.SwapTotal)
	ev := []finding.Evidence{bytesEv("SwapTotal", *mi.SwapTotal, src), bytesEv("swap used", used, src)}
	if float64(used) >= swapUsedWarnFraction*float64(*mi.MemTotal) {
		return []Outcome{{Status: Warn, Evidence: ev, Supports: finding.Preprocessing,
			Claim:    fmt.Sprintf("%s on swap (%.0f%% of RAM): pages of the job or its neighbours were pushed out", human(used), 100*float64(used)/float64(*mi.MemTotal)),
			Decision: "Find who was pushed out (grep VmSwap /proc/*/status), cut pinned memory and cache sizes, or add RAM."}}
	}
	return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("%s on swap", human(used))}}
}

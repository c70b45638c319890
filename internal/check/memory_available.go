package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// memAvailableWarnFraction: under a tenth of RAM available, page cache for
// the dataset is being evicted and pinned allocations compete with it
// (002 Task 14: 1.8 GB available was the warning sign).
const memAvailableWarnFraction = 0.10

var memoryAvailableCheck = Check{
	ID:    "memory-available",
	Title: "MemAvailable against MemTotal",
	// Sources: 002 Task 14
	run: runMemoryAvailable,
}

func runMemoryAvailable(e *env) []Outcome {
	src := procFile("meminfo")
	mi, err := e.memInfo()
	if err != nil {
		return []Outcome{readFailure("", "memory", src, err, "a procfs", "read access to /proc")}
	}
	if mi.MemTotal == nil || mi.MemAvailable == nil || *mi.MemTotal == 0 {
		return []Outcome{{Status: Absent, Claim: "MemTotal or MemAvailable absent from " + src, Need: "Linux 3.14 or later (MemAvailable)"}}
	}
	frac := float64(*mi.MemAvailable) / float64(*mi.MemTotal)
	ev := []finding.Evidence{bytesEv("MemTotal", *mi.MemTotal, src), bytesEv("MemAvailable", *mi.MemAvailable, src),
		num("available", frac*100, "%", src)}
	if frac < memAvailableWarnFraction {
		return []Outcome{{Status: Warn, Evidence: ev, Supports: finding.Preprocessing,
			Claim: fmt.Sprintf("only %s of %s available (%.0f%%): the page cache and pinned buffers compete", human(*mi.MemAvailable), human(*mi.MemTotal), frac*100),
			Decision: "Reduce pinned memory and in-application caching, size DataLoader workers down, or give the node more RAM / " +
				"isolate noisy neighbours."}}
	}
	return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("%s of %s available (%.0f%%)", human(*mi.MemAvailable), human(*mi.MemTotal), frac*100)}}
}

package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

var memoryDirtyCheck = Check{
	ID:    "memory-dirty",
	Title: "Dirty and Writeback memory against the kernel's throttling threshold",
	// Sources: 002 Task 14
	run: runMemoryDirty,
}

// The kernel lets writers dirty pages freely up to the midpoint between the
// background and the hard dirty thresholds (mm/page-writeback.c,
// dirty_freerun_ceiling); above it, balance_dirty_pages puts every writer
// (checkpoints, logs, the DataLoader's cache files) to sleep.
func runMemoryDirty(e *env) []Outcome {
	src := procFile("meminfo")
	mi, err := e.memInfo()
	if err != nil {
		return []Outcome{readFailure("", "memory", src, err, "a procfs", "read access to /proc")}
	}
	if mi.Dirty == nil || mi.Writeback == nil || mi.MemAvailable == nil {
		return []Outcome{{Status: Absent, Claim: "Dirty, Writeback or MemAvailable absent from " + src, Need: "Linux 3.14 or later"}}
	}
	dirty := *mi.Dirty + *mi.Writeback
	ev := []finding.Evidence{bytesEv("Dirty", *mi.Dirty, src), bytesEv("Writeback", *mi.Writeback, src)}
	ds, err := e.fs.Dirty()
	if err != nil {
		return []Outcome{readFailure("", "dirty thresholds", procFile("sys/vm/dirty_ratio"), err, "a procfs", "read access to /proc/sys/vm")}
	}
	// The kernel's base is dirtyable memory (free + file cache), which MemAvailable approximates.
	base := float64(*mi.MemAvailable)
	bg := base * float64(ds.BackgroundRatio) / 100
	if ds.BackgroundBytes > 0 {
		bg = float64(ds.BackgroundBytes)
	}
	hard := base * float64(ds.Ratio) / 100
	if ds.Bytes > 0 {
		hard = float64(ds.Bytes)
	}
	freerun := (bg + hard) / 2
	ev = append(ev, finding.Evidence{What: "throttling starts near", Value: freerun / (1 << 20), Unit: "MiB",
		Window: fmt.Sprintf("midpoint of dirty_background (%s) and dirty (%s) thresholds of MemAvailable", dirtySetting(ds.BackgroundRatio, ds.BackgroundBytes), dirtySetting(ds.Ratio, ds.Bytes)),
		Source: procFile("sys/vm/dirty_*")})
	if float64(dirty) >= freerun && freerun > 0 {
		return []Outcome{{Status: Warn, Evidence: ev, Supports: finding.StorageBound,
			Claim: fmt.Sprintf("%s dirty or under writeback, past the %s where the kernel throttles writers", human(dirty), human(uint64(freerun))),
			Decision: "Writes (checkpoints, logs, cache files) outrun the disk: spread checkpoints out, write them to faster storage, " +
				"or lower vm.dirty_background_bytes so writeback starts earlier."}}
	}
	return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("%s dirty or under writeback, below the throttling threshold", human(dirty))}}
}

func dirtySetting(ratio, bytes uint64) string {
	if bytes > 0 {
		return human(bytes)
	}
	return fmt.Sprintf("%d%%", ratio)
}

package check

import (
	"fmt"
	"slices"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// freqCapTolerance: a scaling_max_freq more than 5% under cpuinfo_max_freq
// is a deliberate cap (a power profile, thermal daemon or admin), not rounding.
const freqCapTolerance = 0.95

var cpuFrequencyCheck = Check{
	ID:    "cpu-frequency",
	Title: "CPU current vs maximum frequency, and caps on the maximum",
	// Sources: 002 Task 9, Erreurs courantes 2
	run: runCPUFrequency,
}

func runCPUFrequency(e *env) []Outcome {
	cpus, err := e.cpuList()
	if err != nil {
		return []Outcome{readFailure("", "CPU list", sysFile("devices/system/cpu"), err, "a sysfs", "read access to /sys")}
	}
	return []Outcome{judgeFrequency(cpus)}
}

func judgeFrequency(cpus []procfs.CPU) Outcome {
	var ratios []float64
	var capped []int
	var capKHz, maxKHz uint64
	for _, c := range cpus {
		if c.MaxKHz == nil || *c.MaxKHz == 0 {
			continue
		}
		maxKHz = max(maxKHz, *c.MaxKHz)
		if c.CurKHz != nil {
			ratios = append(ratios, float64(*c.CurKHz)/float64(*c.MaxKHz))
		}
		if c.ScalingMaxKHz != nil && float64(*c.ScalingMaxKHz) < float64(*c.MaxKHz)*freqCapTolerance {
			capped = append(capped, c.ID)
			capKHz = *c.ScalingMaxKHz
		}
	}
	if maxKHz == 0 {
		return noCPUFreq()
	}
	src := sysFile("devices/system/cpu/cpu*/cpufreq")
	ev := []finding.Evidence{num("highest cpuinfo_max_freq", float64(maxKHz)/1000, "MHz", src+"/cpuinfo_max_freq")}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		ev = append(ev, finding.Evidence{What: "current / max frequency, median", Value: ratios[len(ratios)/2] * 100, Unit: "%",
			Window: fmt.Sprintf("one reading of %d CPUs", len(ratios)), Source: src + "/scaling_cur_freq"},
			finding.Evidence{What: "current / max frequency, lowest", Value: ratios[0] * 100, Unit: "%",
				Window: "one reading", Source: src + "/scaling_cur_freq"})
	}
	if len(capped) > 0 {
		ev = append(ev, num("scaling_max_freq on capped CPUs", float64(capKHz)/1000, "MHz", src+"/scaling_max_freq"))
		return Outcome{Status: Warn, Evidence: ev, Supports: finding.Preprocessing,
			Claim: fmt.Sprintf("maximum frequency capped on CPUs %s: %.0f of %.0f MHz", cpuset.Set(capped), float64(capKHz)/1000, float64(maxKHz)/1000),
			Decision: "Find what caps scaling_max_freq (tuned/power profile, thermald, an admin script, BIOS power limits) " +
				"and lift it on training nodes; compare with an identical node."}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: "no cap on the maximum frequency (current frequency is a snapshot: idle cores run low)"}
}

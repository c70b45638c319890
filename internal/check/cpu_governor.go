package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// performanceGovernor is the governor 002 Task 9 asks for on dedicated
// training nodes; any other lets the CPU drop its clock between bursts.
const performanceGovernor = "performance"

var cpuGovernorCheck = Check{
	ID:    "cpu-governor",
	Title: "CPU frequency governor",
	// Sources: 002 Task 9
	run: runCPUGovernor,
}

// noCPUFreq is the absent result of the cpufreq checks.
func noCPUFreq() Outcome {
	return Outcome{Status: Absent, Claim: "no cpufreq policy under /sys/devices/system/cpu/cpu*/cpufreq (a VM, or frequency under firmware control)",
		Need: "a bare-metal host with a cpufreq driver (intel_pstate, amd-pstate, acpi-cpufreq, cppc)"}
}

func runCPUGovernor(e *env) []Outcome {
	cpus, err := e.cpuList()
	if err != nil {
		return []Outcome{readFailure("", "CPU list", sysFile("devices/system/cpu"), err, "a sysfs", "read access to /sys")}
	}
	return []Outcome{judgeGovernors(cpus)}
}

func judgeGovernors(cpus []procfs.CPU) Outcome {
	byGov := map[string][]int{}
	drivers, epps := map[string]bool{}, map[string]bool{}
	total := 0
	for _, c := range cpus {
		if c.Governor == "" {
			continue
		}
		total++
		byGov[c.Governor] = append(byGov[c.Governor], c.ID)
		if c.Driver != "" {
			drivers[c.Driver] = true
		}
		if c.EPP != "" {
			epps[c.EPP] = true
		}
	}
	if total == 0 {
		return noCPUFreq()
	}
	govs := make([]string, 0, len(byGov))
	for g := range byGov {
		govs = append(govs, g)
	}
	sort.Strings(govs)
	var ev []finding.Evidence
	for _, g := range govs {
		ev = append(ev, text("governor "+g, "CPUs "+cpuset.Set(byGov[g]).String(), sysFile("devices/system/cpu/cpu*/cpufreq/scaling_governor")))
	}
	if len(drivers) > 0 {
		ev = append(ev, text("cpufreq driver", strings.Join(sortedKeys(drivers), ", "), sysFile("devices/system/cpu/cpu*/cpufreq/scaling_driver")))
	}
	if len(epps) > 0 {
		ev = append(ev, text("energy/performance preference", strings.Join(sortedKeys(epps), ", "), sysFile("devices/system/cpu/cpu*/cpufreq/energy_performance_preference")))
	}
	slow := total - len(byGov[performanceGovernor])
	if slow == 0 {
		return Outcome{Status: OK, Claim: fmt.Sprintf("governor performance on all %d CPUs", total), Evidence: ev}
	}
	var others []string
	for _, g := range govs {
		if g != performanceGovernor {
			others = append(others, g)
		}
	}
	return Outcome{Status: Warn, Evidence: ev, Supports: finding.Preprocessing,
		Claim: fmt.Sprintf("governor %s on %d of %d CPUs: the CPU may drop its clock between bursts", strings.Join(others, "/"), slow, total),
		Decision: "On dedicated training nodes set the performance governor (cpupower frequency-set -g performance, " +
			"or the BIOS/tuned profile), then measure again."}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

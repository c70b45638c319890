package check

import (
	"fmt"
	"sort"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
)

var cpuCapacityCheck = Check{
	ID:    "cpu-capacity",
	Title: "Heterogeneous cores (cpu_capacity), and whether the launch thread may land on a small one",
	// Sources: 000 §9
	run: runCPUCapacity,
}

func runCPUCapacity(e *env) []Outcome {
	cpus, err := e.cpuList()
	if err != nil {
		return []Outcome{readFailure("", "CPU list", sysFile("devices/system/cpu"), err, "a sysfs", "read access to /sys")}
	}
	byCap := map[uint64]cpuset.Set{}
	for _, c := range cpus {
		if c.Capacity != nil {
			byCap[*c.Capacity] = append(byCap[*c.Capacity], c.ID)
		}
	}
	if len(byCap) == 0 {
		return []Outcome{{Status: Absent, Claim: "no cpu_capacity files (most x86 servers do not export them)",
			Need: "an Arm or hybrid system whose kernel exports /sys/devices/system/cpu/cpu*/cpu_capacity"}}
	}
	caps := make([]uint64, 0, len(byCap))
	for c := range byCap {
		caps = append(caps, c)
	}
	sort.Slice(caps, func(i, j int) bool { return caps[i] > caps[j] })
	var ev []finding.Evidence
	for _, c := range caps {
		ev = append(ev, text(fmt.Sprintf("capacity %d", c), "CPUs "+byCap[c].String(), sysFile("devices/system/cpu/cpu*/cpu_capacity")))
	}
	if len(caps) == 1 {
		return []Outcome{{Status: OK, Claim: fmt.Sprintf("all %d CPUs have the same capacity (%d)", len(byCap[caps[0]]), caps[0]), Evidence: ev}}
	}
	big := byCap[caps[0]]
	if e.opts.PID <= 0 {
		return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("heterogeneous cores: the biggest (capacity %d) are CPUs %s", caps[0], big),
			Decision: "Pin launch threads to the biggest cores."}}
	}
	th, err := e.mainThreadStatus()
	allowed, have := th.CPUsAllowed()
	if err != nil || !have {
		return []Outcome{{Status: OK, Subject: e.subjectPID(), Evidence: ev, Claim: "heterogeneous cores (launch thread's affinity unreadable)"}}
	}
	ev = append(ev, text("launch (main) thread allowed CPUs", allowed.String(), procFile(pidDir(e.opts.PID), "task", pidDir(e.opts.PID), "status")))
	if small := allowed.Minus(big); len(small) > 0 {
		return []Outcome{{Status: Warn, Subject: e.subjectPID(), Evidence: ev, Supports: finding.SubmissionBound,
			Claim:    fmt.Sprintf("launch thread may run on smaller cores (CPUs %s); the biggest are %s", small, big),
			Decision: fmt.Sprintf("Pin the launch thread to the biggest cores (taskset -c %s); small cores launch kernels slower.", big)}}
	}
	return []Outcome{{Status: OK, Subject: e.subjectPID(), Evidence: ev, Claim: "launch thread confined to the biggest cores"}}
}

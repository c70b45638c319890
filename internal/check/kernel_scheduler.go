package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

var kernelSchedulerCheck = Check{
	ID:    "kernel-scheduler",
	Title: "Kernel version and CPU scheduler (EEVDF from 6.6, sched_ext from 6.12)",
	// Sources: 000 §6
	run: runKernelScheduler,
}

func runKernelScheduler(e *env) []Outcome {
	k, err := e.fs.KernelRelease()
	if err != nil {
		return []Outcome{readFailure("", "kernel release", procFile("sys/kernel/osrelease"), err, "a procfs", "read access to /proc")}
	}
	sched := "CFS"
	if k.AtLeast(6, 6) {
		sched = "EEVDF"
	}
	ev := []finding.Evidence{text("kernel release", k.Release, procFile("sys/kernel/osrelease")), text("fair scheduler", sched, "derived: EEVDF replaced CFS in Linux 6.6")}
	claim := fmt.Sprintf("Linux %d.%d: %s schedules normal tasks", k.Major, k.Minor, sched)
	if ext, err := e.fs.SchedExt(); err == nil {
		ev = append(ev, text("sched_ext", ext.State, sysFile("kernel/sched_ext/state")))
		if ext.State == "enabled" {
			claim = fmt.Sprintf("Linux %d.%d: a BPF scheduler (sched_ext %s) replaces %s", k.Major, k.Minor, orNone(ext.Ops), sched)
			ev = append(ev, text("sched_ext scheduler", orNone(ext.Ops), sysFile("kernel/sched_ext/root/ops")))
		}
	}
	return []Outcome{{Status: OK, Claim: claim, Evidence: ev}}
}

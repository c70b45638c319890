package check

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

var cpuIsolationCheck = Check{
	ID:    "cpu-isolation",
	Title: "Isolated CPUs (isolcpus, nohz_full) and where the target runs against them",
	// Sources: 000 §9
	run: runCPUIsolation,
}

func runCPUIsolation(e *env) []Outcome {
	isoSrc := sysFile("devices/system/cpu/isolated")
	isolated, err := procfs.CPUListFile(e.fs.SysPath("devices/system/cpu/isolated"))
	if err != nil && !procfs.IsAbsent(err) {
		return []Outcome{readFailure("", "isolated CPUs", isoSrc, err, "", "read access to /sys")}
	}
	ev := []finding.Evidence{}
	if err == nil {
		ev = append(ev, text("isolated CPUs", orNone(isolated.String()), isoSrc))
	}
	nohz, nerr := procfs.CPUListFile(e.fs.SysPath("devices/system/cpu/nohz_full"))
	if nerr == nil {
		ev = append(ev, text("nohz_full CPUs", orNone(nohz.String()), sysFile("devices/system/cpu/nohz_full")))
	}
	params, cerr := e.kernelCmdline()
	if cerr == nil {
		var seen []string
		for _, name := range []string{"isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity"} {
			if p, ok := procfs.Param(params, name); ok {
				seen = append(seen, name+"="+p.Value)
				if name == "isolcpus" && err != nil {
					// Older kernels lack the isolated file; the command line still says.
					if set, _, perr := procfs.IsolcpusList(p.Value); perr == nil {
						isolated, err = set, nil
					}
				}
			}
		}
		ev = append(ev, text("boot parameters", orNone(strings.Join(seen, " ")), procFile("cmdline")))
	}
	if err != nil && cerr != nil {
		return []Outcome{{Status: Absent, Claim: "neither " + isoSrc + " nor /proc/cmdline readable", Need: "a sysfs and procfs"}}
	}
	if len(isolated) == 0 {
		return []Outcome{{Status: OK, Evidence: ev, Claim: "no isolated CPUs: every CPU is shared by the scheduler"}}
	}
	if e.opts.PID <= 0 {
		return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("CPUs %s are isolated from the scheduler", isolated),
			Decision: "Pin each latency-critical thread to one isolated CPU of its own; nothing else will run there."}}
	}
	st, serr := e.targetStatus()
	allowed, have := st.CPUsAllowed()
	if serr != nil || !have {
		return []Outcome{{Status: OK, Evidence: ev, Subject: e.subjectPID(), Claim: fmt.Sprintf("CPUs %s are isolated (target's affinity unreadable)", isolated)}}
	}
	ev = append(ev, text("target allowed CPUs", allowed.String(), procFile(pidDir(e.opts.PID), "status")))
	onIso := allowed.Intersect(isolated)
	if len(onIso) > 1 {
		return []Outcome{{Status: Warn, Subject: e.subjectPID(), Evidence: ev, Supports: finding.SubmissionBound,
			Claim: fmt.Sprintf("process may run on %d isolated CPUs (%s), where the scheduler does not balance load: its threads can pile onto one CPU", len(onIso), onIso),
			Decision: "Pin each thread to its own isolated CPU (the launch thread alone on one), and run helpers (DataLoader workers, " +
				"OpenMP pools) on the housekeeping CPUs."}}
	}
	return []Outcome{{Status: OK, Subject: e.subjectPID(), Evidence: ev,
		Claim: fmt.Sprintf("CPUs %s are isolated; the process runs on %d of them", isolated, len(onIso))}}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

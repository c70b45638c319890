package frozen

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// startingFinding is the verdict-carrying finding of a window that holds
// only the job's start-up (Progress.Starting): when the job started, that
// its GPU ran no step, what its threads did meanwhile, and when to look
// again. It supports no starvation class: the verdict it carries is
// inconclusive, and the CPU-side rules' causes are dropped beside it (a
// start-up's imports are no batch preparation, its sleeping launcher no
// launch thread with too little work).
func startingFinding(v *view, s *Starting) finding.Finding {
	m := s.Measure
	pid := v.tl.Meta.Target.PID
	who := v.procName(pid)
	when := "started " + fmtSeconds(time.Duration(s.Started-v.t0)) + " into the window"
	if s.Started < v.t0 {
		when = "started " + fmtSeconds(time.Duration(v.t0-s.Started)) + " before the window"
	}
	if s.Launched {
		when += " (gpufeed started it)"
	}
	window := v.windowText()
	claim := fmt.Sprintf("the job is still starting: %s %s and its GPU ran no step in the %s window (the job's kernels ran at most %.0f %% of any sample)",
		who, when, fmtSeconds(v.span()), m.GPUMaxUtil)
	if s.QuietIdle {
		claim += fmt.Sprintf("; it has waited for requests or a timer only since %s into the window (%s), too short a quiet to call it idle",
			fmtSeconds(time.Duration(s.Quiet-v.t0)), fmtSeconds(time.Duration(v.t1-s.Quiet)))
	}
	claim += "; what its threads did is its start-up (the interpreter's launcher, imports, loading a model or data, connecting), not its steps"

	ev := []finding.Evidence{{What: who + ": start time", Value: round(time.Duration(s.Started-v.t0).Seconds(), 2), Unit: "s from the window's start",
		Window: window, Source: fmt.Sprintf("/proc/%d/stat (starttime), /proc/uptime", pid)}}
	ev = append(ev, gpuEvidence(v, m, window)...)
	ev = append(ev, finding.Evidence{What: fmt.Sprintf("CPU gained by the job's %d live threads", m.Threads), Value: round(m.CPUCores*100, 3), Unit: "% of one core",
		Window: window, Source: cpuSource(m)})
	if m.Started > 0 {
		ev = append(ev, finding.Evidence{What: "processes of the job that started in the window (" + strconv.Itoa(m.StartedExited) + " of them also ended)",
			Value: float64(m.Started), Window: window, Source: "/proc/PID/task/TID/children, /proc/PID/stat"})
	}
	if s.QuietIdle {
		ev = append(ev, finding.Evidence{What: "quiet since the job's last sign of progress, every live thread waiting for requests or a timer", Value: round(time.Duration(v.t1-s.Quiet).Seconds(), 2), Unit: "s",
			Window: window, Source: "/proc/PID/task/TID/{schedstat,syscall,wchan}"})
	}
	again := fmt.Sprintf("gpufeed diagnose --pid %d once it runs its steps", pid)
	if s.Launched {
		again += ", or a longer --duration so the window reaches past its start-up"
	}
	return finding.Finding{
		ID:       "job-starting",
		Severity: finding.Info,
		Claim:    claim,
		Evidence: ev,
		Decision: "Nothing can be said yet about how this job feeds its GPU: the window holds its start-up only. Look again when its GPU works: " + again + ".",
		Supports: finding.Inconclusive,
		Subject:  "job",
	}
}

// startingVerdict is the inconclusive verdict of a window that holds only
// the job's start-up, resting on its job-starting finding.
func startingVerdict(r Result) *finding.Verdict {
	v := &finding.Verdict{Class: finding.Inconclusive, Because: []string{},
		Basis: "0%: the window holds the job's start-up and none of its steps, so no class is named"}
	for _, f := range r.Findings {
		if f.ID == "job-starting" {
			v.Because = append(v.Because, f.ID)
			v.Summary, v.Decision = f.Claim, f.Decision
			v.Missing = "a window in which the job's GPU runs its steps: this one ended before its first"
			break
		}
	}
	return v
}

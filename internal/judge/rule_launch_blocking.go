package judge

import (
	"fmt"
	"sort"

	"github.com/gpufeed/gpufeed/internal/finding"
)

func init() {
	register(Rule{ID: "cuda-launch-blocking", Title: "CUDA_LAUNCH_BLOCKING=1: every launch waits for its kernel",
		// Sources: 002 « Synchronisations excessives »
		Run: runLaunchBlocking})
}

// launchBlockingValue is CUDA_LAUNCH_BLOCKING's value when a process of the
// job sets it to something other than 0, else "".
func launchBlockingValue(in *Input) string {
	for _, p := range in.Job.Procs {
		if v, ok := p.Info.Env["CUDA_LAUNCH_BLOCKING"]; ok && v != "" && v != "0" {
			return v
		}
	}
	return ""
}

// runLaunchBlocking: CUDA_LAUNCH_BLOCKING=1 is a debugging switch that turns
// every kernel launch into a synchronisation.
func runLaunchBlocking(in *Input) []finding.Finding {
	var pids []int
	val := ""
	for _, p := range in.Job.Procs {
		if v, ok := p.Info.Env["CUDA_LAUNCH_BLOCKING"]; ok && v != "" && v != "0" {
			pids = append(pids, p.Key.PID)
			val = v
		}
	}
	if len(pids) == 0 {
		return nil
	}
	sort.Ints(pids)
	return []finding.Finding{{
		ID: "cuda-launch-blocking", Severity: finding.Warning, Supports: finding.SyncBound,
		Subject: fmt.Sprintf("pid %d", pids[0]),
		Claim:   fmt.Sprintf("CUDA_LAUNCH_BLOCKING=%s is set in %d process(es) of the job: every kernel launch waits for the kernel to finish", val, len(pids)),
		Evidence: []finding.Evidence{evText("CUDA_LAUNCH_BLOCKING", val, "at the start of the window",
			fmt.Sprintf("/proc/%d/environ (allowlisted variables only)", pids[0]))},
		Decision: "Unset CUDA_LAUNCH_BLOCKING: it is a debugging switch that serialises the CPU and the GPU.",
		// Sources: 002 « Synchronisations excessives »
	}}
}

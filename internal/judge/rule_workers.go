package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func init() {
	register(Rule{ID: "dataloader-workers-vs-cores", Title: "Worker processes against the CPUs they share",
		// Sources: 002 erreur courante 6, Checklist C.2; 000 §6
		Run: runWorkers})
}

// runWorkers compares the job's worker processes (DataLoader workers,
// multiprocessing children) with the CPUs the job may use, as information
// the preprocessing decision uses. More workers than CPUs is frozen-job
// triage's workers-exceed-cores warning.
func runWorkers(in *Input) []finding.Finding {
	// Only pools of workers count: a DataLoader's, multiprocessing's. A
	// child the job started for something else (a shell's sleep, a
	// compiler, ffmpeg) is no worker to size against the cores.
	var workers []*derive.Proc
	for _, p := range in.workerProcs() {
		if p.Role == "dataloader-worker" || p.Role == "worker" {
			workers = append(workers, p)
		}
	}
	if len(workers) == 0 {
		return nil
	}
	cpus := in.Job.CPUs
	busy := 0.0
	for _, p := range workers {
		busy += p.CPU.Mean
	}
	f := finding.Finding{
		ID: "dataloader-workers-vs-cores", Severity: finding.Info, Supports: finding.Preprocessing,
		// Sources: 002 erreur courante 6, Checklist C.2; 000 §6
		Evidence: []finding.Evidence{
			ev("worker processes (DataLoader workers, multiprocessing children)", float64(len(workers)), "processes", "alive at the end of the window", "the observed process tree"),
			ev("CPUs the job may use", float64(cpus), "CPUs", "", in.Job.CPUsFrom),
			ev("the workers' CPU, summed", busy, "% of one core", in.window(in.Attribution.Intervals), "schedstat"),
		},
	}
	if len(workers) > cpus {
		return nil // frozen-job triage's workers-exceed-cores warns about it
	}
	var infos []*timeline.ProcInfo
	for _, p := range workers {
		infos = append(infos, p.Info)
	}
	untold, why := frozen.RanksUntold(infos)
	if untold > 0 {
		f.Evidence = append(f.Evidence, frozen.RanksUntoldEvidence(untold, why))
	}
	f.Claim = fmt.Sprintf("%s for %d CPUs%s", safetext.Count(len(workers), "worker process", "worker processes"), cpus, frozen.RanksUntoldClause(untold, len(workers)))
	f.Decision = "Add workers only while throughput rises and a core stays free for the launch thread; more workers than cores adds contention, not throughput."
	return []finding.Finding{f}
}

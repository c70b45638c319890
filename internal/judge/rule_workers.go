package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
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
	workers := in.workerProcs()
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
	f.Claim = fmt.Sprintf("%d worker processes for %d CPUs", len(workers), cpus)
	f.Decision = "Add workers only while throughput rises and a core stays free for the launch thread; more workers than cores adds contention, not throughput."
	return []finding.Finding{f}
}

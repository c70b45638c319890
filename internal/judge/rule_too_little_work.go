package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "gpu-underfed", Title: "GPU underused while nothing in the job is busy or waiting (too little work)",
		// Sources: 002 « Disponibilité de travail parallèle », erreur courante 8, FAQ 1
		Run: runTooLittleWork})
}

// runTooLittleWork: the launch thread had spare time and slept on a timer or
// on input nobody was busy producing: the GPU simply gets little work.
func runTooLittleWork(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.TooLittleWork]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	busy, disk, n := in.producerMeans()
	f := finding.Finding{
		ID: "gpu-underfed", Severity: in.causeSeverity(share), Supports: finding.TooLittleWork, Subject: threadSubject(launchThread.T),
		// Sources: 002 « Disponibilité de travail parallèle », erreur courante 8, FAQ 1, Checklist E.3
		Claim: fmt.Sprintf("the work is too small: nothing in the job is busy or waiting (the launch thread %s ran %.0f%% of the time and slept the rest)%s",
			threadName(launchThread.T), nanZero(launchThread.T.CPU.Mean), in.idleBecause(share)),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(), in.launchCPUEvidence()[0])
	if launchThread.Waits.Readings() > 0 {
		f.Evidence = append(f.Evidence, in.launchWaitsEvidence())
		f.Evidence = append(f.Evidence, in.launchWakersEvidence()...)
	}
	f.Evidence = append(f.Evidence, in.shareEvidence(finding.TooLittleWork, "launch thread sleeping, nothing in the job busy or in disk wait"))
	f.Evidence = append(f.Evidence, ev("the job's other threads running or runnable, summed", busy, "% of one core", in.window(n), "schedstat of every thread of the job"),
		ev("the job's other threads in disk wait (D), summed", disk, "% of one thread's time", in.window(n), "/proc/PID/task/TID/stat state"))
	if e, ok := in.hostBusyEvidence(); ok {
		f.Evidence = append(f.Evidence, e)
	}
	f.Decision = "Give the GPU more work per launch: larger batches (batch requests together in inference), fuse small kernels, keep several independent requests or " +
		"micro-batches in flight on separate streams. For a latency-bound service low utilisation can be the right trade-off: optimise p95/p99 latency, not the " +
		"utilisation graph."
	return []finding.Finding{f}
}

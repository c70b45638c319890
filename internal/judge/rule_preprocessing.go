package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "input-pipeline-busy", Title: "GPU idle while the launch thread waits for input that busy workers compute (preprocessing-bound)",
		// Sources: 002 « Goulot de prétraitement CPU », Checklist C, FAQ 2
		Run: runPreprocessing})
}

// runPreprocessing: the launch thread had spare time and waited for input,
// while the job's other threads (DataLoader workers, decoders) were busy
// computing it.
func runPreprocessing(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.Preprocessing]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	busy, _, n := in.producerMeans()
	workers := in.workerProcs()
	cpus := in.Job.CPUs
	f := finding.Finding{
		ID: "input-pipeline-busy", Severity: in.causeSeverity(share), Supports: finding.Preprocessing, Subject: threadSubject(launchThread.T),
		// Sources: 002 « Goulot de prétraitement CPU », Checklist C, FAQ 2; Task 6
		Claim: fmt.Sprintf("the launch thread waits for batches that %s and the job's other threads prepare, keeping %.1f cores busy%s",
			workerCount(len(workers)), busy/100, in.idleBecause(share)),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(),
		ev("the job's other threads running or runnable, summed", busy, "% of one core", in.window(n), "schedstat of every thread of the job"),
		evText("worker processes against CPUs", fmt.Sprintf("%d workers, %d CPUs", len(workers), cpus), "at the end of the window", in.Job.CPUsFrom),
		in.shareEvidence(finding.Preprocessing,
			fmt.Sprintf("launch thread waiting for input while the job's other threads run ≥ %.0f%% of a core", thresholds.ProducerBusyPct)))
	if us := producerUserShare(in); !math.IsNaN(us) {
		f.Evidence = append(f.Evidence, ev("their time in user space (decoding, transforms)", us, "% of their CPU", "over the window", "/proc/PID/task/TID/stat utime, stime"))
	}
	if e, ok := in.hostBusyEvidence(); ok {
		f.Evidence = append(f.Evidence, e)
	}
	if pct, ok := sagemakerCPUBottleneck(in); ok {
		f.Evidence = append(f.Evidence, ev(fmt.Sprintf("intervals with GPU < %.0f%% while the host's CPUs are > %.0f%% busy (SageMaker CPUBottleneck fires above %.0f%%)",
			thresholds.CPUBottleneckGPUUtilPct, thresholds.CPUBottleneckCPUUtilPct, thresholds.CPUBottleneckDatapointsPct), pct, "%", in.window(in.Attribution.Measured), "/proc/stat, "+in.gpuSource()))
	}
	f.Evidence = append(f.Evidence, in.launchWaitsEvidence())
	f.Evidence = append(f.Evidence, in.launchWakersEvidence()...)
	if len(workers) < cpus-1 {
		f.Decision = fmt.Sprintf("Parallelise the input pipeline: %d workers on %d CPUs; raise DataLoader num_workers toward %d and measure until throughput stops rising, "+
			"then make each sample cheaper (faster codecs, vectorised transforms, cached decoded data, augmentation on the GPU).", len(workers), cpus, cpus-1)
	} else {
		f.Decision = "The CPUs are saturated by preprocessing: make each sample cheaper (faster codecs, vectorised transforms, SIMD libraries), cache decoded " +
			"or transformed samples, move augmentation to the GPU, or give the job more cores; more workers than cores only adds contention."
	}
	return []finding.Finding{f}
}

// producerUserShare is the user share of the producers' CPU time over the window.
func producerUserShare(in *Input) float64 {
	var u, s float64
	for _, th := range in.Job.Producers {
		u += th.UserSec
		s += th.SysSec
	}
	if u+s == 0 {
		return math.NaN()
	}
	return u / (u + s) * 100
}

// sagemakerCPUBottleneck is the share of measured intervals meeting AWS
// SageMaker Debugger's CPUBottleneck condition (GPU below 10 % while the
// host's CPUs are above 90 % busy).
func sagemakerCPUBottleneck(in *Input) (float64, bool) {
	h := in.View.Host
	if h == nil {
		return 0, false
	}
	k, n := 0, 0
	for i, g := range in.Job.GPUUtil {
		if math.IsNaN(g) || i >= len(h.BusyPct) || math.IsNaN(h.BusyPct[i]) {
			continue
		}
		n++
		if g < thresholds.CPUBottleneckGPUUtilPct && h.BusyPct[i] > thresholds.CPUBottleneckCPUUtilPct {
			k++
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(k) / float64(n) * 100, true
}

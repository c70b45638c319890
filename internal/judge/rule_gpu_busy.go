package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "gpu-busy", Title: "GPU busy and fed: the CPU is not the bottleneck (GPU-bound)",
		// Sources: 002 « Goulot côté GPU », Checklist E, Task 11
		Run: runGPUBusy})
}

// runGPUBusy: the GPU idled less than GPUBoundIdleMaxPct of the window.
func runGPUBusy(in *Input) []finding.Finding {
	at := in.Attribution
	if at.Measured == 0 || at.IdlePct >= thresholds.GPUBoundIdleMaxPct {
		return nil
	}
	busy := 0
	for _, g := range in.Job.GPUUtil {
		if !math.IsNaN(g) && 100-g < thresholds.GPUBoundIdleMaxPct {
			busy++
		}
	}
	f := finding.Finding{
		ID: "gpu-busy", Severity: finding.Info, Supports: finding.GPUBound,
		// Sources: 002 « Goulot côté GPU », Checklist E, Task 11
		Claim: fmt.Sprintf("the GPU was busy %.0f%% of the time and the CPU kept it fed: the CPU is not the bottleneck", 100-at.IdlePct),
	}
	s := in.Job.GPUUtil.Stats()
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(),
		ev("GPU utilisation, p10 (the least busy tenth of intervals)", s.P10, "%", in.window(s.N), in.utilSource()),
		ev(fmt.Sprintf("intervals with the GPU idle under %.0f%%", thresholds.GPUBoundIdleMaxPct), float64(busy), fmt.Sprintf("of %d", at.Measured), in.window(at.Measured), in.utilSource()))
	if launchThread := in.Job.Launch; launchThread != nil {
		f.Subject = threadSubject(launchThread.T)
		f.Evidence = append(f.Evidence, ev("launch thread "+threadName(launchThread.T)+" running (its headroom is the rest)", nanZero(launchThread.T.CPU.Mean), "% of wall time",
			in.window(launchThread.T.CPU.N), in.schedSource(launchThread.T)))
	}
	for _, d := range in.Job.Devices {
		if c := d.SMClockMHz.Stats(); c.N > 0 && d.Info != nil && d.Info.MaxSMClockMHz != nil {
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("GPU %d SM clock p50 against its maximum %d MHz", d.Index, *d.Info.MaxSMClockMHz),
				c.P50/float64(*d.Info.MaxSMClockMHz)*100, "%", in.window(c.N), "SM clock, "+in.gpuSource()))
		}
	}
	f.Decision = "Leave the input pipeline alone: the GPU is the limit. Look at the GPU next: kernel efficiency in a profiler (occupancy, memory-bound kernels, " +
		"idle tensor cores), mixed precision, fused or better library kernels, data layout; and check that clocks hold under load (no power or thermal " +
		"throttling)."
	return []finding.Finding{f}
}

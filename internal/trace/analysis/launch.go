package analysis

import "github.com/gpufeed/gpufeed/internal/trace"

// LaunchStats is HTA's CUDA kernel launch statistics: for every GPU
// operation enqueued by a launch, async memcpy or async memset call, the
// call's duration (CPU), the operation's duration (GPU) and the launch delay
// (operation start minus call end, clipped at zero).
type LaunchStats struct {
	Launches int `json:"launches"`
	// RuntimeUs and DelayUs describe the call durations and launch delays in microseconds.
	RuntimeUs Dist `json:"runtime_us"`
	DelayUs   Dist `json:"launch_delay_us"`
	// RuntimeOutliers: calls longer than the runtime cut-off (HTA: 50 us).
	RuntimeOutliers int `json:"runtime_outliers"`
	// DelayOutliers: launch delays longer than the delay cut-off (HTA: 100 us).
	DelayOutliers int `json:"launch_delay_outliers"`
	// ShortKernels: operations shorter than the call that launched them,
	// whose call is within the runtime cut-off (HTA's "short GPU kernels").
	ShortKernels int `json:"short_kernels"`
	// ShortKernelGPUNs is the GPU time of those short operations.
	ShortKernelGPUNs int64 `json:"short_kernel_gpu_ns"`
	// GPUUs describes the operations' durations in microseconds.
	GPUUs Dist `json:"gpu_us"`
}

func launchStats(s *scope, runtimeCut, delayCut int64) LaunchStats {
	t := s.t
	var ls LaunchStats
	var cpu, gpu, delay []float64
	for i := range t.GPU {
		if !s.gpu[i] || t.GPU[i].Launch < 0 {
			continue
		}
		g := &t.GPU[i]
		r := &t.Runtime[g.Launch]
		switch r.Kind {
		case trace.Launch, trace.MemcpyAsync, trace.MemsetAsync:
		default:
			continue
		}
		if !s.cpuIn(r.Start) {
			continue
		}
		ls.Launches++
		c, d := r.Dur(), max(g.Start-r.End, 0)
		cpu = append(cpu, float64(c)/1e3)
		gpu = append(gpu, float64(g.Dur())/1e3)
		delay = append(delay, float64(d)/1e3)
		if c > runtimeCut {
			ls.RuntimeOutliers++
		}
		if d > delayCut {
			ls.DelayOutliers++
		}
		if c <= runtimeCut && g.Dur() < c {
			ls.ShortKernels++
			ls.ShortKernelGPUNs += g.Dur()
		}
	}
	ls.RuntimeUs, ls.GPUUs, ls.DelayUs = describe(cpu), describe(gpu), describe(delay)
	return ls
}

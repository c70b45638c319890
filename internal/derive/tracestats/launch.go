package tracestats

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
	// One pass counts; then each distribution is built in turn in one
	// reused buffer, so a trace of millions of launches needs one array.
	counted := func(g *trace.GPUOp) (*trace.RuntimeCall, bool) {
		if g.Launch < 0 {
			return nil, false
		}
		r := &t.Runtime[g.Launch]
		switch r.Kind {
		case trace.Launch, trace.MemcpyAsync, trace.MemsetAsync:
			return r, s.cpuIn(r.Start)
		}
		return nil, false
	}
	for i := range t.GPU {
		if !s.gpu[i] {
			continue
		}
		g := &t.GPU[i]
		r, ok := counted(g)
		if !ok {
			continue
		}
		ls.Launches++
		c, d := r.Dur(), max(g.Start-r.End, 0)
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
	buf := make([]float64, 0, ls.Launches)
	dist := func(v func(g *trace.GPUOp, r *trace.RuntimeCall) int64) Dist {
		buf = buf[:0]
		for i := range t.GPU {
			if !s.gpu[i] {
				continue
			}
			g := &t.GPU[i]
			if r, ok := counted(g); ok {
				buf = append(buf, float64(v(g, r))/1e3)
			}
		}
		return describe(buf)
	}
	ls.RuntimeUs = dist(func(_ *trace.GPUOp, r *trace.RuntimeCall) int64 { return r.Dur() })
	ls.GPUUs = dist(func(g *trace.GPUOp, _ *trace.RuntimeCall) int64 { return g.Dur() })
	ls.DelayUs = dist(func(g *trace.GPUOp, r *trace.RuntimeCall) int64 { return max(g.Start-r.End, 0) })
	return ls
}

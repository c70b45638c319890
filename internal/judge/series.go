package judge

import (
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
)

// Series is what a verdict was judged from, interval by interval: the GPU's
// utilisation and copies, the launch thread's running and run-queue shares,
// the job's other threads' CPU, the host's iowait, and the class each
// interval's idle time went to. The timeline renderers (the HTML report,
// the live view, the per-interval JSON lines) draw it as it is: they never
// judge again.
type Series struct {
	// Intervals are the window's intervals (ns since the window started).
	Intervals []derive.Interval
	// GPUUtil is the job's devices' mean utilisation, in percent; CopyPct
	// the copy engines' estimated busy share. NaN where not read.
	GPUUtil, CopyPct derive.Series
	// Launch names the launch thread ("" when none was found); LaunchTID
	// is its tid. LaunchRun and LaunchWait are its shares of each interval
	// running and waiting for a CPU (schedstat), in percent; the rest of
	// the interval it slept.
	Launch                string
	LaunchTID, LaunchPID  int
	LaunchRun, LaunchWait derive.Series
	// Workers counts the job's other threads (DataLoader workers,
	// readers, pools); WorkersCPU is their summed CPU per interval, in
	// percent of one core.
	Workers    int
	WorkersCPU derive.Series
	// IOWait is the host's iowait share per interval, in percent.
	IOWait derive.Series
	// Cause is, per interval, the class most of its GPU idle time went to;
	// Attributed says which intervals have one (measured, with idle time).
	// Unexplained ("") is idle time no cause explains.
	Cause      []finding.Class
	Attributed []bool
}

func seriesOf(in *Input) *Series {
	a, j := in.View, &in.Job
	n := len(a.Intervals)
	s := &Series{Intervals: append([]derive.Interval(nil), a.Intervals...), GPUUtil: j.GPUUtil, CopyPct: j.CopyPct,
		Cause: in.Attribution.Cause, Attributed: in.Attribution.Attributed, Workers: len(j.Producers)}
	if launch := j.Launch; launch != nil {
		s.Launch, s.LaunchTID, s.LaunchPID = threadName(launch.T), launch.T.Key.TID, launch.T.PID
		s.LaunchRun, s.LaunchWait = launch.T.CPUPct, launch.T.WaitPct
	} else {
		s.LaunchRun, s.LaunchWait = nanSeriesN(n), nanSeriesN(n)
	}
	s.WorkersCPU = nanSeriesN(n)
	for _, th := range j.Producers {
		for i := 0; i < n && i < len(th.CPUPct); i++ {
			if v := th.CPUPct[i]; !math.IsNaN(v) {
				s.WorkersCPU[i] = nanZero(s.WorkersCPU[i]) + v
			}
		}
	}
	if a.Host != nil {
		s.IOWait = a.Host.IOWaitPct
	} else {
		s.IOWait = nanSeriesN(n)
	}
	return s
}

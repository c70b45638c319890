package render

import (
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
)

// jsonSeries is the judge's series as the report carries it: what the
// verdict was judged from, interval by interval, one array per quantity
// (JSON.md, "series"). The -o jsonl interval lines and the HTML timeline
// show the same values; a reader that plots or checks the verdict takes
// them from here and never derives them again from the processes' totals.
type jsonSeries struct {
	// StartNS and EndNS bound each interval, ns since the window started.
	StartNS []int64 `json:"start_ns"`
	EndNS   []int64 `json:"end_ns"`
	// GPUUtilPercent is the job's GPUs' mean utilisation; CopyBusyPercent
	// the copy engines' estimated busy share; null where not read.
	GPUUtilPercent  []*float64 `json:"gpu_util_percent"`
	CopyBusyPercent []*float64 `json:"copy_busy_percent"`
	// LaunchThread is null when none was found; its arrays are then null
	// throughout.
	LaunchThread              *seriesThread `json:"launch_thread"`
	LaunchRunningPercent      []*float64    `json:"launch_running_percent"`
	LaunchRunQueueWaitPercent []*float64    `json:"launch_runqueue_wait_percent"`
	OtherThreads              int           `json:"other_threads"`
	OtherThreadsCPUPercent    []*float64    `json:"other_threads_cpu_percent"`
	HostIOWaitPercent         []*float64    `json:"host_iowait_percent"`
	IdleCause                 []*string     `json:"idle_cause"`
}

type seriesThread struct {
	PID  int    `json:"pid"`
	TID  int    `json:"tid"`
	Name string `json:"name"`
}

// seriesJSON is s as the report writes it; nil (null) when no rules ran.
func seriesJSON(s *judge.Series) *jsonSeries {
	if s == nil {
		return nil
	}
	n := len(s.Intervals)
	j := &jsonSeries{StartNS: make([]int64, n), EndNS: make([]int64, n), GPUUtilPercent: seriesCol(s.GPUUtil, n), CopyBusyPercent: seriesCol(s.CopyPct, n),
		LaunchRunningPercent: seriesCol(s.LaunchRun, n), LaunchRunQueueWaitPercent: seriesCol(s.LaunchWait, n), OtherThreads: s.Workers,
		OtherThreadsCPUPercent: seriesCol(s.WorkersCPU, n), HostIOWaitPercent: seriesCol(s.IOWait, n), IdleCause: make([]*string, n)}
	for i, iv := range s.Intervals {
		j.StartNS[i], j.EndNS[i] = iv.Start, iv.End
		if i < len(s.Attributed) && s.Attributed[i] && i < len(s.Cause) {
			c := className(s.Cause[i])
			j.IdleCause[i] = &c
		}
	}
	if s.Launch != "" {
		j.LaunchThread = &seriesThread{PID: s.LaunchPID, TID: s.LaunchTID, Name: s.Launch}
	} else {
		j.LaunchRunningPercent, j.LaunchRunQueueWaitPercent = make([]*float64, n), make([]*float64, n)
	}
	if s.Workers == 0 {
		j.OtherThreadsCPUPercent = make([]*float64, n)
	}
	return j
}

// seriesCol is x's first n values, null where not read (NaN) or missing.
func seriesCol(x derive.Series, n int) []*float64 {
	out := make([]*float64, n)
	for i := range out {
		out[i] = at(x, i) // the interval lines' own reading of one value
	}
	return out
}

// series is j read back into the judge's type (a report read from its
// JSON draws and streams what was written).
func (j *jsonSeries) series() *judge.Series {
	if j == nil {
		return nil
	}
	n := len(j.StartNS)
	s := &judge.Series{Intervals: make([]derive.Interval, n), GPUUtil: nanCol(j.GPUUtilPercent, n), CopyPct: nanCol(j.CopyBusyPercent, n),
		LaunchRun: nanCol(j.LaunchRunningPercent, n), LaunchWait: nanCol(j.LaunchRunQueueWaitPercent, n), Workers: j.OtherThreads,
		WorkersCPU: nanCol(j.OtherThreadsCPUPercent, n), IOWait: nanCol(j.HostIOWaitPercent, n),
		Cause: make([]finding.Class, n), Attributed: make([]bool, n)}
	for i := range n {
		s.Intervals[i].Start = j.StartNS[i]
		if i < len(j.EndNS) {
			s.Intervals[i].End = j.EndNS[i]
		}
		if i < len(j.IdleCause) && j.IdleCause[i] != nil {
			s.Attributed[i] = true
			if c := *j.IdleCause[i]; c != "unexplained" {
				s.Cause[i] = finding.Class(c)
			}
		}
	}
	if t := j.LaunchThread; t != nil {
		s.Launch, s.LaunchPID, s.LaunchTID = t.Name, t.PID, t.TID
	}
	return s
}

func nanCol(x []*float64, n int) derive.Series {
	out := make(derive.Series, n)
	for i := range out {
		out[i] = math.NaN()
		if i < len(x) && x[i] != nil {
			out[i] = *x[i]
		}
	}
	return out
}

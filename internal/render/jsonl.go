// JSON lines (-o jsonl): a live run streams one object per sampling
// interval as it is judged, then ends with the report, each on one line
// (JSON.md, "Per-interval lines"). The interval lines are what the verdict
// over the last window was judged from (the judge's series, as the HTML
// timeline draws them); the last line is the report -o json writes, on one
// line.

package render

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// FormatJSONL is JSON lines: diagnose and demo stream per-interval lines
// then the report; other commands have no intervals to stream.
const FormatJSONL Format = "jsonl"

type jsonlRenderer struct{}

// Diagnose writes the report as the stream's last line.
func (jsonlRenderer) Diagnose(w io.Writer, r *Report, _ Options) error {
	return writeJSONLine(w, reportJSON{Header: header(r.Header), Verdict: verdictJSON(r.Verdict), Findings: findingsJSON(r.Findings), report: (*report)(r), Series: seriesJSON(r.Series)})
}

func (jsonlRenderer) Check(io.Writer, *CheckReport, Options) error {
	return fmt.Errorf("-o jsonl streams a live run's intervals (diagnose, demo): use -o json for check")
}

func (jsonlRenderer) Trace(io.Writer, *TraceReport, Options) error {
	return fmt.Errorf("-o jsonl streams a live run's intervals (diagnose, demo): use -o json for trace")
}

// IntervalLine is one interval of a live run, as judged over the window
// that ended with it.
type IntervalLine struct {
	Type          string `json:"type"` // "interval"
	SchemaVersion int    `json:"schema_version"`
	// Index counts the run's intervals from 0.
	Index int `json:"index"`
	// StartNS and EndNS are the interval's bounds, ns since the run's first
	// sample (the report's window.started).
	StartNS int64 `json:"start_ns"`
	EndNS   int64 `json:"end_ns"`
	// GPUUtilPercent is the job's GPUs' mean utilisation; CopyBusyPercent
	// the copy engines' estimated busy share; null where not read.
	GPUUtilPercent  *float64 `json:"gpu_util_percent"`
	CopyBusyPercent *float64 `json:"copy_busy_percent"`
	// LaunchThread is null until a launch thread is found.
	LaunchThread *LaunchLine `json:"launch_thread"`
	OtherThreads OtherLine   `json:"other_threads"`
	// HostIOWaitPercent is the host's iowait share.
	HostIOWaitPercent *float64 `json:"host_iowait_percent"`
	// IdleCause is the class most of the interval's GPU idle time went to
	// ("unexplained" for idle no cause explains); null when the interval
	// had no idle time or no GPU reading.
	IdleCause *string `json:"idle_cause"`
	// Window is the verdict over the last window when this line was written.
	Window WindowLine `json:"window"`
}

// LaunchLine is the launch thread's interval.
type LaunchLine struct {
	PID                 int      `json:"pid"`
	TID                 int      `json:"tid"`
	Name                string   `json:"name"`
	RunningPercent      *float64 `json:"running_percent"`
	RunQueueWaitPercent *float64 `json:"runqueue_wait_percent"`
	SleepingPercent     *float64 `json:"sleeping_percent"`
}

// OtherLine is the job's other threads (workers, readers, pools).
type OtherLine struct {
	Count int `json:"count"`
	// CPUPercent is their summed CPU, in percent of one core.
	CPUPercent *float64 `json:"cpu_percent"`
}

// WindowLine is the verdict over the window judged.
type WindowLine struct {
	DurationNS        int64   `json:"duration_ns"`
	Class             string  `json:"class"`
	ConfidencePercent float64 `json:"confidence_percent"`
	FirstFinding      *string `json:"first_finding"`
	Summary           string  `json:"summary"`
}

// IntervalLines makes the lines of r's intervals that end after after (ns
// since the run's start), numbered from index. r is a window's report (its
// Series set); next is the end of its last interval.
func IntervalLines(r *Report, after int64, index int) (lines []IntervalLine, next int64) {
	next = after
	s := r.Series
	if s == nil {
		return nil, next
	}
	w := WindowLine{DurationNS: r.Window.DurationNS}
	if v := r.Verdict; v != nil {
		w.Class, w.ConfidencePercent, w.Summary = string(v.Class), v.Confidence*100, v.Summary
	}
	if len(r.Findings) > 0 {
		id := r.Findings[0].ID
		w.FirstFinding = &id
	}
	for i, iv := range s.Intervals {
		if iv.End <= after {
			continue
		}
		l := IntervalLine{Type: "interval", SchemaVersion: SchemaVersion, Index: index, StartNS: iv.Start, EndNS: iv.End,
			GPUUtilPercent: at(s.GPUUtil, i), CopyBusyPercent: at(s.CopyPct, i), HostIOWaitPercent: at(s.IOWait, i),
			OtherThreads: OtherLine{Count: s.Workers, CPUPercent: at(s.WorkersCPU, i)}, Window: w}
		if s.Workers == 0 {
			l.OtherThreads.CPUPercent = nil
		}
		if s.Launch != "" {
			ll := &LaunchLine{PID: s.LaunchPID, TID: s.LaunchTID, Name: s.Launch, RunningPercent: at(s.LaunchRun, i), RunQueueWaitPercent: at(s.LaunchWait, i)}
			if ll.RunningPercent != nil {
				q := 0.0
				if ll.RunQueueWaitPercent != nil {
					q = *ll.RunQueueWaitPercent
				}
				sl := math.Max(0, 100-*ll.RunningPercent-q)
				ll.SleepingPercent = &sl
			}
			l.LaunchThread = ll
		}
		if i < len(s.Attributed) && s.Attributed[i] {
			c := className(s.Cause[i])
			l.IdleCause = &c
		}
		lines = append(lines, l)
		index++
		next = iv.End
	}
	return lines, next
}

func at(s []float64, i int) *float64 {
	if i >= len(s) {
		return nil
	}
	return num(s[i])
}

// WriteIntervalLine writes one interval line.
func WriteIntervalLine(w io.Writer, l IntervalLine) error { return writeJSONLine(w, l) }

// writeJSONLine is writeJSON on one line.
func writeJSONLine(w io.Writer, v any) error { return encodeJSON(w, v, json.Compact) }

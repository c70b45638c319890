package frozen

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// Stalled-verdict confidences: a stall explained by a dead or missing member
// is near certain; one seen with the GPUs idle is firm; without a GPU in
// view a device busy with long kernels would look the same from the CPU.
// These say how firmly the kind of evidence supports the class; the
// classifier lowers them further when the window holds little of it.
const (
	confExplained = 0.95
	confGPUIdle   = 0.85
	confNoGPU     = 0.6
	// An idle job's waits were all read and all are requests or timers; with
	// the GPU seen idle nothing contradicts it. Without a GPU in view a job
	// could still have work queued on one (its threads would then wait on
	// the device, which none does): a little less sure.
	confIdle      = 0.9
	confIdleNoGPU = 0.8
)

// Verdict is frozen-job triage's verdict for a result: stalled (leading with
// the member that died when one did), idle, or inconclusive when the window
// holds only the job's start-up; nil when the job progressed.
func Verdict(r Result) *finding.Verdict {
	if r.Progress.Idle != nil && !r.Progress.Stalled() {
		return idleVerdict(r)
	}
	if r.Progress.Starting != nil {
		return startingVerdict(r)
	}
	if !r.Progress.Stalled() {
		return nil
	}
	if r.Unseen {
		v := &finding.Verdict{Class: finding.Inconclusive, Because: []string{},
			Basis: "nothing moved, but no thread's wait was seen: a stall and an idle job read the same"}
		for _, f := range r.Findings {
			if f.ID == "job-waits-unseen" {
				v.Summary = f.Claim
				v.Missing = "where the job's threads wait: " + r.UnseenHow
			}
		}
		return v
	}
	v := &finding.Verdict{Class: finding.Stalled, Confidence: confGPUIdle}
	if r.Progress.GPUSpinning() {
		v.Basis = "a stall seen with the GPU pinned busy completing nothing"
	} else {
		v.Basis = "a stall seen with the GPU idle"
	}
	if !r.Progress.GPUVisible {
		v.Confidence = confNoGPU
		v.Basis = "a stall seen without a GPU in view"
		v.Missing = "GPU utilisation was not visible: a GPU running very long kernels leaves the CPU idle too; run where NVML (or the simulated device) is visible to rule it out"
	}
	var lead *finding.Finding
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Supports != finding.Stalled {
			continue
		}
		switch f.ID {
		case "job-stalled":
			if lead == nil {
				lead = f
			}
			v.Because = append(v.Because, f.ID)
		case "member-died", "rank-missing", "gpu-fell-off-bus", "hung-task", "uninterruptible-sleep", "rank-positions":
			if lead == nil || lead.ID == "job-stalled" {
				lead = f
			}
			v.Confidence = max(v.Confidence, confExplained)
			v.Because = append(v.Because, f.ID)
		}
	}
	if v.Confidence == confExplained {
		v.Missing = "" // the dead member explains the stall whatever the GPU did
		v.Basis = "a stall explained by a dead or missing member, a lost GPU or a thread stuck in the kernel"
	}
	var others []string
	for _, o := range []struct {
		c    float64
		what string
	}{{confExplained, "when a dead member or a thread stuck in the kernel explains it"}, {confGPUIdle, "with the GPU seen idle"}, {confNoGPU, "without a GPU in view"}} {
		if o.c != v.Confidence {
			others = append(others, fmt.Sprintf("%.0f%% %s", o.c*100, o.what))
		}
	}
	v.Basis += " (" + strings.Join(others, ", ") + ")"
	if lead != nil {
		v.Summary = lead.Claim
		if lead.ID != "job-stalled" {
			v.Summary = "the job is stalled: " + lead.Claim
		}
		v.Decision = lead.Decision
	}
	return v
}

func idleVerdict(r Result) *finding.Verdict {
	v := &finding.Verdict{Class: finding.Idle, Confidence: confIdle, Because: []string{}}
	v.Basis = "every live thread's wait was read and each waits for requests or a timer, with the GPU seen idle"
	if !r.Progress.Idle.GPUVisible {
		v.Confidence = confIdleNoGPU
		v.Basis = "every live thread's wait was read and each waits for requests or a timer; no GPU was in view to confirm it idle"
	}
	if r.Progress.Idle.GPUVisible {
		v.Basis += fmt.Sprintf(" (%.0f%% without a GPU in view)", confIdleNoGPU*100)
	} else {
		v.Basis += fmt.Sprintf(" (%.0f%% with a GPU seen idle)", confIdle*100)
	}
	for _, f := range r.Findings {
		if f.ID == "job-idle" {
			v.Because = append(v.Because, f.ID)
			v.Summary, v.Decision = f.Claim, f.Decision
			break
		}
	}
	return v
}

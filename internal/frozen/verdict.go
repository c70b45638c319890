package frozen

import (
	"github.com/gpufeed/gpufeed/internal/finding"
)

// Stalled-verdict confidences: a stall explained by a dead or missing member
// is near certain; one seen with the GPUs idle is firm; without a GPU in
// view a device busy with long kernels would look the same from the CPU.
const (
	confExplained = 0.95
	confGPUIdle   = 0.85
	confNoGPU     = 0.6
)

// Verdict is the stalled verdict for a result, or nil when the job was not
// stalled. It leads with the member that died when one did.
func Verdict(r Result) *finding.Verdict {
	if !r.Progress.Stalled() {
		return nil
	}
	v := &finding.Verdict{Class: finding.Stalled, Confidence: confGPUIdle}
	if !r.Progress.GPUVisible {
		v.Confidence = confNoGPU
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
		case "member-died", "rank-missing", "gpu-fell-off-bus", "hung-task", "uninterruptible-sleep":
			if lead == nil || lead.ID == "job-stalled" {
				lead = f
			}
			v.Confidence = max(v.Confidence, confExplained)
			v.Because = append(v.Because, f.ID)
		}
	}
	if v.Confidence == confExplained {
		v.Missing = "" // the dead member explains the stall whatever the GPU did
	}
	if lead != nil {
		v.Summary = lead.Claim
		if lead.ID != "job-stalled" {
			v.Summary = "Stalled: " + lead.Claim
		}
		v.Decision = lead.Decision
	}
	return v
}

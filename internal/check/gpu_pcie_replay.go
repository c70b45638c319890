package check

import (
	"fmt"
	"math"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// pcieBitErrorRate is the bit error rate the PCIe specification allows
// (1e-12). DCGM's health watch turns it into an allowance of replays per
// minute: ceil(rate in Gb/s per lane x 1e9 x 1e-12 x 60 x lanes), written
// ceil(rate/1000 x 60 x lanes) (DcgmHealthWatch::GetExpectedPcieReplayRate).
const pcieBitErrorRate = 1e-12

// replayAllowancePerMinute is DCGM's allowance for a link.
func replayAllowancePerMinute(gen, lanes int) float64 {
	if gen > 6 {
		gen = 6 // DCGM caps the generation at the highest it knows
	}
	rate := procfs.PCIeRate(gen)
	return math.Ceil(rate * 1e9 * pcieBitErrorRate * 60 * float64(lanes))
}

var gpuPCIeReplayCheck = Check{
	ID:    "gpu-pcie-replay",
	Title: "PCIe replays per minute against DCGM's allowance for the link",
	// Sources: 002 Task 3
	run: runGPUPCIeReplay,
}

func runGPUPCIeReplay(e *env) []Outcome {
	if r, stop := noDriver(e); stop {
		return r
	}
	var out []Outcome
	window := e.gpuAt1.Sub(e.gpuAt0)
	for _, d := range e.gpuInfo {
		s0, _ := sampleFor(e.gpu0, d.Index)
		s1, _ := sampleFor(e.gpu1, d.Index)
		out = append(out, judgeReplays(d, s0, s1, window, e.uptime, e.uptimeErr))
	}
	return out
}

func judgeReplays(d gpu.DeviceInfo, s0, s1 gpu.Sample, window time.Duration, uptimeSec float64, uptimeErr error) Outcome {
	subj := gpuSubject(d)
	if s1.ReplayCounter == nil || s1.LinkGen == nil || s1.LinkWidth == nil {
		return Outcome{Status: Absent, Subject: subj, Claim: "driver does not report the PCIe replay counter or link",
			Need: "a driver that supports nvmlDeviceGetPcieReplayCounter"}
	}
	allow := replayAllowancePerMinute(*s1.LinkGen, *s1.LinkWidth)
	ev := []finding.Evidence{
		num("replay counter", float64(*s1.ReplayCounter), "replays", nvmlSource("nvmlDeviceGetPcieReplayCounter")),
		{What: "allowance", Value: allow, Unit: "replays/min", Window: fmt.Sprintf("Gen%d x%d at a 1e-12 bit error rate", *s1.LinkGen, *s1.LinkWidth),
			Source: "DCGM health watch: ceil(rate Gb/s / 1000 x 60 x lanes)"},
	}
	worst := 0.0
	if window > 0 && s0.ReplayCounter != nil && *s1.ReplayCounter >= *s0.ReplayCounter {
		perMin := float64(*s1.ReplayCounter-*s0.ReplayCounter) / window.Minutes()
		ev = append(ev, finding.Evidence{What: "replay rate", Value: perMin, Unit: "replays/min", Window: since(window), Source: nvmlSource("nvmlDeviceGetPcieReplayCounter")})
		worst = perMin
	}
	if uptimeErr == nil && uptimeSec > 60 {
		// The driver loaded after boot, so this average is a lower bound.
		perMin := float64(*s1.ReplayCounter) / (uptimeSec / 60)
		ev = append(ev, finding.Evidence{What: "replay rate, average", Value: perMin, Unit: "replays/min", Window: "since boot (a lower bound: the driver loaded later)", Source: procFile("uptime")})
		worst = math.Max(worst, perMin)
	}
	if worst > allow {
		return Outcome{Status: Warn, Subject: subj,
			Claim:    fmt.Sprintf("PCIe replays at %.1f/min exceed the %.0f/min a healthy Gen%d x%d link allows", worst, allow, *s1.LinkGen, *s1.LinkWidth),
			Evidence: ev, Supports: finding.TransferBound,
			Decision: "Replays retransmit corrupted packets and eat link bandwidth: check the riser, cable and slot, " +
				"look for AER errors in dmesg, and have the node serviced if the rate persists."}
	}
	return Outcome{Status: OK, Subject: subj, Claim: fmt.Sprintf("PCIe replays within the %.0f/min allowance", allow), Evidence: ev}
}

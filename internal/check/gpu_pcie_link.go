package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// busyUtilPercent is the utilisation above which a GPU counts as working:
// an idle GPU lowers its clocks and PCIe link speed on purpose (002 Task 1
// and Task 11), so those readings are judged only when it is busy.
const busyUtilPercent = 50

var gpuPCIeLinkCheck = Check{
	ID:    "gpu-pcie-link",
	Title: "PCIe link as the driver (NVML) sees it: current vs max generation and width",
	// Sources: 002 Task 3
	run: runGPUPCIeLink,
}

// noDriver is the one result a GPU check gives without a driver source.
func noDriver(e *env) ([]Outcome, bool) {
	if e.opts.GPU == nil {
		return []Outcome{{Status: Absent, Claim: "no GPU driver source",
			Need: "an NVIDIA driver and --device nvml (the sysfs checks above run without one)"}}, true
	}
	if e.gpuErr != nil {
		return []Outcome{{Status: Error, Claim: "GPU source " + e.opts.GPU.Name() + " failed to sample: " + e.gpuErr.Error(),
			Need: "a working driver (nvidia-smi must answer)"}}, true
	}
	return nil, false
}

func gpuSubject(d gpu.DeviceInfo) string {
	if d.BusID != "" {
		return fmt.Sprintf("GPU%d %s", d.Index, d.BusID)
	}
	return fmt.Sprintf("GPU%d", d.Index)
}

// sampleFor returns the device's last sample, if any.
func sampleFor(samples []gpu.Sample, index int) (gpu.Sample, bool) {
	for _, s := range samples {
		if s.Index == index {
			return s, true
		}
	}
	return gpu.Sample{}, false
}

func nvmlSource(call string) string { return "NVML " + call }

func runGPUPCIeLink(e *env) []Outcome {
	if r, stop := noDriver(e); stop {
		return r
	}
	var out []Outcome
	for _, d := range e.gpuInfo {
		s, _ := sampleFor(e.gpu1, d.Index)
		out = append(out, judgeGPUPCIeLink(d, s))
	}
	return out
}

func judgeGPUPCIeLink(d gpu.DeviceInfo, s gpu.Sample) Outcome {
	subj := gpuSubject(d)
	if s.Lost != "" {
		return Outcome{Status: Fail, Subject: subj, Claim: "GPU stopped answering: " + s.Lost,
			Decision: "Check dmesg for Xid 79 (fell off the bus) and AER errors; drain the node."}
	}
	if d.LinkGenMax == nil || d.LinkWidthMax == nil || s.LinkGen == nil || s.LinkWidth == nil {
		return Outcome{Status: Absent, Subject: subj, Claim: "driver does not report the PCIe link generation and width",
			Need: "a driver that supports nvmlDeviceGetCurrPcieLinkGeneration/Width"}
	}
	ev := []finding.Evidence{
		num("current link generation", float64(*s.LinkGen), "", nvmlSource("nvmlDeviceGetCurrPcieLinkGeneration")),
		num("max link generation", float64(*d.LinkGenMax), "", nvmlSource("nvmlDeviceGetMaxPcieLinkGeneration")),
		num("current link width", float64(*s.LinkWidth), "lanes", nvmlSource("nvmlDeviceGetCurrPcieLinkWidth")),
		num("max link width", float64(*d.LinkWidthMax), "lanes", nvmlSource("nvmlDeviceGetMaxPcieLinkWidth")),
	}
	busy := s.UtilPercent != nil && *s.UtilPercent >= busyUtilPercent
	if s.UtilPercent != nil {
		ev = append(ev, num("GPU utilisation", *s.UtilPercent, "%", nvmlSource("nvmlDeviceGetUtilizationRates")))
	}
	now := fmt.Sprintf("Gen%d x%d", *s.LinkGen, *s.LinkWidth)
	full := fmt.Sprintf("Gen%d x%d", *d.LinkGenMax, *d.LinkWidthMax)
	switch {
	case *s.LinkWidth < *d.LinkWidthMax:
		return Outcome{Status: Fail, Subject: subj, Claim: "driver reports a narrower PCIe link: " + now + ", capable of " + full,
			Evidence: ev, Decision: pcieLinkDecision, Supports: finding.TransferBound}
	case *s.LinkGen < *d.LinkGenMax && busy:
		return Outcome{Status: Fail, Subject: subj, Claim: "driver reports a slower PCIe link under load: " + now + ", capable of " + full,
			Evidence: ev, Decision: pcieLinkDecision, Supports: finding.TransferBound}
	case *s.LinkGen < *d.LinkGenMax:
		return Outcome{Status: OK, Subject: subj, Claim: "PCIe link " + now + " while idle (capable of " + full + "); an idle GPU lowers its link speed",
			Evidence: ev}
	}
	return Outcome{Status: OK, Subject: subj, Claim: "PCIe link " + now + ", as capable", Evidence: ev}
}

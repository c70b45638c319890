package check

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// A GPU node whose driver library is missing, or where NVML cannot start,
// runs jobs on the CPU or not at all, and every driver-based check below is
// blind: the node must not pass a gate that asked for a GPU (--require-gpu).
// The hardware is seen without the driver's library: the device nodes the
// kernel module creates (/dev/nvidiaN) and the PCI functions of vendor
// 0x10de, class 0x03 (display or 3D controller).
// A GPU passed through to virtual machines (bound to vfio-pci or
// pci-stub) is not this host's to use. Sources: NVML's nvmlInit return
// codes (NVML API reference: NVML_ERROR_LIBRARY_NOT_FOUND,
// NVML_ERROR_DRIVER_NOT_LOADED), the kernel's PCI class codes (0x03:
// display controller) and NVIDIA's device nodes (/dev/nvidiaN, one per GPU
// minor, created by the nvidia kernel module). It cites no seed, so it
// prints none.
var gpuDriverCheck = Check{
	ID:    "gpu-driver",
	Title: "A GPU driver source that answers (NVML), where the host has NVIDIA GPUs",
	run:   runGPUDriver,
}

// passthroughDrivers hold a PCI GPU for a virtual machine.
var passthroughDrivers = map[string]bool{"vfio-pci": true, "pci-stub": true}

func runGPUDriver(e *env) []Outcome {
	if e.opts.DriverSkipped {
		return []Outcome{{Status: Absent, Claim: "the GPU driver was not asked (--device none)",
			Need: "--device auto or nvml on a host with an NVIDIA driver"}}
	}
	if e.opts.GPU != nil {
		n := len(e.gpuInfo)
		ev := []finding.Evidence{num("GPUs the driver reports", float64(n), "", e.opts.GPU.Name())}
		if n == 0 {
			return []Outcome{e.noGPU(ev, e.opts.GPU.Name()+" answers, but reports no GPU")}
		}
		return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("%s answers: %d GPU%s", e.opts.GPU.Name(), n, plural(n))}}
	}
	why := e.opts.GPUNote
	if why == "" {
		why = "no GPU driver source"
	}
	nodes := e.nvidiaDeviceNodes()
	var pciGPUs []string
	if listing, err := e.pciDevices(); err == nil {
		for _, d := range listing.devs {
			if d.IsNVIDIAGPU() && !passthroughDrivers[d.Driver] {
				pciGPUs = append(pciGPUs, d.Address)
			}
		}
	}
	ev := []finding.Evidence{text("driver source", why, "gpufeed's GPU source")}
	if len(nodes) > 0 {
		ev = append(ev, text("NVIDIA GPU device nodes", strings.Join(nodes, ", "), "/dev"))
	}
	if len(pciGPUs) > 0 {
		ev = append(ev, text("NVIDIA GPUs on the PCI bus", strings.Join(pciGPUs, ", "), sysFile("bus/pci/devices")))
	}
	if len(nodes) == 0 && len(pciGPUs) == 0 {
		if e.opts.RequireGPU {
			return []Outcome{e.noGPU(ev, "no NVIDIA GPU on this host (no /dev/nvidiaN, no NVIDIA PCI device) and no driver source: "+why)}
		}
		return []Outcome{{Status: Absent, Evidence: ev, Claim: "no NVIDIA GPU on this host: " + why,
			Need: "a host with an NVIDIA GPU (--require-gpu makes its absence a failure)"}}
	}
	seen := "the host has NVIDIA GPUs"
	switch {
	case len(nodes) > 0:
		seen = fmt.Sprintf("%d GPU device node%s (%s)", len(nodes), plural(len(nodes)), nodes[0])
	case len(pciGPUs) > 0:
		seen = fmt.Sprintf("%d NVIDIA GPU%s on the PCI bus", len(pciGPUs), plural(len(pciGPUs)))
	}
	o := Outcome{Status: Warn, Evidence: ev,
		Claim: seen + ", but the driver cannot be used: " + why,
		Decision: "Install or repair the NVIDIA driver so that libnvidia-ml.so.1 loads and nvidia-smi answers " +
			"(a driver/library version mismatch after an upgrade needs the module reloaded or a reboot); " +
			"until then jobs cannot use the GPU and the driver checks below are blind."}
	if e.opts.RequireGPU {
		o.Status = Fail
	}
	return []Outcome{o}
}

// noGPU fails under --require-gpu; otherwise the driver's answer is absent.
func (e *env) noGPU(ev []finding.Evidence, claim string) Outcome {
	if e.opts.RequireGPU {
		return Outcome{Status: Fail, Evidence: ev, Claim: claim,
			Decision: "This node was required to have a usable GPU (--require-gpu): take it out of the GPU pool, or install the driver."}
	}
	return Outcome{Status: Absent, Evidence: ev, Claim: claim, Need: "a GPU the driver reports"}
}

// nvidiaDeviceNodes lists the GPU device nodes (/dev/nvidiaN, not the
// control nodes) under the device root, sorted by minor.
func (e *env) nvidiaDeviceNodes() []string {
	dir := e.opts.DevRoot
	if dir == "" {
		dir = "/dev"
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type node struct {
		name  string
		minor int
	}
	var nodes []node
	for _, en := range entries {
		p := "/dev/" + en.Name() // named as on the host, whatever the root
		if m, ok := gpu.NVIDIAMinor(p); ok {
			nodes = append(nodes, node{p, m})
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].minor < nodes[j].minor })
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.name
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

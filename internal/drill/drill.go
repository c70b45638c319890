// Package drill runs gpufeed's drills: small experiments that reproduce,
// on this machine, what the CPU side does to a GPU job (launch jitter and
// CUDA graphs, copy-on-write growth of DataLoader-style workers, pinned
// and pageable copies against the PCIe link), and report this machine's
// numbers beside published reference numbers. The GPU side goes through
// the CUDA driver API of the library loaded at run time (Backend):
// libcuda.so.1 on a GPU host, gpufeed's simulated driver elsewhere, by the
// same code.
package drill

// ReferenceFrom is where the reference numbers were measured.
const ReferenceFrom = "measured on an i9-13900K + RTX 4090, torch 2.8, Python 3.12"

// Info names and describes one drill.
type Info struct {
	Name, Title string
	// NeedsGPU says the drill drives the CUDA driver.
	NeedsGPU bool
	// Waiting says why the drill cannot run yet ("" when it can).
	Waiting string
}

// Drills lists the drills in the order they are listed.
var Drills = []Info{
	{Name: "jitter", NeedsGPU: true, Title: "2000 tiny kernels: quiet, busy CPUs, pinned (SMT sibling busy, core quiet), one CUDA graph replay"},
	{Name: "syscalls", Title: "the system calls of a small multi-worker PyTorch training loop, per call, counted in the kernel (eBPF)"},
	{Name: "cow", Title: "forked DataLoader-style workers over a list of Python objects versus flat numpy storage: USS per worker over time"},
	{Name: "copy", NeedsGPU: true, Title: "host-to-device and device-to-host bandwidth, pinned versus pageable, against the negotiated PCIe link"},
}

// Lookup finds a drill by name.
func Lookup(name string) (Info, bool) {
	for _, d := range Drills {
		if d.Name == name {
			return d, true
		}
	}
	return Info{}, false
}

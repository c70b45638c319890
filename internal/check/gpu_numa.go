package check

import (
	"fmt"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
)

var gpuNUMACheck = Check{
	ID:    "gpu-numa",
	Title: "Each GPU's NUMA node and local CPUs",
	// Sources: 002 Task 5
	run: runGPUNUMA,
}

func runGPUNUMA(e *env) []Outcome {
	listing, err := e.pciDevices()
	if err != nil {
		return []Outcome{readFailure("", "PCI devices", sysFile("bus/pci/devices"), err, "a sysfs with PCI devices", "read access to /sys")}
	}
	nodes, _ := e.nodeList()
	var ev []finding.Evidence
	byNode := map[int][]string{}
	unknown := []string{}
	gpus := 0
	for _, d := range listing.devs {
		if !d.IsNVIDIAGPU() {
			continue
		}
		gpus++
		src := sysFile("bus/pci/devices", d.Address, "numa_node")
		if d.NUMANode == nil || *d.NUMANode < 0 {
			unknown = append(unknown, d.Address)
			ev = append(ev, text("GPU "+d.Address+" NUMA node", "-1 (not reported)", src))
			continue
		}
		byNode[*d.NUMANode] = append(byNode[*d.NUMANode], d.Address)
		local := ""
		if d.LocalCPUList != nil {
			local = ", local CPUs " + d.LocalCPUList.String()
		}
		ev = append(ev, text("GPU "+d.Address+" NUMA node", fmt.Sprintf("%d%s", *d.NUMANode, local), src))
	}
	if gpus == 0 {
		return []Outcome{{Status: Absent, Claim: "no NVIDIA GPU under /sys/bus/pci/devices", Need: "a host with an NVIDIA GPU"}}
	}
	ev = append(ev, num("NUMA nodes", float64(len(nodes)), "", sysFile("devices/system/node")))
	if len(unknown) > 0 && len(nodes) > 1 {
		return []Outcome{{Status: Warn, Claim: fmt.Sprintf("firmware does not say which NUMA node %d of %d GPUs hang off (numa_node -1) on a %d-node machine",
			len(unknown), gpus, len(nodes)), Evidence: ev,
			Decision: "Placement cannot be checked or pinned by node: enable the BIOS's NUMA/SRAT reporting, " +
				"or take the affinity from nvidia-smi topo -m."}}
	}
	if len(nodes) <= 1 {
		return []Outcome{{Status: OK, Claim: fmt.Sprintf("%d GPU(s) on a single NUMA node: nothing to misplace", gpus), Evidence: ev}}
	}
	var parts []string
	for _, n := range nodes {
		if g := byNode[n.ID]; len(g) > 0 {
			parts = append(parts, fmt.Sprintf("node %d: %d GPU(s)", n.ID, len(g)))
		}
	}
	return []Outcome{{Status: OK, Claim: "GPUs by NUMA node: " + strings.Join(parts, ", "), Evidence: ev,
		Decision: "Run each rank on its GPU's node (numactl --cpunodebind=N --membind=N, Slurm --cpu-bind, torchrun with numactl)."}}
}

package tracestats

import "strings"

// KernelType is HTA's classification of a GPU operation by name, used by
// the temporal breakdown (compute versus non-compute time).
type KernelType uint8

const (
	Computation KernelType = iota
	Communication
	MemoryOp
	OtherKernel
)

func (k KernelType) String() string {
	switch k {
	case Communication:
		return "communication"
	case MemoryOp:
		return "memory"
	case OtherKernel:
		return "other"
	}
	return "computation"
}

// ClassifyKernel applies HTA's name rules (hta/common/types.py), in HTA's
// order: communication first ("nccl…", "hip…", "hccl…", or containing
// "ncclKernel"), then memory ("Memcpy…", "Memset…", "hipMemcpy…",
// "hipMemset…", "dma…"), then computation: every name that matches none of
// HTA's non-compute patterns (nccl, Memcpy, Memset, dma or Sync anywhere,
// "Stream Wait Event", cuda…LaunchKernel, runFunction, hip, job_exe, packet,
// pe_exe, cpum_exe_subgraph, hccl, collective_subgraph_execution); anything
// else is other. The rules are HTA's, including its quirks (a name that
// starts with "hip" counts as communication), so that the numbers agree.
func ClassifyKernel(name string) KernelType {
	switch {
	case strings.HasPrefix(name, "nccl"), strings.HasPrefix(name, "hip"), strings.HasPrefix(name, "hccl"),
		strings.Contains(name, "ncclKernel"):
		return Communication
	case strings.HasPrefix(name, "Memcpy"), strings.HasPrefix(name, "Memset"), strings.HasPrefix(name, "dma"):
		return MemoryOp
	}
	if isNonCompute(name) {
		return OtherKernel
	}
	return Computation
}

func isNonCompute(name string) bool {
	for _, p := range []string{"nccl", "Stream Wait Event", "runFunction", "hip", "job_exe", "packet", "pe_exe",
		"cpum_exe_subgraph", "hccl", "collective_subgraph_execution"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range []string{"Memcpy", "Memset", "dma", "Sync"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	if strings.HasPrefix(name, "cuda") && strings.Contains(name[4:], "LaunchKernel") {
		return true
	}
	return false
}

// IsCollective reports a communication kernel (NCCL/RCCL/HCCL collectives).
func IsCollective(name string) bool {
	return strings.HasPrefix(name, "nccl") || strings.HasPrefix(name, "hccl") || strings.Contains(name, "ncclKernel") ||
		strings.HasPrefix(name, "rccl")
}

package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// noTarget is the result of a per-process check run without --pid.
func noTarget() []Outcome {
	return []Outcome{{Status: Absent, Claim: "no target process", Need: "--pid PID of the training or inference process"}}
}

// targetGone turns a failed read of the target's status into a result.
func targetGone(e *env, err error) []Outcome {
	return []Outcome{readFailure(e.subjectPID(), "target process", procFile(strconv.Itoa(e.opts.PID), "status"), err,
		"a running process: check the PID", "read access to /proc/PID/status (hidepid= mount option hides other users' processes)")}
}

// gpuUse says which GPUs the target uses and how gpufeed knows.
type gpuUse struct {
	addrs  []string
	how    string
	source string
}

// targetGPUs finds the GPUs the target uses: from the driver's process list
// when a GPU source is open (the devices it holds a context on), else from
// the /dev/nvidiaN nodes it holds open (every device CUDA initialised: a
// superset when more than one is visible). The error says why neither told.
func (e *env) targetGPUs() (gpuUse, error) {
	if e.opts.GPU != nil && e.gpuErr == nil {
		var addrs []string
		for _, s := range e.gpu1 {
			for _, p := range s.Processes {
				if p.PID != e.opts.PID {
					continue
				}
				for _, d := range e.gpuInfo {
					if d.Index == s.Index && d.BusID != "" && !slices.Contains(addrs, d.BusID) {
						addrs = append(addrs, strings.ToLower(d.BusID))
					}
				}
			}
		}
		if len(addrs) > 0 {
			slices.Sort(addrs)
			return gpuUse{addrs, "a compute context on it (driver process list)", nvmlSource("nvmlDeviceGetComputeRunningProcesses")}, nil
		}
	}
	fds, err := e.targetFDs()
	if err != nil {
		return gpuUse{}, err
	}
	if len(fds.NVIDIAMinors()) == 0 {
		return gpuUse{}, fmt.Errorf("pid %d holds no /dev/nvidiaN open", e.opts.PID)
	}
	minors, err := e.nvidiaMinors()
	if err != nil {
		return gpuUse{}, fmt.Errorf("pid %d holds /dev/nvidia%v open, but %s is unreadable: %w", e.opts.PID, fds.NVIDIAMinors(), procFile("driver/nvidia/gpus"), err)
	}
	var addrs []string
	for _, m := range fds.NVIDIAMinors() {
		if a, ok := minors[m]; ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return gpuUse{}, fmt.Errorf("pid %d holds /dev/nvidia%v open, which the driver does not list", e.opts.PID, fds.NVIDIAMinors())
	}
	slices.Sort(addrs)
	return gpuUse{addrs, "its open /dev/nvidiaN device nodes", procFile(strconv.Itoa(e.opts.PID), "fd") + " + " + procFile("driver/nvidia/gpus/*/information")}, nil
}

// gpuNode returns a GPU's NUMA node from sysfs, -1 when unknown.
func (e *env) gpuNode(addr string) (int, *cpuset.Set) {
	listing, err := e.pciDevices()
	if err != nil {
		return -1, nil
	}
	for _, d := range listing.devs {
		if d.Address == addr && d.NUMANode != nil {
			return *d.NUMANode, d.LocalCPUList
		}
	}
	return -1, nil
}

func nodeCPUs(nodes []procfs.Node, id int) cpuset.Set {
	for _, n := range nodes {
		if n.ID == id {
			return n.CPUs
		}
	}
	return nil
}

// nodesOf lists the nodes whose CPUs meet set.
func nodesOf(nodes []procfs.Node, set cpuset.Set) cpuset.Set {
	out := cpuset.Set{}
	for _, n := range nodes {
		if len(n.CPUs.Intersect(set)) > 0 {
			out = append(out, n.ID)
		}
	}
	return out
}

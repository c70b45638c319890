package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

var numaAffinityCheck = Check{
	ID:    "numa-affinity",
	Title: "The target's allowed CPUs and memory nodes against its GPU's NUMA node",
	// Sources: 002 Task 10
	run: runNUMAAffinity,
}

const numaRebindDecision = "Re-pin to the GPU's node (numactl --cpunodebind=%d --membind=%d, or the matching Slurm --cpu-bind/" +
	"Kubernetes topology policy), or move the job to a GPU on the node it is bound to."

func runNUMAAffinity(e *env) []Outcome {
	if e.opts.PID <= 0 {
		return noTarget()
	}
	st, err := e.targetStatus()
	if err != nil {
		return targetGone(e, err)
	}
	subj := e.subjectPID()
	statusSrc := procFile(strconv.Itoa(e.opts.PID), "status")
	cpus, haveCPUs := st.CPUsAllowed()
	mems, haveMems := st.MemsAllowed()
	if !haveCPUs || !haveMems {
		return []Outcome{{Status: Absent, Subject: subj, Claim: "Cpus_allowed_list or Mems_allowed_list absent from " + statusSrc,
			Need: "a kernel that writes them (2.6.26+, CONFIG_CPUSETS)"}}
	}
	nodes, err := e.nodeList()
	if err != nil || len(nodes) == 0 {
		r := readFailure(subj, "NUMA nodes", sysFile("devices/system/node"), err, "a kernel with NUMA support", "read access to /sys")
		if err == nil {
			r = Outcome{Status: Absent, Subject: subj, Claim: "no NUMA nodes listed", Need: "a kernel with NUMA support"}
		}
		return []Outcome{r}
	}
	ev := []finding.Evidence{
		text("allowed CPUs", cpus.String(), statusSrc+" Cpus_allowed_list"),
		text("allowed memory nodes", mems.String(), statusSrc+" Mems_allowed_list"),
		text("nodes of the allowed CPUs", nodesOf(nodes, cpus).String(), sysFile("devices/system/node/node*/cpulist")),
	}
	if len(nodes) == 1 {
		return []Outcome{{Status: OK, Subject: subj, Claim: "single NUMA node: nothing to misplace", Evidence: ev}}
	}
	use, err := e.targetGPUs()
	if err != nil {
		return []Outcome{unknownGPU(subj, ev, err)}
	}
	ev = append(ev, text("GPUs used", strings.Join(use.addrs, ", "), use.source+" ("+use.how+")"))
	return []Outcome{judgeNUMAAffinity(e, subj, cpus, mems, nodes, use, ev)}
}

func judgeNUMAAffinity(e *env, subj string, cpus, mems cpuset.Set, nodes []procfs.Node, use gpuUse, ev []finding.Evidence) Outcome {
	gpuNodes := cpuset.Set{}
	for _, a := range use.addrs {
		n, local := e.gpuNode(a)
		src := sysFile("bus/pci/devices", a, "numa_node")
		if n < 0 {
			return Outcome{Status: Absent, Subject: subj, Evidence: ev, Claim: "firmware does not report GPU " + a + "'s NUMA node",
				Need: "BIOS NUMA/SRAT reporting (numa_node is -1)"}
		}
		localTxt := ""
		if local != nil {
			localTxt = ", local CPUs " + local.String()
		}
		ev = append(ev, text("GPU "+a+" NUMA node", fmt.Sprintf("%d%s", n, localTxt), src))
		if !gpuNodes.Contains(n) {
			gpuNodes = append(gpuNodes, n)
		}
	}
	if len(gpuNodes) > 1 {
		return Outcome{Status: OK, Subject: subj, Evidence: ev,
			Claim:    fmt.Sprintf("uses GPUs on nodes %s: no single placement is local to all", gpuNodes),
			Decision: "Run one process per GPU (torchrun) and bind each to its GPU's node."}
	}
	n := gpuNodes[0]
	local := nodeCPUs(nodes, n)
	onNode := cpus.Intersect(local)
	switch {
	case len(onNode) == 0:
		return Outcome{Status: Fail, Subject: subj, Evidence: ev, Supports: finding.TransferBound,
			Claim: fmt.Sprintf("bound to the far NUMA node: its CPUs %s are on node %s, its GPU on node %d",
				cpus, nodesOf(nodes, cpus), n),
			Decision: fmt.Sprintf(numaRebindDecision, n, n)}
	case !mems.Contains(n):
		return Outcome{Status: Fail, Subject: subj, Evidence: ev, Supports: finding.TransferBound,
			Claim:    fmt.Sprintf("memory bound to node %s, its GPU on node %d: every DMA buffer crosses the socket", mems, n),
			Decision: fmt.Sprintf(numaRebindDecision, n, n)}
	case cpus.SubsetOf(local):
		return Outcome{Status: OK, Subject: subj, Evidence: ev, Claim: fmt.Sprintf("pinned to node %d, its GPU's node", n)}
	}
	return Outcome{Status: OK, Subject: subj, Evidence: ev,
		Claim: fmt.Sprintf("not pinned: may run on nodes %s; its GPU is on node %d", nodesOf(nodes, cpus), n),
		Decision: fmt.Sprintf("If it preprocesses heavily or copies much host-to-device, pin it to node %d (CPUs %s).",
			n, local)}
}

// unknownGPU is the result when the target's GPU cannot be told: not
// visible when its descriptors were denied, absent otherwise.
func unknownGPU(subj string, ev []finding.Evidence, err error) Outcome {
	st := Absent
	if procfs.IsDenied(err) {
		st = NotVisible
	}
	return Outcome{Status: st, Subject: subj, Evidence: ev, Claim: "cannot tell which GPU the target uses: " + errnoText(err),
		Need: "the job's GPU open (CUDA initialised) and its descriptors readable (" + needPtrace + "), or a driver source (--device)"}
}

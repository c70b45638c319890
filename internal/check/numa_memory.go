package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// farMemoryWarnFraction: when more than half of the target's resident
// memory sits on nodes other than its GPU's, most staging buffers and
// preprocessing output cross the socket on their way to the GPU (002 Task 10).
const farMemoryWarnFraction = 0.5

var numaMemoryCheck = Check{
	ID:    "numa-memory",
	Title: "Where the target's memory actually lives (numa_maps) against its GPU's node",
	// Sources: 002 Task 10
	run: runNUMAMemory,
}

func runNUMAMemory(e *env) []Outcome {
	if e.opts.PID <= 0 {
		return noTarget()
	}
	subj := e.subjectPID()
	src := procFile(strconv.Itoa(e.opts.PID), "numa_maps")
	m, err := e.fs.NUMAMaps(e.opts.PID)
	if err != nil {
		return []Outcome{readFailure(subj, "memory placement", src, err, "a kernel with CONFIG_NUMA (numa_maps)", needPtrace)}
	}
	if m.Total() == 0 {
		return []Outcome{{Status: Absent, Subject: subj, Claim: "numa_maps lists no resident pages", Need: "a process with resident memory"}}
	}
	var ev []finding.Evidence
	nodes := m.Nodes()
	for _, n := range nodes {
		ev = append(ev, finding.Evidence{What: fmt.Sprintf("resident on node %d", n), Value: float64(m.BytesByNode[n]) / (1 << 20), Unit: "MiB", Source: src})
	}
	ev = append(ev, text("memory policies", policySummary(m.Policies), src))
	if m.Truncated {
		ev = append(ev, text("note", fmt.Sprintf("numa_maps larger than %d MiB; counted the first part only", procfs.DefaultMaxRead>>20), src))
	}
	sysNodes, _ := e.nodeList()
	if len(sysNodes) <= 1 {
		return []Outcome{{Status: OK, Subject: subj, Claim: "single NUMA node: all memory is local", Evidence: ev}}
	}
	use, err := e.targetGPUs()
	if err != nil {
		return []Outcome{unknownGPU(subj, ev, err)}
	}
	gpuNodes := map[int]bool{}
	for _, a := range use.addrs {
		if n, _ := e.gpuNode(a); n >= 0 {
			gpuNodes[n] = true
		}
	}
	if len(gpuNodes) != 1 {
		return []Outcome{{Status: OK, Subject: subj, Evidence: ev, Claim: "uses GPUs on several or unknown nodes: memory placement not judged"}}
	}
	var gn int
	for n := range gpuNodes {
		gn = n
	}
	local := m.BytesByNode[gn]
	far := m.Total() - local
	frac := float64(far) / float64(m.Total())
	ev = append(ev, finding.Evidence{What: "resident memory off the GPU's node", Value: frac * 100, Unit: "%", Source: src})
	if frac > farMemoryWarnFraction {
		return []Outcome{{Status: Warn, Subject: subj, Evidence: ev, Supports: finding.TransferBound,
			Claim: fmt.Sprintf("%.0f%% of its resident memory (%s) lives off node %d, where its GPU is", frac*100, human(far), gn),
			Decision: fmt.Sprintf("Bind memory to node %d (numactl --membind=%d or --preferred=%d) and start the job there; "+
				"pages already placed stay until migrated (migratepages).", gn, gn, gn)}}
	}
	return []Outcome{{Status: OK, Subject: subj, Evidence: ev,
		Claim: fmt.Sprintf("%.0f%% of its resident memory is on node %d, its GPU's node", (1-frac)*100, gn)}}
}

func policySummary(p map[string]int) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s x%d", k, p[k]))
	}
	return strings.Join(parts, ", ")
}

package check

import (
	"github.com/gpufeed/gpufeed/internal/finding"
)

var memoryTHPCheck = Check{
	ID:    "memory-thp",
	Title: "Transparent huge pages mode and defrag",
	// Sources: 002 Task 14
	run: runMemoryTHP,
}

// With defrag "always", a page fault that finds no free huge page compacts
// memory synchronously: the faulting thread (a DataLoader worker, the
// allocator behind pin_memory) stalls for milliseconds.
func runMemoryTHP(e *env) []Outcome {
	src := sysFile("kernel/mm/transparent_hugepage/enabled")
	t, err := e.fs.THP()
	if err != nil {
		return []Outcome{readFailure("", "transparent huge pages", src, err, "a kernel built with CONFIG_TRANSPARENT_HUGEPAGE", "read access to /sys")}
	}
	ev := []finding.Evidence{text("THP enabled", t.Enabled, src)}
	if t.Defrag != "" {
		ev = append(ev, text("THP defrag", t.Defrag, sysFile("kernel/mm/transparent_hugepage/defrag")))
	}
	if t.Enabled == "always" && t.Defrag == "always" {
		return []Outcome{{Status: Warn, Evidence: ev, Supports: finding.Preprocessing,
			Claim:    "THP always with synchronous defrag: page faults stall on memory compaction",
			Decision: "Set defrag to madvise or defer+madvise (echo madvise > /sys/kernel/mm/transparent_hugepage/defrag); keep enabled as it is."}}
	}
	return []Outcome{{Status: OK, Evidence: ev, Claim: "THP " + t.Enabled + ", defrag " + orNone(t.Defrag)}}
}

package judge

import (
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
)

func init() {
	register(Rule{ID: "frozen", Title: "Frozen-job triage and memory/limit findings (internal/judge/frozen)",
		// Sources: 004; 000 §5 (fork after CUDA init), §7 (COW)
		Run: runFrozen, Emits: frozen.IDs()})
}

// runFrozen returns frozen-job triage's findings: whether the job progresses
// (job-stalled decides the stalled class), who died and why, where threads
// wait, NCCL settings, worker start methods, copy-on-write growth, fds, GIL
// contention. They are computed once in NewInput, because the classifier
// reads the same result.
func runFrozen(in *Input) []finding.Finding {
	return append([]finding.Finding(nil), in.Frozen.Findings...)
}

package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// nprocWarnBelow: RLIMIT_NPROC counts every thread of the user. One
// PyTorch rank runs dozens of threads (intra-op pools, NCCL, CUDA driver,
// pin-memory) and each DataLoader worker its own pools (000 §3), so 8 ranks
// x 8 workers x ~30 threads crosses 2000; a limit under 4096 stops
// pthread_create mid-run.
const nprocWarnBelow = 4096

var limitNprocCheck = Check{
	ID:    "limit-nproc",
	Title: "Processes/threads limit",
	// Sources: 000 §3
	run: runLimitNproc,
}

func runLimitNproc(e *env) []Outcome {
	return limitResult(e, procfs.LimitProcesses, func(l procfs.Limit, ev []finding.Evidence) Outcome {
		if e.opts.PID > 0 {
			if st, err := e.targetStatus(); err == nil && st.HaveThreads {
				ev = append(ev, num("threads of the target", float64(st.Threads), "", procFile(pidDir(e.opts.PID), "status")))
			}
		}
		if l.Soft < nprocWarnBelow {
			return Outcome{Status: Warn, Evidence: ev, Supports: finding.Stalled,
				Claim: fmt.Sprintf("process/thread limit %d for the user: ranks, DataLoader workers and their thread pools can exhaust it", l.Soft),
				Decision: "Raise nproc (ulimit -u, LimitNPROC=, limits.conf) or cap thread pools (OMP_NUM_THREADS per rank, " +
					"fewer workers)."}
		}
		return Outcome{Status: OK, Evidence: ev, Claim: "process/thread limit " + limitString(l.Soft)}
	})
}

package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// Pressure thresholds on the share of the last minute in which some task
// waited for the resource (PSI "some avg60").
const (
	// A tenth of the minute waiting for memory: reclaim or swap-in is on
	// the critical path (002 Task 14).
	memoryPressureWarnPct = 10
	// A fifth of the minute waiting on I/O: 002 Task 7's 22.9% iowait was
	// the storage-bound signal.
	ioPressureWarnPct = 20
	// Half the minute with runnable tasks waiting for a CPU: the node is
	// oversubscribed (000 §6: 33 CPU-hungry tasks on 32 CPUs).
	cpuPressureWarnPct = 50
)

var pressureCheck = Check{
	ID:    "pressure",
	Title: "Pressure stall information for memory, I/O and CPU",
	// Sources: 002 Task 7, Task 14
	run: runPressure,
}

func runPressure(e *env) []Outcome {
	var out []Outcome
	for _, p := range []struct {
		res      string
		warn     float64
		class    finding.Class
		decision string
	}{
		{"memory", memoryPressureWarnPct, finding.Preprocessing, "Cut memory use (pinned buffers, caches, workers) or add RAM."},
		{"io", ioPressureWarnPct, finding.StorageBound, "Stage data locally, read bigger sequential chunks, prefetch."},
		{"cpu", cpuPressureWarnPct, finding.Preprocessing, "Fewer threads than CPUs: size OMP_NUM_THREADS and num_workers to the cores."},
	} {
		src := procFile("pressure", p.res)
		subj := p.res + " pressure"
		ps, err := e.fs.Pressure(p.res)
		if err != nil {
			out = append(out, readFailure(subj, "pressure stall information", src, err,
				"a kernel with CONFIG_PSI and psi enabled (boot with psi=1)", "read access to /proc/pressure"))
			continue
		}
		if ps.Some == nil {
			out = append(out, Outcome{Status: Absent, Subject: subj, Claim: "no \"some\" line in " + src, Need: "a kernel with CONFIG_PSI"})
			continue
		}
		ev := []finding.Evidence{
			{What: "some tasks stalled", Value: ps.Some.Avg10, Unit: "%", Window: "avg over 10 s", Source: src},
			{What: "some tasks stalled", Value: ps.Some.Avg60, Unit: "%", Window: "avg over 60 s", Source: src},
			{What: "some tasks stalled", Value: ps.Some.Avg300, Unit: "%", Window: "avg over 300 s", Source: src},
		}
		if ps.Full != nil {
			ev = append(ev, finding.Evidence{What: "all tasks stalled", Value: ps.Full.Avg60, Unit: "%", Window: "avg over 60 s", Source: src})
		}
		if ps.Some.Avg60 >= p.warn {
			out = append(out, Outcome{Status: Warn, Subject: subj, Evidence: ev, Supports: p.class, Decision: p.decision,
				Claim: fmt.Sprintf("tasks waited for %s %.0f%% of the last minute (warn at %.0f%%)", p.res, ps.Some.Avg60, p.warn)})
			continue
		}
		out = append(out, Outcome{Status: OK, Subject: subj, Evidence: ev,
			Claim: fmt.Sprintf("tasks waited for %s %.1f%% of the last minute", p.res, ps.Some.Avg60)})
	}
	return out
}

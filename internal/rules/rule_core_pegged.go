package rules

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/rules/thresholds"
)

func init() {
	register(Rule{ID: "one-core-pegged", Title: "One CPU saturated while the others idle",
		Seed: "002 Task 6, erreur courante 3", Run: runCorePegged})
}

// runCorePegged: the busiest CPU was at least PeggedCorePct busy on average
// while the others averaged under IdleCoresPct: a single-threaded pipeline
// (the launch thread, the GIL, workers=0).
func runCorePegged(in *Input) []finding.Finding {
	h := in.A.Host
	if h == nil || len(h.CPUs) < 2 || len(h.Busiest) == 0 {
		return nil
	}
	var top float64
	rest, k := 0.0, 0
	topCPU := h.Busiest[0]
	for _, c := range h.CPUs {
		if math.IsNaN(c.Busy.Mean) {
			continue
		}
		if c.CPU == topCPU {
			top = c.Busy.Mean
			continue
		}
		rest += c.Busy.Mean
		k++
	}
	if k == 0 || top < thresholds.PeggedCorePct || rest/float64(k) >= thresholds.IdleCoresPct {
		return nil
	}
	rest /= float64(k)
	var user float64
	for _, c := range h.CPUs {
		if c.CPU == topCPU {
			user = c.UserPct.Stats().Mean
		}
	}
	f := finding.Finding{
		ID: "one-core-pegged", Severity: in.impact(), Subject: fmt.Sprintf("cpu%d", topCPU),
		Seed:  "002 Task 6, erreur courante 3",
		Claim: fmt.Sprintf("one CPU (cpu%d) was %.0f%% busy while the other %d averaged %.0f%%: a single thread sets the pace", topCPU, top, k, rest),
		Evidence: []finding.Evidence{
			ev(fmt.Sprintf("cpu%d busy, mean", topCPU), top, "%", in.window(h.Busy.N), "/proc/stat"),
			ev(fmt.Sprintf("cpu%d in user space, mean", topCPU), user, "%", in.window(h.Busy.N), "/proc/stat"),
			ev("the other CPUs busy, mean", rest, "%", in.window(h.Busy.N), "/proc/stat"),
		},
		Decision: "Spread the single-threaded work: move preprocessing into DataLoader workers (num_workers > 0), cut Python overhead per step (CUDA graphs, " +
			"fused ops), look for GIL contention between the job's Python threads (002 Task 6, erreur courante 3).",
	}
	if L := in.Job.Launch; L != nil && !math.IsNaN(L.T.CPU.Mean) && L.T.CPU.Mean >= thresholds.LaunchSaturatedPct {
		f.Supports = finding.SubmissionBound
		f.Evidence = append(f.Evidence, ev("launch thread "+threadName(L.T)+" running", L.T.CPU.Mean, "% of wall time", in.window(L.T.CPU.N), schedstatSource(L.T)))
	}
	return []finding.Finding{f}
}

package frozen

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// gilFindings reports Python processes whose busy threads show the GIL's
// signature: together they run about one core and want little more, while
// threads free of the GIL would each want a whole CPU.
func gilFindings(v *view, cpus map[int]*threadCPU) []finding.Finding {
	byPID := map[int][]*threadCPU{}
	for _, c := range cpus {
		byPID[c.PID] = append(byPID[c.PID], c)
	}
	for _, cs := range byPID {
		sort.Slice(cs, func(i, j int) bool { return cs[i].TID < cs[j].TID })
	}
	var out []finding.Finding
	for _, pid := range v.sortedPIDs() {
		if !IsPython(v.procs[pid]) {
			continue
		}
		var busy []*threadCPU
		var run, demand float64
		for _, c := range byPID[pid] {
			if c.Span <= 0 || c.FromTicks {
				continue // the run-queue wait needs schedstat
			}
			secs := c.Span.Seconds()
			cores := float64(c.RunNS) / 1e9 / secs
			// Busy is wanting a CPU (run + run-queue wait), not getting
			// one: on a saturated host a spinning thread may run 3 % of
			// a core and wait for one the rest of its turns.
			want := float64(c.RunNS+c.WaitNS) / 1e9 / secs
			if want < thresholds.GILBusyCores {
				continue
			}
			busy = append(busy, c)
			run += cores
			demand += want
		}
		if len(busy) < 2 || run > thresholds.GILMaxRunCores || demand/float64(len(busy)) > thresholds.GILMaxDemandPerThread {
			continue
		}
		sort.SliceStable(busy, func(i, j int) bool { return busy[i].RunNS > busy[j].RunNS })
		// Names as the kernel gave them: the renderers escape them, as
		// they do the live rules' findings beside this one (text shows
		// ESC as ?, JSON keeps it as \u001b); escaped here they read
		// \x1b in every output, unlike the rest of the report.
		name := v.procNameRaw(pid)
		// Sources: 004 (The GIL); 000 §3
		f := finding.Finding{ID: "gil-contention", Severity: finding.Warning, Subject: name,
			Claim: fmt.Sprintf("%s shows GIL contention: %d busy Python threads ran %.2f cores together and wanted only %.2f CPUs (threads free of the GIL would want %d): one runs Python at a time",
				name, len(busy), run, demand, len(busy)),
			Decision: "Find the thread holding the GIL (`py-spy top --pid " + strconv.Itoa(pid) + " --gil`, or `gpufeed diagnose --py-stacks`), then move its CPU work out of Python threads: into DataLoader worker processes, or into calls that release the GIL (NumPy, torch operations on whole tensors)."}
		for _, c := range busy {
			secs := c.Span.Seconds()
			f.Evidence = append(f.Evidence, finding.Evidence{What: "CPU of " + v.threadNameRaw(c.TID), Value: round(float64(c.RunNS)/1e9/secs*100, 1), Unit: "% of one core",
				Window: "over " + fmtSeconds(c.Span), Source: fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, c.TID)})
		}
		f.Evidence = append(f.Evidence,
			finding.Evidence{What: "CPU of the busy threads together", Value: round(run, 2), Unit: "cores", Window: v.windowText(), Source: "schedstat run time"},
			finding.Evidence{What: "CPU the busy threads wanted (run + run-queue wait)", Value: round(demand, 2), Unit: "CPUs", Window: v.windowText(), Source: "schedstat run and wait time"})
		nameGILHolders(v, pid, &f)
		out = append(out, f)
	}
	return out
}

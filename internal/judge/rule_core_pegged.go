package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "one-core-pegged", Title: "One CPU saturated while the others idle, by the job's own threads (or by a neighbour)",
		// Sources: 002 Task 6, erreur courante 3
		Run: runCorePegged, Emits: []string{"one-core-pegged", "core-pegged-by-neighbour"}})
}

// runCorePegged: the busiest CPU was at least PeggedCorePct busy on average
// while the others averaged under IdleCoresPct. When the job's own threads
// ran most of that CPU's time (PeggedJobSharePct), a single-threaded stage
// of the job sets the pace (the launch thread, the GIL, workers=0):
// one-core-pegged. Otherwise the load is another process's, a neighbour's,
// and core-pegged-by-neighbour says so (information): /proc/stat counts
// every process on the host, the rule must not blame the job for them.
func runCorePegged(in *Input) []finding.Finding {
	h := in.View.Host
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
	var busySeries derive.Series
	for _, c := range h.CPUs {
		if c.CPU == topCPU {
			user = c.UserPct.Stats().Mean
			busySeries = c.BusyPct
		}
	}
	job, busiest, busiestPct := jobOnCPU(in, topCPU, busySeries)
	window := in.window(h.Busy.N)
	evs := []finding.Evidence{
		ev(fmt.Sprintf("cpu%d busy, mean", topCPU), top, "%", window, "/proc/stat"),
		ev(fmt.Sprintf("cpu%d in user space, mean", topCPU), user, "%", window, "/proc/stat"),
		ev("the other CPUs busy, mean", rest, "%", window, "/proc/stat"),
		ev(fmt.Sprintf("the job's own threads on cpu%d, mean", topCPU), job, "% of that CPU", window,
			"/proc/PID/task/TID/schedstat, by the CPU each thread last ran on (/proc/PID/task/TID/stat)"),
	}
	if job < thresholds.PeggedJobSharePct {
		f := finding.Finding{
			ID: "core-pegged-by-neighbour", Severity: finding.Info, Subject: fmt.Sprintf("cpu%d", topCPU),
			Claim: fmt.Sprintf("cpu%d was %.0f%% busy while %s averaged %.0f%%, but the job's own threads ran only %.0f%% of it: "+
				"the load is a neighbour's (processes outside the job), not the job's", topCPU, top, otherCPUs(k), rest, job),
			Evidence: evs,
			Decision: fmt.Sprintf("Nothing in the job sets this pace. If the job shares cpu%d (its allowed CPUs: %s) and its threads wait for a CPU "+
				"(launch-thread-descheduled), move the neighbour or pin the job to other CPUs (taskset, a cgroup cpuset).", topCPU, cpusAllowed(in)),
		}
		return []finding.Finding{f}
	}
	if busiest != nil {
		evs = append(evs, ev("the job's busiest thread there, "+threadName(busiest), busiestPct, "% of that CPU", window, in.schedSource(busiest)))
	}
	f := finding.Finding{
		ID: "one-core-pegged", Severity: in.impact(), Subject: fmt.Sprintf("cpu%d", topCPU),
		// Sources: 002 Task 6, erreur courante 3
		Claim:    fmt.Sprintf("one CPU (cpu%d) was %.0f%% busy while %s averaged %.0f%%, %.0f%% of it the job's own threads: a single thread sets the pace", topCPU, top, otherCPUs(k), rest, job),
		Evidence: evs,
		Decision: "Spread the single-threaded work: move preprocessing into DataLoader workers (num_workers > 0), cut Python overhead per step (CUDA graphs, " +
			"fused ops), look for GIL contention between the job's Python threads.",
	}
	if launchThread := in.Job.Launch; launchThread != nil && !math.IsNaN(launchThread.T.CPU.Mean) && launchThread.T.CPU.Mean >= thresholds.LaunchSaturatedPct {
		f.Supports = finding.SubmissionBound
		f.Evidence = append(f.Evidence, ev("launch thread "+threadName(launchThread.T)+" running", launchThread.T.CPU.Mean, "% of wall time", in.window(launchThread.T.CPU.N), in.schedSource(launchThread.T)))
	}
	return []finding.Finding{f}
}

// jobOnCPU is the mean share of cpu's time the job's threads ran on it
// (each interval's run time counted on the CPU the thread last ran on at
// the interval's end), over the intervals where the CPU was read; with the
// thread that ran most there.
func jobOnCPU(in *Input, cpu int, busy derive.Series) (pct float64, busiest *derive.Thread, busiestPct float64) {
	n := 0
	per := map[*derive.Thread]float64{}
	for i := range in.View.Intervals {
		if i >= len(busy) || math.IsNaN(busy[i]) {
			continue
		}
		n++
		for _, p := range in.Job.Procs {
			for _, th := range p.Threads {
				if i >= len(th.CPUPct) || math.IsNaN(th.CPUPct[i]) {
					continue
				}
				if s := th.Sample(i + 1); s != nil && s.CPU == cpu {
					pct += th.CPUPct[i]
					per[th] += th.CPUPct[i]
				}
			}
		}
	}
	if n == 0 {
		return 0, nil, 0
	}
	for th, v := range per {
		if busiest == nil || v > per[busiest] || (v == per[busiest] && th.Key.TID < busiest.Key.TID) {
			busiest = th
		}
	}
	if busiest != nil {
		busiestPct = per[busiest] / float64(n)
	}
	return pct / float64(n), busiest, busiestPct
}

// cpusAllowed names the CPUs the job may run on, as read.
func cpusAllowed(in *Input) string {
	for _, p := range in.Job.GPUProcs {
		if p.Info != nil && p.Info.CPUsAllowed != "" {
			return p.Info.CPUsAllowed
		}
	}
	for _, p := range in.Job.Procs {
		if p.Info != nil && p.Info.CPUsAllowed != "" {
			return p.Info.CPUsAllowed
		}
	}
	return "not read"
}

// otherCPUs names the k CPUs besides the pegged one: "the other CPU" on a
// 2-CPU host, not "the other 1".
func otherCPUs(k int) string {
	if k == 1 {
		return "the other CPU"
	}
	return fmt.Sprintf("the other %d", k)
}

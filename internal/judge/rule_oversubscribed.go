package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "cpu-oversubscribed", Title: "The job's runnable threads outnumber its CPUs",
		// Sources: 000 §3, §6
		Run: runOversubscribed})
}

// runOversubscribed: in more than OversubscribedTicksPct of the samples, the
// job had more runnable threads than CPUs it may use. It names the thread
// pool settings read from the environment (OMP_NUM_THREADS, MKL_NUM_THREADS).
func runOversubscribed(in *Input) []finding.Finding {
	cpus := in.Job.CPUs
	over, n, maxR, sumR := 0, 0, 0, 0
	for _, tk := range in.Timeline.Ticks {
		if len(tk.Threads) == 0 {
			continue
		}
		r := 0
		for _, ts := range tk.Threads {
			if ts.State == 'R' {
				r++
			}
		}
		n++
		sumR += r
		maxR = max(maxR, r)
		if r > cpus {
			over++
		}
	}
	if n == 0 || float64(over)/float64(n)*100 <= thresholds.OversubscribedTicksPct {
		return nil
	}
	sev := finding.Info
	if launchThread := in.Job.Launch; in.starved() && launchThread != nil && launchThread.T.Wait.Mean >= thresholds.LaunchWaitPct {
		sev = finding.Warning
	}
	f := finding.Finding{
		ID: "cpu-oversubscribed", Severity: sev, Supports: finding.SubmissionBound,
		// Sources: 000 §3 (torchrun sets OMP_NUM_THREADS=1 to avoid this), §6 (33 CPU-hungry tasks on 32 CPUs)
		Claim: fmt.Sprintf("the job had more runnable threads than its %d CPUs in %d of %d samples (%.1f on average, up to %d): they take turns, the launch thread among them",
			cpus, over, n, float64(sumR)/float64(n), maxR),
	}
	f.Evidence = append(f.Evidence,
		ev("runnable threads of the job, mean", float64(sumR)/float64(n), "threads", in.window(n), "/proc/PID/task/TID/stat state R"),
		ev("runnable threads of the job, max", float64(maxR), "threads", in.window(n), "/proc/PID/task/TID/stat state R"),
		ev("CPUs the job may use", float64(cpus), "CPUs", "", in.Job.CPUsFrom))
	pool := "unset"
	for _, p := range in.Job.Procs {
		for _, k := range []string{"OMP_NUM_THREADS", "MKL_NUM_THREADS"} {
			if v, ok := p.Info.Env[k]; ok {
				pool = k + "=" + v
			}
		}
	}
	src := "allowlisted /proc/PID/environ of the job's processes"
	f.Evidence = append(f.Evidence, evText("intra-op thread pool setting (OMP_NUM_THREADS, MKL_NUM_THREADS)", pool, "at first sight", src))
	if launchThread := in.Job.Launch; launchThread != nil {
		f.Subject = threadSubject(launchThread.T)
		f.Evidence = append(f.Evidence, ev("launch thread waiting for a CPU", launchThread.T.Wait.Mean, "% of wall time", in.window(launchThread.T.Wait.N), in.schedSource(launchThread.T)))
	}
	f.Decision = fmt.Sprintf("Size the thread pools to the cores: set OMP_NUM_THREADS (and MKL_NUM_THREADS, torch.set_num_threads) to about the cores per process "+
		"(%d here, fewer with several ranks or workers), use fewer DataLoader workers, and leave a core for the launch thread.", max(1, cpus-1))
	return []finding.Finding{f}
}

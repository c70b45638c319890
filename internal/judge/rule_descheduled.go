package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "launch-thread-descheduled", Title: "The launch thread waits on a run queue",
		// Sources: 000 §6-9
		Run: runDescheduled})
}

// runDescheduled: the launch thread was runnable but not running for at
// least LaunchWaitPct of the window. It says who it competed with: the
// job's own runnable threads, or other processes on its CPUs.
func runDescheduled(in *Input) []finding.Finding {
	launchThread := in.Job.Launch
	if launchThread == nil || launchThread.T.Wait.N == 0 || launchThread.T.Wait.Mean < thresholds.LaunchWaitPct {
		return nil
	}
	th := launchThread.T
	jobRunnable, hostRunnable, n := runnableCounts(in)
	outside := hostRunnable - jobRunnable
	f := finding.Finding{
		ID: "launch-thread-descheduled", Severity: finding.Info, Supports: finding.SubmissionBound, Subject: threadSubject(th),
		// Sources: 000 §2 (involuntary switches), §6 (EEVDF run queues), §7 (a descheduled launch thread starves the GPU), §9 (affinity)
	}
	who := "other runnable tasks on its CPUs"
	switch {
	case n > 0 && jobRunnable > float64(in.Job.CPUs):
		who = fmt.Sprintf("the job's own runnable threads (%.1f on average for %d CPUs)", jobRunnable, in.Job.CPUs)
	case n > 0 && outside >= 1:
		who = fmt.Sprintf("processes outside the job (%.1f runnable tasks on average that are not the job's)", outside)
	}
	if in.starved() && th.Wait.Mean >= thresholds.HighSharePct {
		f.Severity = finding.Warning
	}
	if q, ok := throttledLaunch(in); ok {
		// Its wait is its own cgroup's CPU limit (cpu-quota-throttled),
		// not a neighbour: a throttled thread is runnable, not running.
		who = fmt.Sprintf("its own cgroup's %s-CPU limit, which throttled it in %.0f%% of periods (cpu-quota-throttled), more than with other tasks", fmtCPUs(q.Limit), q.Pct())
		f.Severity = finding.Info
	}
	f.Claim = fmt.Sprintf("%s waited for a CPU %.0f%% of the time, competing with %s", in.launchRef(), th.Wait.Mean, who)
	f.Claim += waitOnTheGPU(in)
	f.Evidence = append(f.Evidence,
		ev("launch thread waiting for a CPU (run queue), mean", th.Wait.Mean, "% of wall time", in.window(th.Wait.N), in.schedSource(th)),
		ev("the same, p95", th.Wait.P95, "% of wall time", in.window(th.Wait.N), in.schedSource(th)),
		ev("launch thread running", nanZero(th.CPU.Mean), "% of wall time", in.window(th.CPU.N), in.schedSource(th)))
	if !math.IsNaN(th.Invol) {
		f.Evidence = append(f.Evidence, ev("launch thread involuntary context switches (preempted)", th.Invol, "/s", "first to last slow-tier reading",
			fmt.Sprintf("/proc/%d/task/%d/status nonvoluntary_ctxt_switches", th.PID, th.Key.TID)))
	}
	if n > 0 {
		f.Evidence = append(f.Evidence,
			ev("runnable tasks host-wide (procs_running, gpufeed included)", hostRunnable, "tasks, mean", in.window(n), "/proc/stat procs_running"),
			ev("runnable threads of the job", jobRunnable, "threads, mean", in.window(n), "/proc/PID/task/TID/stat state R"))
	}
	if allowed := launchThread.Proc.Info.CPUsAllowed; allowed != "" {
		f.Evidence = append(f.Evidence, evText("CPUs the launch thread's process may use", allowed, "at first sight", fmt.Sprintf("/proc/%d/status Cpus_allowed_list", th.PID)))
	}
	f.Decision = "Give the launch thread a core nobody else runs on: pin it (taskset, numactl, Slurm --cpu-bind, a Kubernetes static CPU policy) and keep " +
		"other busy threads off that core (size OMP_NUM_THREADS and DataLoader workers to the remaining cores, move noisy neighbours, isolcpus or a cpuset); " +
		"CUDA graphs make it need the CPU far less often."
	return []finding.Finding{f}
}

// runnableCounts are the mean number of the job's threads in state R and of
// runnable tasks host-wide (procs_running) over the ticks where both were read.
func runnableCounts(in *Input) (job, host float64, n int) {
	h := in.View.Host
	if h == nil {
		return 0, 0, 0
	}
	for i, tk := range in.Timeline.Ticks {
		if i >= len(h.ProcsRunning) || math.IsNaN(h.ProcsRunning[i]) || tk.Host == nil {
			continue
		}
		r := 0
		for _, ts := range tk.Threads {
			if ts.State == 'R' {
				r++
			}
		}
		job += float64(r)
		host += h.ProcsRunning[i]
		n++
	}
	if n > 0 {
		job /= float64(n)
		host /= float64(n)
	}
	return job, host, n
}

// waitOnTheGPU is what a claim about the launch thread's wait for a CPU
// says of the GPU: not known where no GPU utilisation was seen; absorbed by
// the launch queue where the GPU stayed busy; nothing where it was starved
// (the verdict says that). Both rules of such a wait (this one and
// cpu-quota-throttled) say it the same way: a throttled job without a GPU in
// view was once told its GPU "stayed busy" beside this rule's "not known".
func waitOnTheGPU(in *Input) string {
	switch {
	case in.Attribution.Measured == 0:
		return "; no GPU utilisation was seen, so whether the GPU waited for it is not known"
	case !in.starved():
		return "; the launch queue absorbed it (the GPU stayed busy)"
	}
	return ""
}

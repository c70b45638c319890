package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "launch-thread-saturated", Title: "GPU idle while the launch thread has no time left (submission-bound)",
		// Sources: 002 « Goulot de soumission CPU (launch-bound) », Task 6, Task 12; 000 §7
		Run: runSubmission})
}

// runSubmission: the GPU idles in intervals where the launch thread ran or
// waited to run at least LaunchSaturatedPct: it could not submit faster.
func runSubmission(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.SubmissionBound]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	th := launchThread.T
	cpu, wait := nanZero(th.CPU.Mean), nanZero(th.Wait.Mean)
	times := fmt.Sprintf("it ran %.0f%% of the time and waited for a CPU %.0f%%", cpu, wait)
	if cpu+wait < thresholds.LaunchSaturatedPct {
		// The share comes from the intervals in which the thread was
		// saturated, and the window's means are below that (a busy phase
		// in a quiet window): say what it did in those intervals, or the
		// claim reads "no time left (it ran 3% of the time)".
		if n, bc, bw := blamedLaunchTimes(in); n > 0 {
			times = fmt.Sprintf("in the %d of %d intervals where the GPU idled because of it, it ran %.0f%% of the time and waited for a CPU %.0f%%; %.0f%% and %.0f%% over the whole window",
				n, in.Attribution.Measured, bc, bw, cpu, wait)
			cpu, wait = bc, bw
		}
	}
	f := finding.Finding{
		ID: "launch-thread-saturated", Severity: in.causeSeverity(share), Supports: finding.SubmissionBound, Subject: threadSubject(th),
		// Sources: 002 « Goulot de soumission CPU (launch-bound) », Task 6, Task 12, Checklist B; 000 §7-8
		Claim: fmt.Sprintf("the launch thread %s has no time left to submit work (%s)%s", threadName(th), times, in.idleBecause(share)),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence())
	f.Evidence = append(f.Evidence, in.launchCPUEvidence()...)
	f.Evidence = append(f.Evidence, in.shareEvidence(finding.SubmissionBound,
		fmt.Sprintf("launch thread running or runnable ≥ %.0f%% of the interval", thresholds.LaunchSaturatedPct)))
	if us := th.UserShare; us == us {
		f.Evidence = append(f.Evidence, ev("launch thread time in the kernel (system share of its CPU)", 100-us, "%",
			fmt.Sprintf("%.1f s user, %.1f s system over the window", th.UserSec, th.SysSec), fmt.Sprintf("/proc/%d/task/%d/stat utime, stime", th.PID, th.Key.TID)))
	}
	f.Evidence = append(f.Evidence, in.launchWhoEvidence())
	if wait >= thresholds.LaunchWaitPct && wait >= cpu/2 {
		f.Decision = fmt.Sprintf("Give the launch thread a CPU of its own first: it waited for one %.0f%% of the time (see launch-thread-descheduled). "+
			"Pin it to a core no other busy thread uses (taskset, cgroup cpuset, Slurm --cpu-bind), size thread pools and workers to the cores, move neighbours away; "+
			"then cut its work per step with CUDA graphs or fused kernels.", wait)
	} else {
		f.Decision = "Cut the launch thread's work per unit of GPU work: fuse kernels (torch.compile), capture the step in a CUDA graph " +
			"(torch.compile mode=\"reduce-overhead\", torch.cuda.graph), raise the batch size so each launch carries more work, " +
			"and move per-sample Python and device calls out of the hot loop."
	}
	return []finding.Finding{f}
}

// blamedLaunchTimes is the launch thread's mean running and run-queue
// shares over the intervals whose idle time went mostly to submission.
func blamedLaunchTimes(in *Input) (n int, cpu, wait float64) {
	at, th := in.Attribution, in.Job.Launch.T
	for i, c := range at.Cause {
		if c != finding.SubmissionBound || i >= len(at.Attributed) || !at.Attributed[i] || i >= len(th.CPUPct) || math.IsNaN(th.CPUPct[i]) {
			continue
		}
		n++
		cpu += th.CPUPct[i]
		if i < len(th.WaitPct) {
			wait += nanZero(th.WaitPct[i])
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return n, cpu / float64(n), wait / float64(n)
}

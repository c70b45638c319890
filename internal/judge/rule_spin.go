package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "launch-thread-spins-or-submits", Title: "GPU idle while the launch thread is on a CPU that may be submitting or spinning in a synchronisation (submission-bound or sync-bound)",
		// Sources: CUDA Runtime API, cudaSetDeviceFlags (cudaDeviceScheduleAuto
		// spins while the process has fewer active contexts than the host has
		// CPUs); CUDA Driver API, CU_CTX_SCHED_SPIN.
		Run: runSpinOrSubmit})
}

// runSpinOrSubmit: part of the GPU's idle time passed while the launch
// thread was on a CPU, but its time on the CPU could be a synchronisation
// that spins as much as submission work (splitSaturated): /proc shows the
// same running, user-mode thread with no system call either way. The
// finding says so and what separates the two; it carries no class and is
// never critical, since neither cause is established.
func runSpinOrSubmit(in *Input) []finding.Finding {
	share := in.Attribution.Share[SpinOrSubmit]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	th := launchThread.T
	cpu, wait := nanZero(th.CPU.Mean), nanZero(th.Wait.Mean)
	f := finding.Finding{
		ID: "launch-thread-spins-or-submits", Severity: in.causeSeverity(share), Subject: threadSubject(th),
		Claim: fmt.Sprintf("the launch thread %s was on a CPU (it ran %.0f%% of the time and waited for a CPU %.0f%%) while the GPU was busy %.0f%% of the window: "+
			"it was either submitting work or spinning in a synchronisation, which looks the same from outside the thread (running, in user mode, no system call): "+
			"%.0f%% of the window's GPU idle time is one or the other",
			threadName(th), cpu, wait, 100-in.Attribution.IdlePct, share),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence())
	f.Evidence = append(f.Evidence, in.launchCPUEvidence()...)
	f.Evidence = append(f.Evidence, in.shareEvidence(SpinOrSubmit,
		"launch thread on a CPU, its spare time hidden: a spin can last as long as the device is busy, so only the work beyond the GPU's own is surely submission"))
	if us := th.UserShare; us == us {
		f.Evidence = append(f.Evidence, ev("launch thread time in user mode (a spinning wait and a launch are both user time)", us, "% of its CPU",
			fmt.Sprintf("%.1f s user, %.1f s system over the window", th.UserSec, th.SysSec), fmt.Sprintf("/proc/%d/task/%d/stat utime, stime", th.PID, th.Key.TID)))
	}
	if th.Vol == th.Vol {
		f.Evidence = append(f.Evidence, ev("launch thread voluntary context switches (a blocking wait makes one each; a spinning one none)", th.Vol, "/s",
			"first to last slow-tier reading", fmt.Sprintf("/proc/%d/task/%d/status", th.PID, th.Key.TID)))
	}
	f.Evidence = append(f.Evidence, in.launchWhoEvidence())
	f.Decision = fmt.Sprintf("Find out what the launch thread does while it runs: diagnose --pid %d --profile on (as root, or with CAP_PERFMON and CAP_BPF) "+
		"times the driver's synchronisations, --py-stacks shows the Python lines it runs, or profile a few steps (torch.profiler or Nsight Systems, read with gpufeed trace). Time in synchronisations (torch.cuda.synchronize, .item(), .cpu(), cudaStreamSynchronize, "+
		"cudaMemcpy) is sync-bound: stop synchronising every step. Time launching (the Python and framework code between kernels) is submission-bound: "+
		"fuse kernels or capture the step in a CUDA graph. A run with blocking synchronisation (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) "+
		"before the first CUDA call) makes each wait a sleep that gpufeed sees.", th.PID)
	return []finding.Finding{f}
}

package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "launch-thread-waits-on-gpu", Title: "GPU idle because the launch thread keeps waiting for it (sync-bound)",
		// Sources: 002 « Synchronisations excessives », Checklist B.3
		Run: runSync})
}

// runSync: the launch thread had spare time and spent it asleep on the
// device (a synchronisation, a blocking read of a result), so it never ran
// ahead of the GPU: each wait is followed by GPU idle while the CPU catches up.
func runSync(in *Input) []finding.Finding {
	share := in.Attribution.Share[finding.SyncBound]
	launchThread := in.Job.Launch
	if launchThread == nil || share < thresholds.ModerateSharePct {
		return nil
	}
	th := launchThread.T
	readings := launchThread.Waits.Readings()
	f := finding.Finding{
		ID: "launch-thread-waits-on-gpu", Severity: in.causeSeverity(share), Supports: finding.SyncBound, Subject: threadSubject(th),
		// Sources: 002 « Synchronisations excessives », Checklist B.3, erreur courante 1; 000 §2
		Claim: fmt.Sprintf("the launch thread %s keeps waiting for the GPU (asleep on the device in %d of %d readings), so it never queues work ahead%s",
			threadName(th), launchThread.Waits.Asleep[WaitDevice], readings, in.idleBecause(share)),
	}
	f.Evidence = append(f.Evidence, in.gpuUtilEvidence(), in.launchWaitsEvidence())
	f.Evidence = append(f.Evidence, in.launchWakersEvidence()...)
	if th.Vol == th.Vol {
		f.Evidence = append(f.Evidence, ev("launch thread voluntary context switches (each wait is one)", th.Vol, "/s",
			"first to last slow-tier reading", fmt.Sprintf("/proc/%d/task/%d/status", th.PID, th.Key.TID)))
	}
	f.Evidence = append(f.Evidence, in.launchCPUEvidence()[0], in.shareEvidence(finding.SyncBound, "launch thread not saturated, asleep on the device"))
	f.Evidence = append(f.Evidence, in.launchWhoEvidence())
	f.Decision = "Stop synchronising every few kernels: remove .item(), .cpu(), .numpy(), print() or Python if-tests on GPU tensors and explicit " +
		"torch.cuda.synchronize() from the step; read losses and metrics every N steps, or copy them with non_blocking=True into pinned buffers, " +
		"so the CPU queues work ahead of the GPU."
	if v := launchBlockingValue(in); v != "" {
		f.Decision = "Unset CUDA_LAUNCH_BLOCKING=" + v + " first (it makes every launch wait for its kernel). Then: " + f.Decision
	}
	return []finding.Finding{f}
}

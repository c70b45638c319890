package judge

import (
	"fmt"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
)

func init() {
	register(Rule{ID: "launch-thread-driver-calls", Title: "What the launch thread asked of the CUDA driver: launches per second, the time inside its synchronisations",
		// Sources: the CUDA driver API's launch and synchronisation calls
		// (cuLaunchKernel, cuStreamSynchronize, cuCtxSynchronize,
		// cuEventSynchronize) counted by uprobes as bpftrace and the eBPF GPU
		// tracers count them; perf top -p PID's manual reading of the same.
		Run: runDriverCalls})
}

// The shares of the window the launch thread spent inside the driver's
// syncs that name a class: half or more is sync-bound whether it spun or
// slept (a thread inside a sync half its time cannot be submitting then);
// under a tenth, with launches, rules the spin out, so a thread on a CPU
// through the GPU's idle time was submitting.
const (
	driverSyncDominant = 0.5
	driverSyncFew      = 0.10
)

// runDriverCalls: when the GPU idled for a cause on the launch thread's
// side, its driver calls say which: the time inside the driver's syncs
// (entry to return, spinning or blocked), the syncs per second and the
// launches between them; the launches per second of a thread that does not
// sync. It names sync-bound or submission-bound, and is evidence for the
// verdict otherwise.
func runDriverCalls(in *Input) []finding.Finding {
	launchThread := in.Job.Launch
	if launchThread == nil || in.Timeline == nil || !in.starved() {
		return nil
	}
	d := in.Timeline.Meta.DriverCalls
	if d == nil || d.State != profile.StateOn || d.WindowNS <= 0 {
		return nil
	}
	th := launchThread.T
	td, ok := d.Thread(th.Key.TID)
	if !ok || td.Total() == 0 {
		return nil
	}
	syncShare := float64(td.SyncNS) / float64(d.WindowNS)
	launchRate := d.LaunchesPerSecond(td)
	spinOrSubmit := in.Attribution.Share[finding.SubmissionBound] + in.Attribution.Share[SpinOrSubmit]
	syncShareIdle := in.Attribution.Share[finding.SyncBound]
	var class finding.Class
	var claim string
	sym := topSync(td)
	switch {
	case syncShare >= driverSyncDominant && in.Attribution.IdlePct < cpuSplitSyncMinIdlePct:
		// A GPU-bound job with a spinning sync looks like this too: the
		// spin is the bottleneck only where the GPU idles clearly (as the
		// CPU profile's split decides).
		return nil
	case syncShare >= driverSyncDominant && syncShareIdle < thresholds.ModerateSharePct && onlySpins(th, syncShare, spinOrSubmit):
		// As in the split: a thread that does next to nothing but sit in
		// its syncs left the GPU idle for another reason.
		return nil
	case syncShare >= driverSyncDominant && syncShareIdle+spinOrSubmit >= thresholds.ModerateSharePct:
		class = finding.SyncBound
		claim = fmt.Sprintf("the launch thread %s was inside the CUDA driver's synchronisations %.0f%% of the window (%s, %s)",
			threadName(th), 100*syncShare, sym, syncPace(d, td))
	case syncShare < driverSyncFew && td.Launches > 0 && spinOrSubmit >= thresholds.ModerateSharePct && !fewLaunchesProfiled(in, th.Key.TID) && !fewLaunchesForCPU(nanZero(th.CPU.Mean), launchRate):
		class = finding.SubmissionBound
		claim = fmt.Sprintf("the launch thread %s launched %s kernels a second and was inside the CUDA driver's synchronisations only %.0f%% of the window: its time on a CPU went to launching work and the code around it, not to a spinning wait",
			threadName(th), d.LaunchRate(td), 100*syncShare)
	default:
		return nil
	}
	share := syncShareIdle + spinOrSubmit
	f := finding.Finding{ID: "launch-thread-driver-calls", Severity: in.causeSeverity(share), Supports: class, Subject: threadSubject(th), Claim: claim}
	window := fmt.Sprintf("over %.1f s", float64(d.WindowNS)/1e9)
	src := "eBPF uprobes on the CUDA driver library's entry points"
	launchWindow := window
	if !d.LaunchContinuous {
		launchWindow = fmt.Sprintf("launch probes on in bursts, %.2f s of the %.1f s window; a floor, as each probe hit slows the launch", float64(d.LaunchProbedNS)/1e9, float64(d.WindowNS)/1e9)
	}
	if td.Launches > 0 {
		f.Evidence = append(f.Evidence, ev("launch thread kernel launches (cuLaunchKernel and its variants)", launchRate, "/s", launchWindow, src))
	}
	if td.GraphLaunches > 0 {
		f.Evidence = append(f.Evidence, ev("launch thread CUDA graph launches", d.PerSecond(td.GraphLaunches), "/s", window, src))
	}
	f.Evidence = append(f.Evidence,
		ev("launch thread time inside "+sym+" and the other driver synchronisations", 100*syncShare, "% of the window", window, src+" (entry and return)"),
		ev("launch thread driver synchronisations", d.PerSecond(td.Syncs), "/s", window, src))
	if td.Syncs > 0 && td.Launches > 0 && d.LaunchContinuous {
		f.Evidence = append(f.Evidence, ev("kernel launches per synchronisation", float64(td.Launches)/float64(td.Syncs), "launches", window, src))
	}
	if td.Allocs > 0 {
		f.Evidence = append(f.Evidence, ev("launch thread device and pinned allocations (cuMemAlloc and the like)", d.PerSecond(td.Allocs), "/s", window, src))
	}
	if td.Copies > 0 {
		f.Evidence = append(f.Evidence, ev("launch thread copies (cuMemcpy*)", d.PerSecond(td.Copies), "/s", window, src))
	}
	switch class {
	case finding.SyncBound:
		f.Decision = "Stop synchronising every step: drop .item(), .cpu(), torch.cuda.synchronize() and synchronous copies from the loop (log every N steps, copy with non_blocking=True from pinned memory); the GPU then runs ahead of the CPU."
	case finding.SubmissionBound:
		f.Decision = "Cut the launch thread's work per unit of GPU work: fuse kernels (torch.compile), capture the step in a CUDA graph (torch.cuda.graphs, torch.compile mode=\"reduce-overhead\"), raise the batch size."
	}
	return []finding.Finding{f}
}

// topSync names the sync entry point the thread spent longest in.
func topSync(td profile.ThreadDriver) string {
	best, name := int64(-1), "the driver's synchronisations"
	for _, c := range td.Calls {
		if c.Class == profile.CallSync && c.TimeNS > best {
			best, name = c.TimeNS, c.Symbol
		}
	}
	if td.InSync != nil && td.InSync.SinceNS > best {
		name = td.InSync.Symbol
	}
	return name
}

// syncPace says how often the thread synchronised: per second, and the
// launches between two syncs when every launch was counted.
func syncPace(d *profile.DriverCalls, td profile.ThreadDriver) string {
	s := fmt.Sprintf("%.0f syncs a second", d.PerSecond(td.Syncs))
	if td.Syncs > 0 {
		s += fmt.Sprintf(", %s each", (time.Duration(td.SyncNS) / time.Duration(td.Syncs)).Round(10*time.Microsecond))
	}
	if td.Syncs > 0 && td.Launches > 0 && d.LaunchContinuous {
		s += fmt.Sprintf(", one every %.0f launches", float64(td.Launches)/float64(td.Syncs))
	}
	return s
}

// fewLaunchesProfiled says whether the thread's CPU profile shows it
// launching under a tenth of its CPU: then its time on a CPU went to other
// work (launch-thread-cpu-split), and no spin is not enough to call it
// submission.
func fewLaunchesProfiled(in *Input, tid int) bool {
	tp, ok := in.Timeline.Meta.CPUProfile.Thread(tid)
	return ok && tp.Samples >= cpuSplitMinSamples && tp.Share(profile.DriverLaunch) < cpuSplitLaunchLoop
}

// driverMaxCPUPerLaunch: no kernel launch costs the launching thread a
// millisecond of CPU, framework and interpreter included (a PyTorch eager
// operator costs some tens of microseconds); a thread that ran more than
// that per launch it made spent its CPU on other work.
const driverMaxCPUPerLaunch = time.Millisecond

// fewLaunchesForCPU says whether a thread running cpuPct of the time made
// too few launches (per second) for launching to be what it ran for: 67
// launches a second from a thread running 90% of the time is 13 ms of CPU
// per launch, a thread decoding its batches, not a launch loop.
func fewLaunchesForCPU(cpuPct, launchesPerS float64) bool {
	if launchesPerS <= 0 {
		return true
	}
	return cpuPct/100/launchesPerS > driverMaxCPUPerLaunch.Seconds()
}

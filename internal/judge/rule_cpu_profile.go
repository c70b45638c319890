package judge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
)

func init() {
	register(Rule{ID: "launch-thread-cpu-split", Title: "Where a busy launch thread's CPU went, from its CPU profile (submission-bound, sync-bound or preprocessing-bound)",
		// Sources: perf top -p PID on the launch thread (cycles in
		// cuLaunchKernel, memcpy, pthread_mutex_lock or the eval loop), as
		// the PyTorch performance tuning guide and Nsight Systems' CPU
		// sampling read it.
		Run: runCPUSplit})
}

// The least the profile needs and the shares that name a class: half the
// thread's samples in one kind of work names it; a launch loop is one
// whose driver launch calls hold a tenth of its CPU at least, a thread
// launching under a twentieth of its CPU does its own preprocessing.
const (
	cpuSplitMinSamples  = 20
	cpuSplitDominant    = 0.5
	cpuSplitLaunchLoop  = 0.10
	cpuSplitFewLaunches = 0.05
	// cpuSplitSyncMinIdlePct: a thread spinning in its synchronisations is
	// what a GPU-bound job with CUDA's default (spinning) sync looks like;
	// the spin is the bottleneck only where the GPU idles clearly beyond
	// the GPU-bound bar (twice it), not where a crowded host delays the
	// relaunch after each sync by a few percent.
	cpuSplitSyncMinIdlePct = 2 * thresholds.GPUBoundIdleMaxPct
)

// runCPUSplit: when the launch thread was on a CPU through the GPU's idle
// time (saturated, or the share that may be a spin), its CPU profile says
// which: time inside the driver's syncs (spinning) is sync-bound; time in
// launch calls plus the framework and interpreter around them is
// submission-bound; time in decoding, CPU operators or the interpreter with
// few launches is its own preprocessing.
func runCPUSplit(in *Input) []finding.Finding {
	L := in.Job.Launch
	share := in.Attr.Share[finding.SubmissionBound] + in.Attr.Share[SpinOrSubmit]
	if L == nil || share < thresholds.ModerateSharePct || in.Timeline == nil {
		return nil
	}
	prof := in.Timeline.Meta.CPUProfile
	th := L.T
	tp, ok := prof.Thread(th.Key.TID)
	if !ok || tp.Samples < cpuSplitMinSamples {
		return nil
	}
	syncS, launchS := tp.Share(profile.DriverSync), tp.Share(profile.DriverLaunch)
	around := tp.Share(profile.Interpreter) + tp.Share(profile.Framework) + tp.Share(profile.DriverOther)
	prep := tp.Share(profile.Decode) + tp.Share(profile.Framework) + tp.Share(profile.Interpreter)
	var class finding.Class
	var what string
	switch {
	case syncS >= cpuSplitDominant && in.Attr.IdlePct < cpuSplitSyncMinIdlePct:
		return nil
	case syncS >= cpuSplitDominant && onlySpins(th, syncS, share):
		return nil
	case syncS >= cpuSplitDominant:
		class = finding.SyncBound
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU inside %s (spinning)", 100*syncS, topName(tp, profile.DriverSync, "the driver's synchronisations"))
	case launchS >= cpuSplitLaunchLoop && launchS+around >= cpuSplitDominant:
		class = finding.SubmissionBound
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU in %s and %.0f%% in the interpreter, framework and driver around it",
			100*launchS, topName(tp, profile.DriverLaunch, "the driver's launch calls"), 100*around)
	case launchS < cpuSplitFewLaunches && prep+tp.Share(profile.Memcpy) >= cpuSplitDominant:
		class = finding.Preprocessing
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU in decoding, %.0f%% in framework CPU operators, %.0f%% in the interpreter, and %.0f%% in launch calls",
			100*tp.Share(profile.Decode), 100*tp.Share(profile.Framework), 100*tp.Share(profile.Interpreter), 100*launchS)
	default:
		return nil
	}
	f := finding.Finding{ID: "launch-thread-cpu-split", Severity: in.causeSeverity(share), Supports: class, Subject: threadSubject(th),
		Claim: fmt.Sprintf("the launch thread %s was on a CPU while the GPU idled (%.0f%% of the window), and its CPU profile says what it did: %s", threadName(th), share, what)}
	window := fmt.Sprintf("%d samples at %d Hz over %.1f s", tp.Samples, prof.FrequencyHz, float64(prof.WindowNS)/1e9)
	src := "perf cpu-clock samples on every CPU, symbols from the ELF files in /proc/PID/maps"
	for _, c := range profile.Categories {
		if n := tp.Categories[c]; n > 0 {
			label := "launch thread CPU in " + string(c)
			if top, ok := tp.TopIn(c); ok && top.Symbol != "" && c != profile.Kernel {
				label += " (mostly " + top.Symbol + " in " + top.File + ")"
			}
			f.Evidence = append(f.Evidence, ev(label, 100*tp.Share(c), "% of its samples", window, src))
		}
	}
	switch class {
	case finding.SyncBound:
		f.Decision = "Stop synchronising every step: drop .item(), .cpu(), torch.cuda.synchronize() and synchronous copies from the loop (log every N steps, copy with non_blocking=True from pinned memory); the GPU then runs ahead of the CPU."
	case finding.SubmissionBound:
		f.Decision = "Cut the launch thread's work per unit of GPU work: fuse kernels (torch.compile), capture the step in a CUDA graph (torch.cuda.graphs, torch.compile mode=\"reduce-overhead\"), raise the batch size."
	case finding.Preprocessing:
		f.Decision = "Move the input work off the launch thread: a DataLoader with num_workers > 0 (persistent_workers, pin_memory), decoding on the GPU (DALI, torchvision.io.decode_jpeg on device), or data prepared ahead of time; CUDA graphs would not help."
	}
	return []finding.Finding{f}
}

// onlySpins says a thread whose syncs took syncShare of its time did next
// to nothing else: what a sync leaves the GPU idle for is the thread's work
// after it returns, and a thread whose CPU outside its syncs is under a
// quarter of the idle share it would be blamed for (blamed, percent) left
// the GPU idle for another reason (waiting for a CPU itself). A quarter, not
// all: the relaunch after each sync and the waits for a CPU add to that
// work's idle time on a loaded host.
func onlySpins(th *derive.Thread, syncShare, blamed float64) bool {
	return (1-syncShare)*nanZero(th.CPU.Mean) < blamed/4
}

func topName(tp profile.ThreadCPU, c profile.Category, fallback string) string {
	if top, ok := tp.TopIn(c); ok && top.Symbol != "" {
		return top.Symbol
	}
	return fallback
}

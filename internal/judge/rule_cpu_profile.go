package judge

import (
	"fmt"
	"sort"
	"strings"

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
// whose driver launch calls hold a tenth of its CPU at least: a thread
// launching under a tenth of its CPU is never called submission-bound
// (its CPU went elsewhere: the profile vetoes the class), and with its own
// work (decoding, copies, allocations and page faults in the kernel, CPU
// operators, the interpreter) at half or more it does its own
// preprocessing. Between a twentieth and a tenth of launch calls, the
// interpreter and framework operators alone do not name preprocessing (a
// Python model's own code is no input work): decoding, copies and the
// kernel must outweigh them and other libraries.
const (
	cpuSplitMinSamples  = 20
	cpuSplitDominant    = 0.5
	cpuSplitLaunchLoop  = 0.10
	cpuSplitFewLaunches = 0.05
	// cpuSplitDriverUnplaced: the driver's samples the profile could not
	// place as a launch or a sync (driver-other: the released libcuda
	// exports only its entry points, so a spin inside an internal function
	// has no name that says so, and a library whose symbols could not be
	// read has none at all). Above a fifth of the thread's samples, what
	// the thread did is not known well enough to call the rest its own
	// work: a spin read this way made a spinning sync loop
	// preprocessing-bound.
	cpuSplitDriverUnplaced = 0.2
	// cpuSplitSyncMinIdlePct: a thread spinning in its synchronisations is
	// what a GPU-bound job with CUDA's default (spinning) sync looks like;
	// the spin is the bottleneck only where the GPU idles clearly beyond
	// the GPU-bound bar (twice it), not where a crowded host delays the
	// relaunch after each sync by a few percent.
	cpuSplitSyncMinIdlePct = 2 * thresholds.GPUBoundIdleMaxPct
)

// ownWork is the share of a thread's samples in its own work, none of it
// the driver's nor a lock's: decoding, copies, the interpreter, framework
// CPU operators, other libraries, and the kernel. A kernel-mode sample is
// charged to the kernel only when the code that entered it was neither a
// driver call nor a lock (internal/cpusample): it is the thread's own
// allocations (brk, mmap), the page faults of writing into fresh buffers
// (zlib inflating a batch into new memory, PIL and numpy allocations), its
// reads: its own work, done in the kernel. input is the part that is
// input work for certain: decoding, copies and the kernel on its behalf.
func ownWork(tp profile.ThreadCPU) (own, input float64) {
	input = tp.Share(profile.Decode) + tp.Share(profile.Memcpy) + tp.Share(profile.Kernel)
	return input + tp.Share(profile.Interpreter) + tp.Share(profile.Framework) + tp.Share(profile.Other), input
}

// runCPUSplit: when the launch thread was on a CPU through the GPU's idle
// time (saturated, or the share that may be a spin), its CPU profile says
// which: time inside the driver's syncs (spinning) is sync-bound; time in
// launch calls plus the framework and interpreter around them is
// submission-bound; its own work (decoding, copies, the kernel on its
// behalf, CPU operators, the interpreter) with few launches is its own
// preprocessing. A profile with launch calls under a tenth of the thread's
// samples that names no class still vetoes submission-bound: the finding
// then supports no class, and the idle time /proc gave to submission goes
// unexplained (applyCPUSplit).
func runCPUSplit(in *Input) []finding.Finding {
	launchThread := in.Job.Launch
	share := in.Attribution.Share[finding.SubmissionBound] + in.Attribution.Share[SpinOrSubmit]
	if launchThread == nil || share < thresholds.ModerateSharePct || in.Timeline == nil {
		return nil
	}
	prof := in.Timeline.Meta.CPUProfile
	th := launchThread.T
	if _, throttled := throttledLaunch(in); throttled && nanZero(th.Wait.Mean) > nanZero(th.CPU.Mean) {
		// Its CPU limit held it off a CPU longer than it ran: the idle
		// time /proc gave to the CPU side passed mostly with the thread
		// throttled, which is the limit's (cpu-quota-throttled), whatever
		// it did in the little time it ran. Read as its own work, the
		// interpreter of a sync loop throttled in every period at 0.1 CPU
		// (running 10 % of the time, waiting 56 %) made it
		// preprocessing-bound.
		return nil
	}
	tp, ok := prof.Thread(th.Key.TID)
	if !ok || tp.Samples < cpuSplitMinSamples {
		return nil
	}
	syncS, launchS := tp.Share(profile.DriverSync), tp.Share(profile.DriverLaunch)
	around := tp.Share(profile.Interpreter) + tp.Share(profile.Framework) + tp.Share(profile.DriverOther)
	own, input := ownWork(tp)
	// The driver probes time the syncs from entry to return; the profile
	// samples. Where the timed syncs put more of the thread's CPU inside
	// them than the samples did, the timing wins, and the thread's own work
	// is at most what is left.
	sampledSync := syncS
	if floor := syncCPUFloor(in, th); floor > syncS {
		syncS = floor
		own, input = min(own, 1-floor), min(input, 1-floor)
	}
	var class finding.Class
	var what string
	switch {
	case syncS >= cpuSplitDominant && in.Attribution.IdlePct < cpuSplitSyncMinIdlePct:
		return nil
	case syncS >= cpuSplitDominant && onlySpins(th, syncS, share):
		// It spun whenever it ran and did too little else to leave the
		// GPU idle this long: it waited for a CPU. Not a launch loop
		// either, which the profile says.
		if launchS >= cpuSplitLaunchLoop {
			return nil
		}
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU inside %s (spinning) and only %.0f%% in launch calls, so it was not submitting work; "+
			"its CPU outside the synchronisations is too little to have left the GPU idle this long: it waited for a CPU %.0f%% of the time (see launch-thread-descheduled), and a CPU of its own comes first",
			100*syncS, topName(tp, profile.DriverSync, "the driver's synchronisations"), 100*launchS, nanZero(th.Wait.Mean))
	case syncS >= cpuSplitDominant:
		class = finding.SyncBound
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU inside %s (spinning)", 100*syncS, topName(tp, profile.DriverSync, "the driver's synchronisations"))
		if syncS > sampledSync {
			what += fmt.Sprintf(", as the driver probes timed them (its samples put %.0f%% there)", 100*sampledSync)
		}
	case launchS >= cpuSplitLaunchLoop && launchS+around >= cpuSplitDominant:
		class = finding.SubmissionBound
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU in %s and %.0f%% in the interpreter, framework and driver around it",
			100*launchS, topName(tp, profile.DriverLaunch, "the driver's launch calls"), 100*around)
	case launchS < cpuSplitLaunchLoop && own >= cpuSplitDominant && starved(th):
		// Its own work, but it waited for a CPU longer than it ran: the
		// idle time passed mostly with it waiting to run, which is no
		// input work of its own (the profile samples only its running).
		// On a crowded host a throttled sync loop that got less than its
		// limit (waiting about 80 %, 95 % of its CPU in the interpreter)
		// was called preprocessing-bound this way. It names no class and
		// says what comes first.
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU in its own work and only %.0f%% in launch calls (%s), but it waited for a CPU %.0f%% of the time and ran %.0f%%: "+
			"the GPU's idle time passed mostly with it waiting to run, so a CPU of its own comes first (see launch-thread-descheduled)",
			100*own, 100*launchS, largestShares(tp), nanZero(th.Wait.Mean), nanZero(th.CPU.Mean))
	case launchS < cpuSplitLaunchLoop && own >= cpuSplitDominant && (launchS < cpuSplitFewLaunches || input >= own-input) &&
		tp.Share(profile.DriverOther) < cpuSplitDriverUnplaced:
		class = finding.Preprocessing
		what = fmt.Sprintf("%.0f%% of the launch thread's CPU in decoding, %.0f%% in the kernel on its own behalf (allocations, page faults, reads), %.0f%% in copies, %.0f%% in framework CPU operators, %.0f%% in the interpreter, and %.0f%% in launch calls",
			100*tp.Share(profile.Decode), 100*tp.Share(profile.Kernel), 100*tp.Share(profile.Memcpy), 100*tp.Share(profile.Framework), 100*tp.Share(profile.Interpreter), 100*launchS)
		if o := tp.Share(profile.Other); o >= 0.05 {
			what += fmt.Sprintf(" (%.0f%% in other libraries, %s the most)", 100*o, topName(tp, profile.Other, "unnamed code"))
		}
	case launchS < cpuSplitLaunchLoop:
		what = fmt.Sprintf("only %.0f%% of the launch thread's CPU in launch calls (a launch loop spends a tenth or more there), so it was not submitting work; %s; its Python stacks (--py-stacks) or a profiler trace say what that work is",
			100*launchS, largestShares(tp))
	default:
		return nil
	}
	f := finding.Finding{ID: "launch-thread-cpu-split", Severity: in.causeSeverity(share), Supports: class, Subject: threadSubject(th),
		Claim: fmt.Sprintf("the launch thread %s was on a CPU while the GPU idled (%.0f%% of the window), and its CPU profile says what it did: %s", threadName(th), share, what)}
	if class == "" {
		f.Severity = finding.Info
	}
	window := fmt.Sprintf("%d samples at %d Hz over %.1f s", tp.Samples, prof.FrequencyHz, float64(prof.WindowNS)/1e9)
	src := "perf cpu-clock samples on every CPU, symbols from the ELF files in /proc/PID/maps"
	for _, c := range profile.Categories {
		if n := tp.Categories[c]; n > 0 {
			label := "launch thread CPU in " + string(c)
			if c == profile.Kernel {
				label = "launch thread CPU in the kernel on its own behalf (allocations, page faults, reads)"
			}
			if top, ok := tp.TopIn(c); ok && top.Symbol != "" && c != profile.Kernel {
				label += " (mostly " + top.Symbol + " in " + top.File + ")"
			}
			f.Evidence = append(f.Evidence, ev(label, 100*tp.Share(c), "% of its samples", window, src))
		}
	}
	if syncS > sampledSync {
		f.Evidence = append(f.Evidence, ev("launch thread CPU inside the driver's synchronisations, timed by the driver probes (time inside them less its time off a CPU)",
			100*syncS, "% of its CPU", fmt.Sprintf("%.1f s of probes", float64(in.Timeline.Meta.DriverCalls.WindowNS)/1e9),
			"eBPF uprobes on the driver's sync entry points and returns, and /proc's time on a CPU"))
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

// starved says the thread waited for a CPU at least LaunchWaitPct of the
// window and longer than it ran.
func starved(th *derive.Thread) bool {
	w := nanZero(th.Wait.Mean)
	return w >= thresholds.LaunchWaitPct && w > nanZero(th.CPU.Mean)
}

// syncCPUFloor is the least share of the thread's CPU its syncs held, by
// the driver probes' timing: inside syncs a share S of the window, on a
// CPU a share R of it, the thread spun inside them at least S - (1 - R) of
// the window (the time off a CPU is at most 1 - R), (S - (1 - R)) / R of
// its CPU. A thread that sleeps in its syncs (blocking) gets no floor: its
// time off a CPU covers them. 0 without the probes' timing.
//
// Why: sampling a thread on a loaded virtual machine is not always fair.
// Three observers of one 4 s window of a thread spinning in
// cuCtxSynchronize between bursts of clock_gettime system calls put 80 %,
// 77 % and 47 % of its samples in the spin (the last put 48 % in the
// kernel, inside those calls), while the probes timed it inside the syncs
// 78 % of the window: the samples alone made it preprocessing-bound.
func syncCPUFloor(in *Input, th *derive.Thread) float64 {
	d := in.Timeline.Meta.DriverCalls
	if d == nil || d.State != profile.StateOn || d.WindowNS <= 0 {
		return 0
	}
	td, ok := d.Thread(th.Key.TID)
	if !ok || td.SyncNS <= 0 {
		return 0
	}
	inSync := min(float64(td.SyncNS)/float64(d.WindowNS), 1)
	onCPU := min(nanZero(th.CPU.Mean)/100, 1)
	if onCPU <= 0 {
		return 0
	}
	return max(inSync-(1-onCPU), 0) / onCPU
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

// largestShares names the thread's two largest categories: "61% in the
// kernel, 30% in decode".
func largestShares(tp profile.ThreadCPU) string {
	type kv struct {
		c profile.Category
		n int
	}
	var all []kv
	for _, c := range profile.Categories {
		if n := tp.Categories[c]; n > 0 {
			all = append(all, kv{c, n})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].n > all[j].n })
	var parts []string
	for _, x := range all[:min(2, len(all))] {
		parts = append(parts, fmt.Sprintf("%.0f%% in %s", 100*tp.Share(x.c), x.c))
	}
	if len(parts) == 0 {
		return "no category held its samples"
	}
	return "its CPU went " + strings.Join(parts, ", ")
}

func topName(tp profile.ThreadCPU, c profile.Category, fallback string) string {
	if top, ok := tp.TopIn(c); ok && top.Symbol != "" {
		return top.Symbol
	}
	return fallback
}

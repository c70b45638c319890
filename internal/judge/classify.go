package judge

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// CauseID is, for each class, the ID of the finding that states it: the
// verdict's first finding.
var CauseID = map[finding.Class]string{
	finding.SubmissionBound: "launch-thread-saturated",
	finding.SyncBound:       "launch-thread-waits-on-gpu",
	finding.Preprocessing:   "input-pipeline-busy",
	finding.StorageBound:    "input-waits-on-storage",
	finding.TransferBound:   "copies-dominate",
	finding.TooLittleWork:   "gpu-underfed",
	finding.GPUBound:        "gpu-busy",
	finding.Stalled:         "job-stalled",
	finding.Idle:            "job-idle",
}

// Classify picks the one verdict from the attribution and the findings, in
// this order:
//
//  1. a window too short to tell a pattern from noise: inconclusive;
//  2. frozen-job triage's verdict (internal/judge/frozen): a job that does
//     not progress, stalled (led by the member that died when one did); one
//     that waits for requests or a timer, idle; a window that holds only
//     the job's start-up (no step on its GPU), inconclusive (job-starting);
//  3. no GPU utilisation read (no device visible, or lost early): inconclusive;
//  4. GPU idle under GPUBoundIdleMaxPct: GPU-bound;
//  5. no launch thread found: inconclusive;
//  6. the launch thread throttled by its CPU limit (cpu-quota-throttled)
//     while its CPU side leads the idle split: submission-bound, led by the
//     limit (quotaVerdict);
//  7. otherwise the class that took the largest share of the GPU's idle time,
//     if it took at least ModerateSharePct of the window and more than the
//     unexplained share; else inconclusive, saying what was missing.
//
// Confidence says how likely the verdict is right from the evidence, not
// from the window's length (confidence.go): for a cause, the share of the
// intervals with a GPU reading times how far it is ahead of the next cause
// (its margin in the GPU's idle time), times the least share of the
// intervals it carries at 95 % (a Wilson bound: a cause that carries every
// one of 30 intervals is right at least 92 % of the time; it weighs at
// most 30, so 100 of 100 give 92 % too); halved where an independent source (the CPU profile, the driver
// calls, the syscalls) names another class; capped where the launch
// thread's running time carries a submission-bound verdict and no probe
// told launching from its own input work or a spin. For GPU-bound, the
// intervals with the GPU busy; for stalled and idle, frozen-job triage's
// own, times the bound over the intervals it judged. Verdict.Basis says so
// in words.
func Classify(in *Input, fs []finding.Finding) finding.Verdict {
	a, at := in.View, in.Attribution
	window := time.Duration(a.WindowNS)
	if window+windowSlack(in) < thresholds.MinWindow || sampledIntervals(in) < thresholds.MinIntervals {
		return inconclusive(shortWindow(in), nil)
	}
	if v := frozen.Verdict(in.Frozen); v != nil {
		if v.Because == nil {
			v.Because = []string{}
		}
		if v.Class == finding.Inconclusive {
			return *v // nothing moved, but no wait was seen to say stalled or idle
		}
		judged := in.Frozen.Progress.Span
		if v.Class == finding.Idle && in.Frozen.Progress.Idle != nil {
			judged = in.Frozen.Progress.Idle.Span
		}
		n := intervalsIn(in, judged)
		withEvidence(v, float64(n), n, "intervals judged, all of them quiet")
		return *v
	}
	if at.Measured == 0 {
		return inconclusive(noDevice(in)+notStill(in), nil)
	}
	if at.Measured+sampledIntervals(in)-len(a.Intervals) < thresholds.MinIntervals { // slots lost to overruns were not the device's fault
		return inconclusive(fmt.Sprintf("the GPU was read in only %d of %d intervals (%s); observe a window in which the device answers throughout",
			at.Measured, at.Intervals, deviceState(in)), nil)
	}
	if at.IdlePct < thresholds.GPUBoundIdleMaxPct {
		busy := 0
		for _, g := range in.Job.GPUUtil {
			if !math.IsNaN(g) && 100-g < thresholds.GPUBoundIdleMaxPct {
				busy++
			}
		}
		v := verdictFor(finding.GPUBound, at.Coverage(), fs, "")
		v.Basis = fmt.Sprintf("the GPU read in %.0f%% of the intervals, idle %.0f%% of the window", at.Coverage()*100, at.IdlePct)
		withEvidence(&v, float64(busy), at.Measured, fmt.Sprintf("intervals had the GPU idle under %.0f%%", thresholds.GPUBoundIdleMaxPct))
		return v
	}
	if in.Job.Launch == nil {
		return inconclusive(fmt.Sprintf("the GPU was idle %.0f%% of the window, but no thread of the observed job was seen (did the job start, or is the work done by a process outside the tree?); point --pid at the process that uses the GPU", at.IdlePct), nil)
	}
	quotaV, quotaNote, throttled := quotaVerdict(in, fs)
	if throttled {
		withEvidence(&quotaV, at.Carry[finding.SubmissionBound]+at.Carry[SpinOrSubmit], at.CarryN, "intervals with explained idle time, each counted by the share of it the launch thread's time on or off a CPU took")
		return quotaV
	}
	top, share := at.Top()
	unexplained := at.Share[Unexplained]
	if spin := at.Share[SpinOrSubmit]; spin >= thresholds.ModerateSharePct && spin > share && spin >= unexplained {
		return spinOrSubmit(in)
	}
	if top == "" || share < thresholds.ModerateSharePct || unexplained > share {
		var v finding.Verdict
		if veto := profileVeto(fs); veto != nil {
			v = inconclusive(veto.Claim, idleSplit(at))
		} else {
			v = inconclusive(unexplainedIdle(in), idleSplit(at))
		}
		if quotaNote != "" {
			// No cause leads, but the limit is measured: the first
			// line says so, since a throttled thread is the likeliest
			// lead to what the window could not tie the idle time to.
			q, _ := throttledLaunch(in)
			v.Summary += fmt.Sprintf("; the launch thread's %s-CPU limit throttled it in %.0f%% of periods (cpu-quota-throttled)", fmtCPUs(q.Limit), q.Pct())
		}
		return v
	}
	next, nextShare := at.runnerUp(top)
	explained := math.Max(0, at.IdlePct-unexplained)
	margin, explainedFrac := 0.0, 0.0
	if explained > 0 {
		margin = math.Max(0, (share-nextShare)/explained)
		explainedFrac = explained / at.IdlePct
	}
	conf := at.Coverage() * (0.5 + 0.5*margin) * (0.5 + 0.5*explainedFrac)
	note := ""
	if share/at.IdlePct*100 < thresholds.DominantCausePct {
		note = fmt.Sprintf("; other causes of idle time: %s", strings.Join(idleSplitExcept(at, top), ", "))
	} else if spin := at.Share[SpinOrSubmit]; spin >= thresholds.ModerateSharePct {
		note = fmt.Sprintf("; another %.0f%% of the window's idle time is %s: the launch thread was on a CPU, submitting or spinning in a synchronisation", spin, SpinOrSubmit)
	}
	v := verdictFor(top, conf, fs, note+quotaNote)
	v.Basis = fmt.Sprintf("the GPU read in %.0f%% of the intervals × %.0f%% for this cause's lead over the next (%s): %.0f%% against %.0f%% of the idle time a cause explains × %.0f%% for the %.0f%% of the idle time some cause explains",
		at.Coverage()*100, (0.5+0.5*margin)*100, causeName(next), 100*share/math.Max(explained, 1e-9), 100*nextShare/math.Max(explained, 1e-9), (0.5+0.5*explainedFrac)*100, 100*explainedFrac)
	withEvidence(&v, at.Carry[top], at.CarryN, "intervals with explained idle time, each counted by the share of it this cause took")
	agreement(&v, fs)
	if top == finding.SubmissionBound && busyThreadUnseparated(in, fs, share) {
		indistinct(&v, in)
	}
	return v
}

// verdictFor states a class from its cause finding and the findings that
// support it.
func verdictFor(c finding.Class, conf float64, fs []finding.Finding, note string) finding.Verdict {
	v := finding.Verdict{Class: c, Confidence: round2(math.Max(0, math.Min(1, conf)))}
	var cause *finding.Finding
	var support []finding.Finding
	for i := range fs {
		f := &fs[i]
		switch {
		case f.ID == CauseID[c] && cause == nil:
			cause = f
		case f.Supports == c:
			support = append(support, *f)
		}
	}
	if cause == nil {
		if cause = splitCause(c, fs); cause != nil {
			support = slices.DeleteFunc(support, func(f finding.Finding) bool { return f.ID == cause.ID })
		}
	}
	sort.SliceStable(support, func(i, j int) bool { return support[i].Severity > support[j].Severity })
	if cause != nil {
		v.Because = append(v.Because, cause.ID)
		v.Summary = cause.Claim + note
		v.Decision = cause.Decision
	} else {
		v.Summary = string(c) + note
	}
	for _, f := range support {
		if !containsID(v.Because, f.ID) {
			v.Because = append(v.Because, f.ID)
		}
	}
	if v.Because == nil {
		v.Because = []string{}
	}
	return v
}

// inconclusive names no class: no finding carries it (none is marked as the
// verdict's), and its confidence is 0.
func inconclusive(missing string, split []string) finding.Verdict {
	v := finding.Verdict{Class: finding.Inconclusive, Because: []string{}, Missing: missing,
		Summary: "no bottleneck can be named from this window",
		Basis:   "0%: no class is named, so nothing points to one"}
	if len(split) > 0 {
		v.Summary += " (GPU idle time: " + strings.Join(split, ", ") + ")"
	}
	return v
}

// windowSlack is how far short of its planned length a complete window can
// be: its ends are ticks, the first lands a little after the start and the
// sampler takes the last within a quarter interval of the end (see
// internal/sample). A requested 2 s window is judged, whether its ticks span
// 1.998 s or 2.0008 s.
func windowSlack(in *Input) time.Duration { return time.Duration(in.Timeline.Meta.Interval) / 4 }

// sampledIntervals is how many intervals of its grid the window was
// sampled at: the intervals it holds, plus the slots late ticks skipped (the
// sampler skips a slot only when a tick overran), as many as the window's
// span holds, provided at least MinIntervalsSampled were sampled. Under load
// a requested 2 s window at 100 ms holds 17 intervals and a few overruns; it
// was still sampled at 20.
func sampledIntervals(in *Input) int {
	n := len(in.View.Intervals)
	iv := time.Duration(in.Timeline.Meta.Interval)
	if iv <= 0 || in.Timeline.Counts.Overruns == 0 || n < thresholds.MinIntervalsSampled {
		return n
	}
	slots := int(math.Round(float64(in.View.WindowNS) / float64(iv)))
	return max(n, slots)
}

func shortWindow(in *Input) string {
	sec := floorSeconds(in.View.WindowNS)
	tg := in.Timeline.Meta.Target
	if in.Timeline.Meta.Ended == "target exited" && !tg.Launched && tg.ExitCode != nil && len(in.View.Intervals) == 0 {
		// Attached to a zombie: it ended before the first sample.
		return fmt.Sprintf("pid %d had already exited when gpufeed attached (exit status %d) and nothing of it runs: "+
			"what is left is how it ended and the kernel log (below); diagnose a running process of the job instead (its parent, or its other ranks)",
			tg.PID, *tg.ExitCode)
	}
	if in.Timeline.Meta.Ended == "target exited" {
		return fmt.Sprintf("the target exited after %s s (%d intervals): gpufeed needs at least %v of a running job; attach to a long-running job with --pid, or run the command for longer",
			sec, len(in.View.Intervals), thresholds.MinWindow)
	}
	if time.Duration(in.View.WindowNS)+windowSlack(in) >= thresholds.MinWindow {
		late := ""
		if o := in.Timeline.Counts.Overruns; o > 0 {
			late = fmt.Sprintf(", %d late (a loaded host delays the sampler, and a late tick skips its slot)", o)
			if o == 1 {
				late = ", a tick late (a loaded host delays the sampler, and a late tick skips its slot)"
			}
		}
		return fmt.Sprintf("the window held %s s but only %d intervals were sampled%s; observe at least %d intervals (a longer --duration, or a shorter --interval)",
			sec, len(in.View.Intervals), late, thresholds.MinIntervals)
	}
	return fmt.Sprintf("the window held %s s (%d intervals); observe at least %v and %d intervals (--duration, --interval)",
		sec, len(in.View.Intervals), thresholds.MinWindow, thresholds.MinIntervals)
}

// floorSeconds writes a window rounded down to hundredths of a second, so a
// window short of the minimum never reads as the minimum ("1.99", not "2.0").
func floorSeconds(ns int64) string {
	return strconv.FormatFloat(math.Floor(float64(ns)/1e7)/100, 'f', -1, 64)
}

func noDevice(in *Input) string {
	src := in.Timeline.Meta.GPUSource
	if src == "" {
		src = "no GPU source"
	}
	if len(in.View.GPUs) > 0 {
		return fmt.Sprintf("no GPU utilisation was read (%s: %s); gpufeed must see whether the GPU waits or works", src, deviceState(in))
	}
	return fmt.Sprintf("no GPU was visible (%s): gpufeed must see whether the GPU waits or works; run on the GPU host with the NVIDIA driver loaded (NVML), or point --device at a simulated device (--device sim:PATH)", src)
}

// notStill says, for a window with no GPU reading, what showed the job
// moving, so that the report says why it is neither stalled nor idle: a
// hung job in which one thread kept being woken reads as inconclusive, and
// the wake-ups are where to look. Empty when nothing moved or the window
// was not judged.
func notStill(in *Input) string {
	p := in.Frozen.Progress
	if !p.Judged || p.LiveProcs == 0 {
		return ""
	}
	moved := p.HostProgress()
	if len(moved) == 0 {
		return ""
	}
	if p.WakeupsUnseen() {
		// Counted as progress, the safe side against a false stall, but
		// not claimed as such: a watchdog's timer reads the same.
		return "; a thread kept being woken (" + moved[0] + "), so gpufeed does not call the job stalled or idle; to tell work arriving from a timer, run gpufeed with the privilege that shows where each thread waits"
	}
	return "; the job moved over the window (" + strings.Join(moved, "; ") + "), so it is neither stalled nor idle"
}

func deviceState(in *Input) string {
	for _, g := range in.View.GPUs {
		if g.Lost != "" {
			return fmt.Sprintf("GPU %d stopped answering: %s", g.Index, g.Lost)
		}
		if len(g.Unsupported) > 0 {
			return fmt.Sprintf("GPU %d does not support: %s", g.Index, strings.Join(g.Unsupported, ", "))
		}
	}
	return "the device gave no utilisation"
}

// unexplainedIdle says why the idle time could not be attributed.
func unexplainedIdle(in *Input) string {
	at := in.Attribution
	launchThread := in.Job.Launch
	msg := fmt.Sprintf("the GPU was idle %.0f%% of the window, and %.0f%% of it could not be tied to what the launch thread %s did",
		at.IdlePct, at.Share[Unexplained], threadName(launchThread.T))
	var reasons []string
	seen := map[string]bool{}
	for _, w := range launchThread.Waits.Top {
		if strings.HasPrefix(w.What, "not visible") && !seen[w.What] {
			seen[w.What] = true
			reasons = append(reasons, w.What)
		}
	}
	if dc := launchThread.Proc.Info.DeviceChannels; dc == nil {
		reasons = append(reasons, "its process's device channels were not read (a recording made without them)")
	} else if dc.NotVisible != "" {
		reasons = append(reasons, "device channels: "+dc.NotVisible)
	}
	if len(reasons) > 0 {
		msg += " (" + strings.Join(reasons, "; ") + ")"
	}
	return msg + "; run gpufeed as the job's user or as root so where it sleeps is visible, observe a longer window, or profile it (gpufeed trace on a PyTorch profiler or Nsight Systems trace shows what the launching thread did in each gap)"
}

// spinOrSubmit is the verdict when most of the GPU's idle time passed while
// the launch thread was on a CPU doing what /proc cannot tell apart:
// submitting work or spinning in a synchronisation (splitSaturated). It
// names no class, as any inconclusive verdict, rather than a wrong one:
// the summary names both candidates and Missing what separates them.
func spinOrSubmit(in *Input) finding.Verdict {
	at := in.Attribution
	v := inconclusive(fmt.Sprintf("what the launch thread %s does while it runs: a synchronisation that spins (CUDA's default wait while a process has fewer active contexts than the host has CPUs) "+
		"and a thread submitting work both read as a running thread in user mode with no system call; gpufeed's own probes tell them apart: "+
		"diagnose --pid %d --profile on (as root, or with CAP_PERFMON and CAP_BPF) times the driver's synchronisations, and --py-stacks shows the Python line it runs "+
		"(a .item(), .cpu() or synchronize() call is a wait); or profile a few steps (torch.profiler or Nsight Systems, read with gpufeed trace), or run with blocking "+
		"synchronisation (cudaDeviceScheduleBlockingSync), in which each wait sleeps and gpufeed sees it", threadName(in.Job.Launch.T), in.Job.Launch.T.PID), nil)
	v.Summary = fmt.Sprintf("submission-bound or sync-bound, which cannot be told apart from outside the launch thread: it was on a CPU while the GPU idled %.0f%% of the window, "+
		"either submitting work or spinning in a synchronisation (GPU idle time: %s)", at.IdlePct, strings.Join(idleSplit(at), ", "))
	return v
}

// idleSplit lists the idle shares by class, largest first: "submission-bound 31%".
func idleSplit(at Attribution) []string { return idleSplitExcept(at) }

// idleSplitExcept is idleSplit without the shares of the classes in skip.
func idleSplitExcept(at Attribution, skip ...finding.Class) []string {
	type kv struct {
		c finding.Class
		v float64
	}
	var all []kv
	for c, v := range at.Share {
		if v >= 0.5 && !slices.Contains(skip, c) {
			all = append(all, kv{c, v})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].c < all[j].c
	})
	var out []string
	for _, x := range all {
		name := string(x.c)
		if x.c == Unexplained {
			name = "unexplained"
		}
		out = append(out, fmt.Sprintf("%s %.0f%%", name, x.v))
	}
	return out
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

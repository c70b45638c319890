package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Evidence helpers shared by the rules. Every number carries its unit, the
// window it covers and where it was read.

func ev(what string, v float64, unit, window, source string) finding.Evidence {
	return finding.Evidence{What: what, Value: round1(v), Unit: unit, Window: window, Source: source}
}

func evText(what, text, window, source string) finding.Evidence {
	return finding.Evidence{What: what, Text: text, Window: window, Source: source}
}

func round1(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	if math.Abs(x) >= 100 {
		return math.Round(x)
	}
	return math.Round(x*10) / 10
}

// starved reports whether the GPU waited enough for CPU-side findings to
// cost throughput: measured, and idle at least GPUBoundIdleMaxPct.
func (in *Input) starved() bool {
	return in.Attribution.Measured > 0 && in.Attribution.IdlePct >= thresholds.GPUBoundIdleMaxPct
}

// impact is the severity of a CPU-side finding: a warning when the GPU
// waits, information when it is busy anyway (the launch queue absorbs it:
// 000 §7).
func (in *Input) impact() finding.Severity {
	if in.starved() {
		return finding.Warning
	}
	return finding.Info
}

// gpuUtilEvidence is the GPU's mean utilisation over the measured intervals.
func (in *Input) gpuUtilEvidence() finding.Evidence {
	s := in.Job.GPUUtil.Stats()
	return ev("GPU utilisation (time a kernel ran), mean", s.Mean, "%", in.window(s.N), in.utilSource())
}

// shareEvidence is the share of the window whose GPU idle time went to c.
func (in *Input) shareEvidence(c finding.Class, because string) finding.Evidence {
	at := in.Attribution
	return ev(fmt.Sprintf("GPU idle time attributed to %s (%s)", c, because), at.Share[c], "% of the window",
		fmt.Sprintf("mostly so in %d of %d measured intervals; all causes: %s", at.Mostly[c], at.Measured, strings.Join(idleSplit(at), ", ")),
		"interval by interval attribution of the GPU idle time")
}

// launchCPUEvidence is the launch thread's time on a CPU and waiting for one.
func (in *Input) launchCPUEvidence() []finding.Evidence {
	th := in.Job.Launch.T
	return []finding.Evidence{
		ev("launch thread "+threadName(th)+" running", th.CPU.Mean, "% of wall time", in.window(th.CPU.N), in.schedSource(th)),
		ev("launch thread waiting for a CPU (run queue)", th.Wait.Mean, "% of wall time", in.window(th.Wait.N), in.schedSource(th)),
	}
}

// launchWhoEvidence says how the launch thread was recognised.
func (in *Input) launchWhoEvidence() finding.Evidence {
	launchThread := in.Job.Launch
	return evText("launch thread", threadName(launchThread.T)+": "+launchThread.How, "", "thread roles, GPU process list, /proc/PID/fd")
}

// launchWaitsEvidence says where the launch thread slept.
func (in *Input) launchWaitsEvidence() finding.Evidence {
	launchThread := in.Job.Launch
	return evText("where the launch thread slept", launchThread.Waits.topWaits(3),
		fmt.Sprintf("%d readings, about one per %v", launchThread.Waits.Readings(), in.slowTier()),
		fmt.Sprintf("/proc/%d/task/%d/{stat,syscall,wchan}, /proc/%d/fd", launchThread.T.PID, launchThread.T.Key.TID, launchThread.T.PID))
}

func (in *Input) slowTier() string {
	return fmt.Sprint(durationOf(in.Timeline.Meta.Tiers.Slow))
}

// producerMeans averages the producers' load over the measured intervals.
func (in *Input) producerMeans() (busy, disk float64, n int) {
	for i := range in.View.Intervals {
		if math.IsNaN(in.Job.GPUUtil[i]) {
			continue
		}
		l := producerLoad(&in.Job, i)
		busy += l.BusyPct
		disk += l.DiskPct
		n++
	}
	if n > 0 {
		busy /= float64(n)
		disk /= float64(n)
	}
	return busy, disk, n
}

// workerProcs are the job's processes that do not use the GPU and are
// neither launchers, ranks nor the trainer: DataLoader workers, readers,
// multiprocessing children. A rank of a CPU-only job (gloo) runs its own
// training loop; it is no worker even with no GPU in view.
func (in *Input) workerProcs() []*derive.Proc {
	gpu := map[*derive.Proc]bool{}
	for _, p := range in.Job.GPUProcs {
		gpu[p] = true
	}
	var out []*derive.Proc
	for _, p := range in.Job.Procs {
		if gpu[p] || p.Info.Exited {
			continue
		}
		switch p.Role {
		case "torchrun", "launcher", "rank", "trainer":
			continue
		}
		if p.CPU.N == 0 {
			continue
		}
		out = append(out, p)
	}
	return out
}

// hostBusyEvidence is all CPUs' mean busy share.
func (in *Input) hostBusyEvidence() (finding.Evidence, bool) {
	h := in.View.Host
	if h == nil || h.Busy.N == 0 {
		return finding.Evidence{}, false
	}
	return ev(fmt.Sprintf("all %d CPUs busy, mean (host-wide: the job and any neighbours)", h.NumCPU), h.Busy.Mean, "%", in.window(h.Busy.N), "/proc/stat"), true
}

// idleBecause ends a cause's claim with the GPU's idle share and the part of
// it the cause explains: ": the GPU idled 57% of the window, 33% because of it".
func (in *Input) idleBecause(share float64) string {
	return fmt.Sprintf(": the GPU idled %.0f%% of the window, %.0f%% because of it", in.Attribution.IdlePct, share)
}

// causeSeverity is a cause finding's severity: a warning from HighSharePct
// of the window (XProf's "highly" bound), information below (a moderate cause).
func (in *Input) causeSeverity(share float64) finding.Severity {
	if share >= thresholds.HighSharePct {
		return finding.Warning
	}
	return finding.Info
}

// workerCount says "2 worker processes" (or "no worker process").
func workerCount(n int) string {
	switch n {
	case 0:
		return "no worker process"
	case 1:
		return "1 worker process"
	}
	return fmt.Sprintf("%d worker processes", n)
}

// launchWakersEvidence says who woke the launch thread over the window,
// from the scheduler's events (sched_waking runs in the waker's context;
// with the kernel's counters as the source, counted in spells, a tenth of
// the window: a sample of it, said so, its rate over the time counted):
// the three wakers that woke it most, with their share of its wake-ups.
// A waker in the job is a thread (the pin thread, a worker); one outside it
// is its process, all its threads together (a device server's or a peer's
// thread pool wakes from whichever thread ran the reply). Nil when the
// events were not counted or nothing woke it. A wake-up from an interrupt
// is attributed to the thread the interrupt came in on; the text says so
// when the idle task is among them.
func (in *Input) launchWakersEvidence() []finding.Evidence {
	w, l := in.Timeline.Meta.Wakers, in.Job.Launch
	if w == nil || l == nil {
		return nil
	}
	tid := l.T.Key.TID
	type waker struct {
		first   timeline.WakeEdge // the edge that names it; Count is the sum
		threads int
	}
	var wakers []*waker
	byKey := map[[2]int]*waker{}
	var total uint64
	for _, e := range w.Edges {
		if e.Wakee != tid {
			continue
		}
		total += e.Count
		key := [2]int{0, e.Waker}
		if e.Waker != 0 && in.wakerThread(e) == nil {
			key = [2]int{1, e.WakerPID}
		}
		if k := byKey[key]; k != nil {
			k.first.Count += e.Count
			k.threads++
			if e.Waker < k.first.Waker {
				k.first.Waker, k.first.WakerComm = e.Waker, e.WakerComm
			}
			continue
		}
		k := &waker{first: e, threads: 1}
		byKey[key] = k
		wakers = append(wakers, k)
	}
	if total == 0 {
		return nil
	}
	slices.SortFunc(wakers, func(a, b *waker) int {
		return cmp.Or(cmp.Compare(b.first.Count, a.first.Count), cmp.Compare(a.first.Waker, b.first.Waker))
	})
	var parts []string
	var shown uint64
	for i, k := range wakers {
		if i == 3 {
			break
		}
		shown += k.first.Count
		name := in.wakerName(k.first)
		if k.threads > 1 {
			name = fmt.Sprintf("%s (pid %d, %d of its threads, outside the watched job)", k.first.WakerComm, k.first.WakerPID, k.threads)
		}
		parts = append(parts, fmt.Sprintf("%s %d times (%.0f%%)", name, k.first.Count, float64(k.first.Count)/float64(total)*100))
	}
	if rest := len(wakers) - len(parts); rest > 0 {
		parts = append(parts, fmt.Sprintf("%s %d times", safetext.Count(rest, "other waker", "other wakers"), total-shown))
	}
	what, window, source := in.wakersSpan(total)
	return []finding.Evidence{evText("who woke the launch thread "+threadName(l.T)+" "+what, strings.Join(parts, "; "), window, source)}
}

// wakersSpan words how n wake-ups were counted: "(N wake-ups, R a second)"
// over the window, or, counted in spells (the kernel's counters as the
// source), "(N wake-ups in the T they were counted, R a
// second)": the shares are a sample's, the rate that of the time counted;
// with the evidence's window and source.
func (in *Input) wakersSpan(n uint64) (what, window, source string) {
	w := in.Timeline.Meta.Wakers
	secs := float64(in.View.WindowNS) / 1e9
	what = fmt.Sprintf("(%d wake-ups", n)
	span := durationOf(timeline.Duration(in.View.WindowNS)).Round(10 * time.Millisecond)
	window = fmt.Sprintf("the window (%s)", span)
	source = "the scheduler's sched_waking events, counted in the kernel"
	if w != nil && w.SampledNS > 0 && w.SampledNS < in.View.WindowNS {
		secs = float64(w.SampledNS) / 1e9
		counted := durationOf(timeline.Duration(w.SampledNS)).Round(10 * time.Millisecond)
		what = fmt.Sprintf("(%d wake-ups in the %s they were counted", n, counted)
		window = fmt.Sprintf("%s of the window (%s), counted in spells", counted, span)
		source += " while its program was attached"
	}
	if secs > 0 {
		what += fmt.Sprintf(", %.0f a second", float64(n)/secs)
	}
	return what + ")", window, source
}

// wakerThread is the watched job's thread that woke in e, nil for one
// outside the job (or the idle task).
func (in *Input) wakerThread(e timeline.WakeEdge) *derive.Thread {
	for _, th := range in.View.Threads {
		if th.Key.TID == e.Waker && th.PID == e.WakerPID {
			return th
		}
	}
	return nil
}

// wakerName names a waking thread: the job's thread with its role, the
// idle task, or a thread outside the job with its process.
func (in *Input) wakerName(e timeline.WakeEdge) string {
	if e.Waker == 0 {
		return "the idle task (an interrupt on an idle CPU)"
	}
	if th := in.wakerThread(e); th != nil {
		name := threadName(th)
		if th.Role != "" && th.Role != "unnamed" && th.Role != "main" {
			name += " [" + th.Role + "]"
		}
		for _, p := range in.View.Procs {
			if p.Key.PID == th.PID && p.Role != "" && th.PID != in.Job.Launch.T.PID {
				name += " of " + p.Role + " pid " + fmt.Sprint(th.PID)
				break
			}
		}
		return name
	}
	return fmt.Sprintf("%s (pid %d, tid %d, outside the watched job)", e.WakerComm, e.WakerPID, e.Waker)
}

package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
)

// Progress is what the whole job did over the window, or over its tail
// since the last member died when that tail is long enough to judge.
type Progress struct {
	// Judged is false when the window is too short or too sparse to judge.
	Judged bool
	// From is where the judged part of the window starts (nanoseconds since
	// Meta.Started); Since names what happened there ("since rank 2
	// exited"), empty when the whole window was judged.
	From  int64
	Since string
	// Span and Samples are the judged part's length and sample count.
	Span    time.Duration
	Samples int
	// CPUCores is the on-CPU time all the job's threads gained, in cores
	// (seconds of CPU per second of window); Busiest the thread that gained
	// most.
	CPUCores     float64
	BusiestTID   int
	BusiestPID   int
	BusiestCores float64
	CPUFromTicks bool // no schedstat: from utime+stime, at clock-tick resolution
	Threads      int
	// IOBytesPerSec is rchar+wchar of all processes; IOVisible is false
	// when no process's /proc/PID/io could be read.
	IOBytesPerSec float64
	IOVisible     bool
	// GPU: whether a device was sampled, its highest utilisation, and the
	// lowest (a spinning kernel keeps it pinned).
	GPUVisible bool
	GPUMaxUtil float64
	GPUMinUtil float64
	GPUDevices []int
	// LiveProcs is the number of the job's processes alive at the end.
	LiveProcs int
}

// Stalled says whether nothing progressed.
func (p Progress) Stalled() bool {
	if !p.Judged || p.LiveProcs == 0 {
		return false
	}
	if p.CPUCores > StallMaxCPUCores {
		return false
	}
	if p.IOVisible && p.IOBytesPerSec > StallMaxIOBytesPerSec {
		return false
	}
	return !p.GPUVisible || p.GPUMaxUtil <= StallMaxGPUUtil || p.GPUSpinning()
}

// GPUSpinning says the GPUs stayed pinned busy while the CPU did nothing:
// a collective kernel waiting for a peer.
func (p Progress) GPUSpinning() bool {
	return p.GPUVisible && p.GPUMinUtil >= StallSpinGPUUtil && p.CPUCores <= StallMaxCPUCores
}

// measureProgress measures the live members' progress: over the window's
// tail since the last member died when that tail can be judged
// on its own, otherwise over the whole window. A member that died is not
// progressing; what it did before it died is no sign of life.
func measureProgress(v *view, deaths []Death) Progress {
	var p Progress
	p.From = v.t0
	lastDeath, who := int64(-1<<62), 0
	for _, d := range deaths {
		if t, ok := v.lastProcT[d.PID]; ok && (t > lastDeath || (t == lastDeath && d.PID < who)) {
			lastDeath, who = t, d.PID
		}
	}
	if lastDeath > v.t0 && time.Duration(v.t1-lastDeath) >= StallMinWindow {
		p.From = lastDeath
		p.Since = "since " + v.procName(who) + " was last seen"
	}
	for _, tk := range v.tl.Ticks {
		if tk.T >= p.From {
			p.Samples++
		}
	}
	p.Span = time.Duration(v.t1 - p.From)
	p.Judged = p.Samples >= StallMinSamples && p.Span >= StallMinWindow
	secs := p.Span.Seconds()
	if secs <= 0 {
		return p
	}
	cpus := v.threadCPUsFrom(p.From)
	tids := make([]int, 0, len(cpus))
	for tid := range cpus {
		tids = append(tids, tid)
	}
	sort.Ints(tids) // ties for the busiest thread go to the lowest tid, every time
	for _, tid := range tids {
		c := cpus[tid]
		if !v.alive(c.PID) {
			continue
		}
		cores := float64(c.RunNS) / 1e9 / secs
		p.CPUCores += cores
		p.Threads++
		if cores > p.BusiestCores || p.BusiestTID == 0 {
			p.BusiestCores, p.BusiestTID, p.BusiestPID = cores, c.TID, c.PID
		}
		p.CPUFromTicks = p.CPUFromTicks || c.FromTicks
	}
	// I/O: the sum of each live process's increments between consecutive
	// readings, leaving out the increments over which one of its children
	// exited: the kernel folds a reaped child's counters into its parent's
	// /proc/PID/io, a jump that is no I/O by the parent.
	reaped := v.childExits()
	type io struct {
		prevT int64
		prev  uint64
		seen  bool
	}
	ios := map[int]*io{}
	var ioPIDs []int
	for _, tk := range v.tl.Ticks {
		if tk.T < p.From {
			continue
		}
		for _, ps := range tk.Procs {
			if ps.IO == nil || !v.alive(ps.PID) {
				continue
			}
			n := ps.IO.RChar + ps.IO.WChar
			r := ios[ps.PID]
			if r == nil {
				ios[ps.PID] = &io{prevT: tk.T, prev: n, seen: true}
				ioPIDs = append(ioPIDs, ps.PID)
				continue
			}
			if !reapedBetween(reaped[ps.PID], r.prevT, tk.T) {
				p.IOBytesPerSec += float64(sub(n, r.prev)) / secs
			}
			r.prevT, r.prev = tk.T, n
		}
	}
	p.IOVisible = len(ioPIDs) > 0
	// GPU: devices the job uses (or all, when the samples name no process).
	p.GPUMinUtil = 100
	devices := map[int]bool{}
	for _, tk := range v.tl.Ticks {
		if tk.T < p.From {
			continue
		}
		for _, g := range tk.GPUs {
			if g.UtilPercent == nil || !v.jobUses(g.Processes) {
				continue
			}
			p.GPUVisible = true
			devices[g.Index] = true
			p.GPUMaxUtil = max(p.GPUMaxUtil, *g.UtilPercent)
			p.GPUMinUtil = min(p.GPUMinUtil, *g.UtilPercent)
			for _, pt := range g.Points {
				p.GPUMaxUtil = max(p.GPUMaxUtil, pt.Percent)
			}
		}
	}
	for d := range devices {
		p.GPUDevices = append(p.GPUDevices, d)
	}
	sort.Ints(p.GPUDevices)
	if !p.GPUVisible {
		p.GPUMinUtil = 0
	}
	for pid := range v.procs {
		if v.alive(pid) {
			p.LiveProcs++
		}
	}
	return p
}

// jobUses says whether a GPU sample's process list includes the job (an
// empty list, NVML not listing processes, counts as yes).
func (v *view) jobUses(procs []gpu.Process) bool {
	if len(procs) == 0 {
		return true
	}
	for _, gp := range procs {
		if _, ok := v.procs[gp.PID]; ok {
			return true
		}
	}
	return false
}

// stalledFinding is the verdict-carrying finding: nothing progresses.
func stalledFinding(v *view, p Progress) finding.Finding {
	window := strconv.Itoa(p.Samples) + " samples over " + fmtSeconds(p.Span)
	if p.Since != "" {
		window += ", " + p.Since
	}
	source := "/proc/PID/task/TID/schedstat"
	if p.CPUFromTicks {
		source = "/proc/PID/task/TID/stat (utime+stime)"
	}
	ev := []finding.Evidence{
		{What: fmt.Sprintf("CPU gained by all %d live threads of the job", p.Threads), Value: round(p.CPUCores*100, 3), Unit: "% of one core", Window: window, Source: source},
		{What: "CPU of the busiest thread, " + v.procName(p.BusiestPID) + " " + v.threadName(p.BusiestTID), Value: round(p.BusiestCores*100, 3), Unit: "% of one core", Window: window, Source: source},
	}
	io := "I/O not visible"
	if p.IOVisible {
		ev = append(ev, finding.Evidence{What: "bytes read and written by the job (rchar + wchar, pipes and sockets included)", Value: round(p.IOBytesPerSec, 1), Unit: "B/s", Window: window, Source: "/proc/PID/io"})
		io = "moved " + strconv.FormatFloat(p.IOBytesPerSec, 'f', 0, 64) + " B/s of I/O"
	}
	gpu := "no GPU was visible"
	if p.GPUVisible {
		src := v.tl.Meta.GPUSource
		if src == "" {
			src = "GPU samples"
		}
		ev = append(ev, finding.Evidence{What: "GPU utilisation, highest sample (GPUs " + ints(p.GPUDevices) + ")", Value: p.GPUMaxUtil, Unit: "%", Window: window, Source: src})
		gpu = "the GPUs stayed idle"
		if p.GPUSpinning() {
			ev = append(ev, finding.Evidence{What: "GPU utilisation, lowest sample", Value: p.GPUMinUtil, Unit: "%", Window: window, Source: src})
			gpu = fmt.Sprintf("the GPUs stayed at %.0f %% or more, a collective kernel spinning on a peer that never arrives", p.GPUMinUtil)
		}
	}
	return finding.Finding{
		ID:       "job-stalled",
		Severity: finding.Critical,
		Claim: fmt.Sprintf("The job is stalled: its %d live threads gained %.2f %% of one core, %s and %s over %s",
			p.Threads, p.CPUCores*100, io, gpu, fmtSeconds(p.Span)+sinceText(p)),
		Evidence: ev,
		Decision: "Nothing moves, so profiling cannot help: read the findings that follow (a member that died, where each thread waits). A frozen job is usually a dead rank whose peers wait in a collective forever: check the kernel log for kills (`dmesg -T | grep -i 'killed process'`), and set TORCH_NCCL_ASYNC_ERROR_HANDLING so survivors fail loudly next time.",
		Seed:     "004 (The OOM killer; The NCCL hang)",
		Supports: finding.Stalled,
		Subject:  "job",
	}
}

func round(x float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', digits, 64), 64)
	return v
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func sinceText(p Progress) string {
	if p.Since == "" {
		return ""
	}
	return " (" + p.Since + ")"
}

// childExits maps each pid to the times (last sample) at which its child
// processes were last seen before they exited.
func (v *view) childExits() map[int][]int64 {
	out := map[int][]int64{}
	for pid, p := range v.procs {
		if v.alive(pid) {
			continue
		}
		if t, ok := v.lastProcT[pid]; ok {
			out[p.PPID] = append(out[p.PPID], t)
		}
	}
	return out
}

// reapedBetween says whether a child was last seen in [from, to): it
// exited, and was reaped, before the reading at to.
func reapedBetween(exits []int64, from, to int64) bool {
	for _, t := range exits {
		if t >= from && t < to {
			return true
		}
	}
	return false
}

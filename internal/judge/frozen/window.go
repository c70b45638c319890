package frozen

import (
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// view indexes a timeline for the analyses.
type view struct {
	tl      *timeline.Timeline
	t0, t1  int64
	samples int
	// procs by pid (the latest seen for a reused pid), threads by tid.
	procs   map[int]*timeline.ProcInfo
	threads map[int]*timeline.ThreadInfo
	// lastProcT of each pid: the T of its last sample (of the process or
	// of any of its threads).
	lastProcT map[int]int64
	// matched are the dead processes told to be a rank by elimination
	// (Deaths fills it).
	matched map[int]*RankMatch
	// kernel are the timeline's kernel log lines recognised (once: the
	// judge recognises them and hands them over; newView otherwise).
	kernel []kernlog.Event
}

func newView(tl *timeline.Timeline) *view {
	return newViewWith(tl, kernlog.FromTimeline(tl.Events, tl.Meta.Started))
}

// newViewWith is newView over kernel lines already recognised.
func newViewWith(tl *timeline.Timeline, kernel []kernlog.Event) *view {
	v := &view{tl: tl, kernel: kernel, procs: map[int]*timeline.ProcInfo{}, threads: map[int]*timeline.ThreadInfo{}, lastProcT: map[int]int64{}}
	if n := len(tl.Ticks); n > 0 {
		v.t0, v.t1, v.samples = tl.Ticks[0].T, tl.Ticks[n-1].T, n
	}
	for _, p := range tl.Procs {
		if old, ok := v.procs[p.Key.PID]; !ok || p.LastSeen > old.LastSeen {
			v.procs[p.Key.PID] = p
		}
	}
	for _, th := range tl.Threads {
		if old, ok := v.threads[th.Key.TID]; !ok || th.LastSeen > old.LastSeen {
			v.threads[th.Key.TID] = th
		}
	}
	for _, tk := range tl.Ticks {
		for _, ps := range tk.Procs {
			v.lastProcT[ps.PID] = tk.T
		}
		for _, ts := range tk.Threads {
			v.lastProcT[ts.PID] = tk.T
		}
	}
	return v
}

// span is the window's length.
func (v *view) span() time.Duration { return time.Duration(v.t1 - v.t0) }

// wall is the wall-clock time of a timeline instant, in the location of
// Meta.Started (the machine's zone where it was recorded).
func (v *view) wall(t int64) time.Time { return v.tl.Meta.Started.Add(time.Duration(t)) }

// windowText describes the window for evidence.
func (v *view) windowText() string {
	return strconv.Itoa(v.samples) + " samples over " + fmtSeconds(v.span())
}

// alive says whether a process was still sampled at the window's end.
func (v *view) alive(pid int) bool {
	p := v.procs[pid]
	if p == nil || p.Exited {
		return false
	}
	t, ok := v.lastProcT[pid]
	return ok && t == v.t1
}

// clockTick is USER_HZ (100 when the recording does not say).
func (v *view) clockTick() float64 {
	if v.tl.Meta.ClockTick > 0 {
		return float64(v.tl.Meta.ClockTick)
	}
	return 100
}

// threadCPU is one thread's CPU over the window.
type threadCPU struct {
	PID, TID int
	// RunNS and WaitNS are the on-CPU and run-queue time gained between the
	// thread's first and last sample in the window.
	RunNS, WaitNS uint64
	Span          time.Duration
	FromTicks     bool // RunNS came from utime+stime (no schedstat)
	Last          timeline.ThreadSample
	LastT         int64
}

// threadCPUs computes every thread's CPU over the window.
func (v *view) threadCPUs() map[int]*threadCPU { return v.threadCPUsFrom(v.t0) }

// threadCPUsFrom computes every thread's CPU from its first sample at or
// after from to its last.
func (v *view) threadCPUsFrom(from int64) map[int]*threadCPU {
	type firstSample struct {
		s timeline.ThreadSample
		t int64
	}
	first := map[int]firstSample{}
	out := map[int]*threadCPU{}
	for _, tk := range v.tl.Ticks {
		if tk.T < from {
			continue
		}
		for _, s := range tk.Threads {
			f, ok := first[s.TID]
			if !ok {
				first[s.TID] = firstSample{s, tk.T}
				out[s.TID] = &threadCPU{PID: s.PID, TID: s.TID, Last: s, LastT: tk.T}
				continue
			}
			c := out[s.TID]
			c.Last, c.LastT = s, tk.T
			c.Span = time.Duration(tk.T - f.t)
			if s.RunNS > 0 || f.s.RunNS > 0 {
				c.RunNS = sub(s.RunNS, f.s.RunNS)
				c.WaitNS = sub(s.WaitNS, f.s.WaitNS)
			} else {
				ticks := sub(s.UTime+s.STime, f.s.UTime+f.s.STime)
				c.RunNS = uint64(float64(ticks) * 1e9 / v.clockTick())
				c.FromTicks = true
			}
		}
	}
	return out
}

// sub is a-b for counters, 0 when a counter went backwards (a reused TID).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// rank returns the rank a process's allowlisted environment gives it:
// RANK (torchrun), SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, and the
// node-local LOCAL_RANK / SLURM_LOCALID when no global rank is set.
//
// A process whose recorded role is another ("dataloader-worker", "worker":
// a rank's fork, which inherits its environment) is not a rank.
func rank(p *timeline.ProcInfo) (label string, n int, ok bool) {
	if p == nil || (p.Role != "" && p.Role != "rank") {
		return "", 0, false
	}
	for _, k := range []string{"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"} {
		if v, found := p.Env[k]; found {
			if r, err := strconv.Atoi(v); err == nil && r >= 0 {
				return "rank " + v, r, true
			}
		}
	}
	for _, k := range []string{"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"} {
		if v, found := p.Env[k]; found {
			if r, err := strconv.Atoi(v); err == nil && r >= 0 {
				return "local rank " + v, r, true
			}
		}
	}
	return "", 0, false
}

// procName names a process for a claim: "rank 2 (pid 48213)" or
// "pid 48213 (python3)".
func (v *view) procName(pid int) string { return v.procNameWith(pid, safe) }

// procNameRaw is procName with the process's name as the kernel gave it,
// for a finding that leaves the escaping to the renderers, as the live
// rules' findings do (gil-contention).
func (v *view) procNameRaw(pid int) string {
	return v.procNameWith(pid, func(s string) string { return s })
}

func (v *view) procNameWith(pid int, safe func(string) string) string {
	p := v.procs[pid]
	if m := v.matched[pid]; m != nil {
		return m.Name() + " (pid " + strconv.Itoa(pid) + ")"
	}
	if label, _, ok := rank(p); ok {
		return label + " (pid " + strconv.Itoa(pid) + ")"
	}
	if p != nil && p.Comm != "" {
		return "pid " + strconv.Itoa(pid) + " (" + safe(p.Comm) + ")"
	}
	return "pid " + strconv.Itoa(pid)
}

// threadName names a thread: "tid 1234 (pt_main_thread)".
func (v *view) threadName(tid int) string { return v.threadNameWith(tid, safe) }

// threadNameRaw is threadName with the thread's name as the kernel gave it
// (see procNameRaw).
func (v *view) threadNameRaw(tid int) string {
	return v.threadNameWith(tid, func(s string) string { return s })
}

func (v *view) threadNameWith(tid int, safe func(string) string) string {
	if th := v.threads[tid]; th != nil && th.Comm != "" {
		return "tid " + strconv.Itoa(tid) + " (" + safe(th.Comm) + ")"
	}
	return "tid " + strconv.Itoa(tid)
}

// IsPython says whether a process runs a Python interpreter.
func IsPython(p *timeline.ProcInfo) bool {
	if p == nil {
		return false
	}
	if strings.HasPrefix(p.Comm, "python") || strings.HasPrefix(p.Comm, "pt_") {
		return true
	}
	if len(p.Cmdline) > 0 && strings.HasPrefix(path.Base(p.Cmdline[0]), "python") {
		return true
	}
	return false
}

// sortedPIDs returns the pids of the view in order.
func (v *view) sortedPIDs() []int {
	pids := make([]int, 0, len(v.procs))
	for pid := range v.procs {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

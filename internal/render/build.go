package render

import (
	"fmt"
	"github.com/gpufeed/gpufeed/internal/profile"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Text-report limits: how many threads a process lists before the rest are
// summarised in one line (JSON always carries every thread).
const (
	maxShownThreads = 16
	// quietThreadCPU: a thread below this p95 CPU (percent of a core) and
	// this run-queue wait is "quiet" and may be folded into the summary line.
	quietThreadCPU  = 1.0
	quietThreadWait = 1.0
	// busiestCPUsShown is how many CPUs the host section names.
	busiestCPUsShown = 4
)

// Build assembles the report from a timeline, its derived view and the
// judge's Judgement, taken as it is: its findings in its order (the
// verdict's own first), its job, deaths and recognised kernel lines. jd is
// nil when no rules ran; notes carry warnings about the data (a truncated
// recording); the run's own notes about its target (timeline Meta.Notes)
// come first.
func Build(tl *timeline.Timeline, a *derive.View, jd *judge.Judgement, notes []string) *Report {
	m := tl.Meta
	r := &Report{
		RecordedBy: m.Tool,
		Target:     Target{PID: m.Target.PID, Command: m.Target.Command, Launched: m.Target.Launched, Held: m.Target.Held, ExitCode: m.Target.ExitCode},
		Window: Window{
			Started:           m.Started.UTC().Format(time.RFC3339),
			DurationNS:        a.WindowNS,
			PlannedDurationNS: int64(m.Duration),
			IntervalNS:        int64(m.Interval),
			SlowTierNS:        int64(m.Tiers.Slow),
			RollupTierNS:      int64(m.Tiers.Rollup),
			Samples:           len(tl.Ticks),
			Ended:             m.Ended,
		},
		Machine:      Machine{Hostname: m.Hostname, Kernel: m.Kernel, Arch: m.Arch, NumCPU: m.NumCPU},
		Findings:     []finding.Finding{},
		View:         a,
		KernelEvents: []judge.KernelEvent{},
		Deaths:       []judge.Death{},
		GPUSource:    m.GPUSource,
		GPUs:         []GPU{},
		Counts: Counts{VanishedThreads: tl.Counts.VanishedThreads, VanishedProcs: tl.Counts.VanishedProcs,
			Overruns: tl.Counts.Overruns, ReadErrors: tl.Counts.ReadErrors, RollupSkipped: tl.Counts.RollupSkipped},
		Notes: append(append([]string{}, m.Notes...), notes...),
	}
	if jd != nil {
		r.Verdict, r.Series = jd.Verdict, jd.Series
		r.Findings = append(r.Findings, jd.Findings...)
		r.Job, r.KernelEvents, r.Deaths = &jd.Job, jd.Kernel, jd.Deaths
	}
	if t := a.Target(); t != nil {
		r.Target.Comm = t.Info.Comm
	}
	for _, p := range a.Procs {
		r.Processes = append(r.Processes, buildProcess(p))
	}
	if r.Processes == nil {
		r.Processes = []Process{}
	}
	r.Host = buildHost(a.Host)
	if p := m.CPUProfile; p != nil && p.State == profile.StateOn {
		r.CPUProfile = p
	}
	if s := m.Syscalls; s != nil && s.State == profile.StateOn {
		r.Syscalls = s
	}
	if d := m.DriverCalls; d != nil && d.State == profile.StateOn {
		r.DriverCalls = d
	}
	for _, g := range a.GPUs {
		r.GPUs = append(r.GPUs, buildGPU(g))
	}
	if o := a.Observer; o != nil {
		r.Observer = &Observer{CPUPercentOfCore: num(o.CPUPctOfCore), CPUNS: int64(math.Round(o.CPUSeconds * 1e9)),
			NSPerThreadSample: scaled(o.USPerThreadSample, 1e3), ThreadSamples: o.ThreadSamples,
			ThreadSamplesCarried: o.ThreadSamplesCarried,
			TickP50NS:            int64(math.Round(o.TickP50MS * 1e6)), TickMaxNS: int64(math.Round(o.TickMaxMS * 1e6)), Overruns: o.Overruns,
			Sched: o.Sched, SchedNotBPF: o.SchedNotBPF, SchedMissed: o.SchedMissed, Waits: o.Waits, WaitsNotBPF: o.WaitsNotBPF}
	}
	r.NotVisible = []NotVisible{}
	for _, k := range sortedKeys(m.NotVisible) {
		r.NotVisible = append(r.NotVisible, NotVisible{Subject: "host", Field: k, Why: m.NotVisible[k]})
	}
	for _, p := range r.Processes {
		for _, k := range sortedKeys(p.NotVisible) {
			r.NotVisible = append(r.NotVisible, NotVisible{Subject: fmt.Sprintf("pid %d (%s)", p.PID, p.Comm), Field: k, Why: p.NotVisible[k]})
		}
		seen := map[string]bool{}
		for _, t := range p.Threads {
			if t.Blocked != nil && t.Blocked.NotVisible != "" && !seen[t.Blocked.NotVisible] {
				seen[t.Blocked.NotVisible] = true
				r.NotVisible = append(r.NotVisible, NotVisible{Subject: fmt.Sprintf("pid %d threads", p.PID), Field: "blocked", Why: t.Blocked.NotVisible})
			}
		}
	}
	r.Events = []Event{}
	for i, e := range tl.Events {
		if e.Kind == timeline.EventThreadExit {
			continue // counted, and listed per thread as exited; a pool's churn would drown the rest
		}
		if e.Kind == timeline.EventPyStacks {
			continue // a whole py-spy dump: the python-stacks finding shows it, thread by thread
		}
		ev := Event{AtNS: e.T, Kind: e.Kind, PID: e.PID, TID: e.TID, Text: safetext.Cap(e.Text, safetext.MaxRunes)}
		if e.Kind == timeline.EventKernelLog && jd != nil {
			// The judge recognised the line and tied it to the job (or not).
			if job, known := jd.JobKernelLine(i); known && !job {
				r.KernelLinesOther++ // another process's OOM kill or segfault since the job started
				continue
			}
			if k, ok := jd.KernelLine(i); ok {
				ev.KernelKind = k.Kind
			}
		}
		// Capped in both outputs: a recording can hold any text here.
		r.Events = append(r.Events, ev)
	}
	return r
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// num turns NaN (not measured) into nil, so JSON says null and text says "-".
func num(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// scaled is num(x*k): a value converted to the unit its JSON key names.
func scaled(x, k float64) *float64 { return num(x * k) }

func stat(s derive.Stats) Stat {
	return Stat{P50: num(s.P50), P95: num(s.P95), Max: num(s.Max), N: s.N}
}

func buildProcess(p *derive.Proc) Process {
	info := p.Info
	out := Process{
		PID: p.Key.PID, StartTime: p.Key.StartTime, PPID: info.PPID, Comm: info.Comm, Role: info.Role, Rank: p.Rank(), Start: info.Start,
		Cmdline: info.Cmdline, Exited: info.Exited, Env: info.Env,
		CPUsAllowed: info.CPUsAllowed, MemsAllowed: info.MemsAllowed,
		CPUPercent: stat(p.CPU), FDLimit: info.NoFileSoft, FDLimitHard: info.NoFileHard,
		USSGrowthBps: num(p.USSGrowth), RSSGrowthBps: num(p.RSSGrowth), FDGrowthPerSec: num(p.FDGrowth),
		ReadBytesPerSec: num(p.RCharPerSec), DiskReadBytesPerSec: num(p.ReadBytesPerSec),
		ReadCallsPerSec: num(p.ReadCallsPerSec), MeanReadBytes: num(p.MeanReadBytes),
		NotVisible: info.NotVisible,
	}
	if v, i := p.ThreadCount.Last(); i >= 0 {
		out.ThreadCount = int(v)
	} else {
		out.ThreadCount = len(p.Threads)
	}
	out.RSSBytes = lastNum(p.RSSBytes)
	out.PSSBytes = lastNum(p.PSSBytes)
	out.USSBytes = lastNum(p.USSBytes)
	out.COWCopiedBytes = lastCopied(p)
	out.FDs = lastNum(p.FDs)
	for _, th := range p.Threads {
		out.Threads = append(out.Threads, buildThread(th))
	}
	// Busiest first; then by run-queue wait; then by TID for a stable order.
	sort.SliceStable(out.Threads, func(i, j int) bool {
		a, b := out.Threads[i], out.Threads[j]
		pa, pb := deref(a.CPUPercent.P95), deref(b.CPUPercent.P95)
		if pa != pb {
			return pa > pb
		}
		wa, wb := deref(a.RunQueueWaitPercent), deref(b.RunQueueWaitPercent)
		if wa != wb {
			return wa > wb
		}
		return a.TID < b.TID
	})
	// Stable partition: the threads worth a line first (busiest first), the
	// quiet pool threads after them, summarised in text as one line.
	var front, back []Thread
	hidden := HiddenThreads{}
	for _, t := range out.Threads {
		quiet := deref(t.CPUPercent.P95) < quietThreadCPU && deref(t.RunQueueWaitPercent) < quietThreadWait &&
			t.TID != out.PID && (t.Role == "" || t.Role == "unnamed" || t.Role == "intra-op")
		if len(front) < maxShownThreads && !quiet {
			front = append(front, t)
			continue
		}
		back = append(back, t)
		hidden.Count++
		hidden.MaxCPUP95 = math.Max(hidden.MaxCPUP95, deref(t.CPUPercent.P95))
	}
	out.Threads = append(front, back...)
	if out.Threads == nil {
		out.Threads = []Thread{} // a process with no thread sampled: an empty list, not null
	}
	shown := len(front)
	out.ShownThreads = shown
	if hidden.Count > 0 {
		out.HiddenThreads = &hidden
	}
	return out
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func lastNum(g derive.Gauge) *float64 {
	v, _ := g.Last()
	return num(v)
}

func buildThread(th *derive.Thread) Thread {
	t := Thread{TID: th.Key.TID, Comm: th.Info.Comm, Role: th.Info.Role, Exited: th.Info.Exited,
		CPUPercent: stat(th.CPU), UserPercent: num(th.UserShare),
		RunQueueWaitPercent: num(th.Wait.Mean), RunQueueWaitPercentP95: num(th.Wait.P95),
		VoluntaryPerSec: num(th.Vol), InvoluntaryPerSec: num(th.Invol)}
	if s, _ := th.Last(); s != nil {
		t.State = string(rune(s.State))
	}
	if b, _ := th.LastBlocked(); b != nil && t.State != "R" {
		t.Blocked = b
	}
	return t
}

func buildHost(h *derive.Host) *Host {
	if h == nil {
		return nil
	}
	out := &Host{NumCPU: h.NumCPU, BusyPercent: stat(h.Busy), IOWaitPct: num(h.IOWaitPct.Mean()),
		RunQueue: stat(h.RunQueue), RunQueuePerCPU: num(h.RunQueuePerCPU.Stats().P95),
		ProcsBlocked: num(h.ProcsBlocked.Stats().Max), MemTotal: num(h.MemTotal), Disks: []Disk{}}
	out.MemAvailable = lastNum(h.MemAvailable)
	out.Dirty = lastNum(h.Dirty)
	for i, c := range h.Busiest {
		if i >= busiestCPUsShown {
			break
		}
		for _, x := range h.CPUs {
			if x.CPU == c {
				out.Busiest = append(out.Busiest, CPUShare{CPU: c, Busy: num(x.Busy.Mean), User: num(x.UserPct.Mean()),
					System: num(x.SystemPct.Mean()), IOWait: num(x.IOWaitPct.Mean()), IRQ: num(x.IRQPct.Mean()), Steal: num(x.StealPct.Mean())})
			}
		}
	}
	if h.PSI != nil {
		out.PSI = &PSI{CPUSome: num(h.PSI.CPUSome.Mean()), MemSome: num(h.PSI.MemSome.Mean()), MemFull: num(h.PSI.MemFull.Mean()),
			IOSome: num(h.PSI.IOSome.Mean()), IOFull: num(h.PSI.IOFull.Mean())}
	}
	for _, d := range h.Disks {
		out.Disks = append(out.Disks, Disk{Name: d.Name, ReadsPerSec: num(d.Reads), ReadBytesPerSec: scaled(d.ReadKB, 1024),
			WritesPerSec: num(d.Writes), WriteBytesPerSec: scaled(d.WriteKB, 1024), AwaitNS: scaled(d.Await, 1e6), UtilPercent: num(d.Util)})
	}
	return out
}

func buildGPU(g *derive.GPU) GPU {
	out := GPU{Index: g.Index, UtilP10: num(g.Util.P10), UtilP50: num(g.Util.P50), UtilP90: num(g.Util.P90),
		UtilMean: num(g.Util.Mean), UtilN: g.Util.N, MemUtilP50: num(g.MemUtilPct.Stats().P50),
		SMClockP50: num(g.SMClockMHz.Stats().P50), SMClockMin: num(g.SMClockMHz.Stats().Min),
		PowerP50: num(g.PowerW.Stats().P50), TempMax: num(g.TempC.Stats().Max),
		PCIeTxP50: num(g.PCIeTxBps.Stats().P50), PCIeRxP50: num(g.PCIeRxBps.Stats().P50),
		ClockEventReasons: g.ClockEventReasons, Lost: g.Lost, Unsupported: g.Unsupported}
	if g.Info != nil {
		out.Name, out.UUID = g.Info.Name, g.Info.UUID
		out.MaxSMClock = g.Info.MaxSMClockMHz
		out.PowerLimit = g.Info.PowerLimitW
	}
	return out
}

// lastCopied is a forked process's last reading of what it copied of the
// memory it inherited; nil when never read.
func lastCopied(p *derive.Proc) *float64 {
	for i := len(p.RSSBytes) - 1; i >= 0; i-- {
		if s := p.Sample(i); s != nil && s.Inherited != nil {
			v := float64(s.Inherited.CopiedBytes)
			return &v
		}
	}
	return nil
}

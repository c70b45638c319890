package judge

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Judgement is everything the judge decided about one window, in one
// value: the verdict, the findings (the verdict's own first), the job as
// judged (its launch thread and its members), the kernel log lines
// recognised (once), the members that died, and the series the rules used.
// Every reader (the report, compare, the agent, the live view) takes it as
// it is: none judges again, guesses the launch thread or a member's rank
// from text, or re-reads a kernel line.
type Judgement struct {
	// Verdict is the classifier's; Findings every rule's, the verdict's
	// own first (finding.VerdictFirst).
	Verdict  *finding.Verdict
	Findings []finding.Finding
	// Job is the job as judged.
	Job JobJudged
	// Kernel are the kernel log lines of the window that have a kind,
	// recognised once, oldest first.
	Kernel []KernelEvent
	// Deaths are the job's members that died (kernel kills, crashes, a
	// rank's exit), with the member each was.
	Deaths []Death
	// Series is what the verdict was judged from, interval by interval.
	Series *Series
	// Input is the shared view the rules read (the agent reads the
	// attribution and ranks from it); nil for a judgement read back from JSON.
	Input *Input

	// kernelAt maps a timeline event's index to its entry in Kernel (only
	// recognised lines); jobLine says, for every kernel log line of the
	// timeline by index, whether it concerns the job.
	kernelAt map[int]int
	jobLine  map[int]bool
}

// JobJudged is the job as the rules saw it: the thread that launches its
// GPU work, and its members.
type JobJudged struct {
	// LaunchThread is nil when none was found.
	LaunchThread *ThreadRef `json:"launch_thread"`
	// GPUProcesses are the pids of the processes that use a GPU;
	// GPUProcessesHow says how they were recognised.
	GPUProcesses    []int  `json:"gpu_processes"`
	GPUProcessesHow string `json:"gpu_processes_how"`
	// Members are every process of the job observed, by pid.
	Members []Member `json:"members"`
	// ForkGroups are the DataLoader-style worker pools: a parent and the
	// workers it started, with the start method.
	ForkGroups []ForkGroup `json:"fork_groups"`
	// Ranks is the per-rank table (two ranks or more), by rank: what each
	// rank's launch thread did over the window, the numbers the RANKS
	// table and rank-straggler state in words.
	Ranks []RankRow `json:"ranks"`
}

// RankRow is one rank of the job over the window.
type RankRow struct {
	Rank  string `json:"rank"`
	World string `json:"world,omitempty"`
	PID   int    `json:"pid"`
	// State is what it did: busy, waits in a collective, waits for data,
	// sleeps, mixed, dead (the RANKS table's words).
	State string `json:"state"`
	// DemandPct is its launch thread's mean running plus runnable share of
	// a core and AsleepPct the share of readings it slept, in percent; nil
	// when its thread was not read (a dead rank).
	DemandPct *float64 `json:"demand_pct"`
	AsleepPct *float64 `json:"asleep_pct"`
	// Waits says where it slept most ("futex", "pipe read"...); GPUs the
	// devices it uses.
	Waits string `json:"waits,omitempty"`
	GPUs  []int  `json:"gpus"`
	// Straggler marks the rank its peers wait for.
	Straggler bool `json:"straggler"`
}

// ThreadRef names a thread.
type ThreadRef struct {
	PID  int    `json:"pid"`
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// How says how it was recognised.
	How string `json:"how,omitempty"`
}

// Member is one process of the job.
type Member struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Comm string `json:"comm"`
	// Role is the process's role as sampled ("rank", "dataloader-worker"...).
	Role string `json:"role"`
	// Rank and LocalRank are its RANK (or SLURM_PROCID) and LOCAL_RANK, ""
	// when it has none.
	Rank      string `json:"rank,omitempty"`
	LocalRank string `json:"local_rank,omitempty"`
	// Name names it in its job: "rank 2", "local rank 1"; "" when it has
	// no rank.
	Name string `json:"name,omitempty"`
	// UsesGPU says the judge counted it among the GPU processes; WorkerOf
	// is the parent pid of its fork group (0 when it is no worker).
	UsesGPU  bool `json:"uses_gpu"`
	WorkerOf int  `json:"worker_of,omitempty"`
	Exited   bool `json:"exited"`
}

// ForkGroup is a parent and the workers it started.
type ForkGroup struct {
	Parent int `json:"parent"`
	// Method is the start method: fork, spawn or forkserver.
	Method  string `json:"method"`
	Workers []int  `json:"workers"`
}

// KernelEvent is one kernel log line of the window, recognised.
type KernelEvent struct {
	// AtNS is when gpufeed read it (ns since the window started); Time
	// its wall time (RFC 3339).
	AtNS int64  `json:"at_ns"`
	Time string `json:"time"`
	// Kind is what the line reports: oom-kill, segfault, trap, gpu-xid,
	// hung-task, nvrm, and the OOM report's other lines.
	Kind string `json:"kind"`
	// PID and Comm name the process it is about (0 and "" when none).
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Job says it concerns the job: one of its processes, or a GPU.
	Job bool `json:"job"`
	// Member names the job's member it is about ("rank 2"), when known.
	Member string `json:"member,omitempty"`
	// Xid and PCI are a GPU line's error code and device.
	Xid int    `json:"xid,omitempty"`
	PCI string `json:"pci,omitempty"`
	// Where: the mapped object of a fault ("in libc.so.6").
	Where string `json:"where,omitempty"`
	// Line is the kernel's line, capped (text from outside).
	Line string `json:"line"`
}

// Death is one member of the job that died.
type Death struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Member names it in its job ("rank 2"): its own RANK, or the rank
	// told by elimination for one that died before it was sampled; "" when
	// not known.
	Member string `json:"member,omitempty"`
	// Cause: oom-kill, segfault, trap, or exited (only the sampler saw it go).
	Cause string `json:"cause"`
	// Where it died: the memory cgroup of an OOM kill, the mapped object
	// of a fault.
	Where string `json:"where,omitempty"`
	// Time is the kernel line's wall time (RFC 3339); "" when only the
	// sampler saw it go.
	Time string `json:"time"`
	// Via says how it was tied to the job: pid, memory cgroup, kernel log.
	Via string `json:"via"`
	// Line is the kernel's line, capped.
	Line string `json:"line,omitempty"`
}

// When is the death's wall time; zero when only the sampler saw it go.
func (d Death) When() time.Time { return parseTime(d.Time) }

// When is the line's wall time; zero when unknown.
func (e KernelEvent) When() time.Time { return parseTime(e.Time) }

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// timeFormat writes a kernel line's wall time to the microsecond (RFC
// 3339): the line's time is the window's start plus when it was read, the
// recording's own resolution.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(timeFormat)
}

// maxLineRunes caps a kernel line carried in a judgement.
const maxLineRunes = 300

// KernelLine is the recognised kernel event of the timeline's event i, if
// it was one; JobKernelLine says whether the timeline's kernel log line i
// concerns the job (one of its processes, or a GPU). A judgement read back
// from JSON answers neither (it has no timeline).
func (j *Judgement) KernelLine(i int) (KernelEvent, bool) {
	if k, ok := j.kernelAt[i]; ok {
		return j.Kernel[k], true
	}
	return KernelEvent{}, false
}

// JobKernelLine: see KernelLine. known is false for a judgement not made
// from a timeline (read back from JSON, or written by hand).
func (j *Judgement) JobKernelLine(i int) (job, known bool) {
	if j.jobLine == nil {
		return false, false
	}
	return j.jobLine[i], true
}

// recognise reads the timeline's kernel log lines once: the events with a
// kind (their wall time set) and, by timeline event index, where each is.
func recognise(tl *timeline.Timeline) (evs []kernlog.Event, index []int) {
	for i, te := range tl.Events {
		if te.Kind != timeline.EventKernelLog {
			continue
		}
		ev, ok := kernlog.ParseMessage(te.Text)
		if !ok {
			continue
		}
		ev.Wall = tl.Meta.Started.Add(time.Duration(te.T))
		evs = append(evs, ev)
		index = append(index, i)
	}
	return evs, index
}

// judgement assembles the Judgement of an input judged.
func judgement(in *Input, v *finding.Verdict, fs []finding.Finding) *Judgement {
	j := &Judgement{Verdict: v, Findings: fs, Series: seriesOf(in), Input: in,
		kernelAt: map[int]int{}, jobLine: map[int]bool{}}
	j.Job = jobJudged(in)
	j.Deaths = deathsOf(in)
	j.Kernel = []KernelEvent{}
	tl := in.Timeline
	inJob := map[int]bool{}
	for k := range tl.Procs {
		inJob[k.PID] = true
	}
	for k := range tl.Threads {
		inJob[k.TID] = true
	}
	member := map[int]string{}
	for _, m := range j.Job.Members {
		member[m.PID] = m.Name
	}
	for _, d := range j.Deaths {
		if d.Member != "" {
			member[d.PID] = d.Member
		}
	}
	for i, te := range tl.Events {
		if te.Kind == timeline.EventKernelLog {
			j.jobLine[i] = te.PID != 0 && inJob[te.PID]
		}
	}
	for n, ev := range in.kernel {
		i := in.kernelIndex[n]
		te := tl.Events[i]
		gpuLine := ev.Kind == kernlog.GPUXid || ev.Kind == kernlog.NVRM
		job := gpuLine || j.jobLine[i] || (ev.PID != 0 && inJob[ev.PID])
		j.jobLine[i] = job
		k := KernelEvent{AtNS: te.T, Time: timeText(ev.Wall), Kind: string(ev.Kind), PID: ev.PID, Comm: safetext.Cap(ev.Comm, 64),
			Job: job, Member: member[ev.PID], Xid: ev.Xid, PCI: ev.PCI, Line: safetext.Cap(ev.Raw, maxLineRunes)}
		if (ev.Kind == kernlog.Segfault || ev.Kind == kernlog.Trap) && ev.Object != "" {
			k.Where = "in " + ev.Object
		}
		j.kernelAt[i] = len(j.Kernel)
		j.Kernel = append(j.Kernel, k)
	}
	return j
}

// jobJudged is the job as the rules saw it.
func jobJudged(in *Input) JobJudged {
	out := JobJudged{GPUProcesses: []int{}, GPUProcessesHow: in.Job.GPUProcsHow, Members: []Member{}, ForkGroups: []ForkGroup{}, Ranks: []RankRow{}}
	if len(in.Job.Ranks) >= 2 {
		for _, v := range in.Job.Ranks {
			r := RankRow{Rank: v.Rank, World: v.World, PID: v.Proc.Key.PID, State: v.State, Waits: v.Top, GPUs: append([]int{}, v.GPUs...),
				Straggler: in.Job.Straggler != nil && in.Job.Straggler.Proc == v.Proc}
			if v.Thread != nil {
				d, a := round2(v.Demand), round2(v.Asleep)
				r.DemandPct, r.AsleepPct = &d, &a
			}
			out.Ranks = append(out.Ranks, r)
		}
	}
	if l := in.Job.Launch; l != nil {
		comm := l.T.Comm
		if comm == "" && l.T.Info != nil {
			comm = l.T.Info.Comm
		}
		out.LaunchThread = &ThreadRef{PID: l.T.PID, TID: l.T.Key.TID, Comm: comm, How: l.How}
	}
	gpu := map[int]bool{}
	for _, p := range in.Job.GPUProcs {
		out.GPUProcesses = append(out.GPUProcesses, p.Key.PID)
		gpu[p.Key.PID] = true
	}
	workerOf := map[int]int{}
	for _, g := range in.Frozen.Workers {
		out.ForkGroups = append(out.ForkGroups, ForkGroup{Parent: g.Parent, Method: g.Method, Workers: append([]int{}, g.Workers...)})
		for _, w := range g.Workers {
			workerOf[w] = g.Parent
		}
	}
	for _, p := range in.View.Procs {
		out.Members = append(out.Members, memberOf(p, gpu[p.Key.PID], workerOf[p.Key.PID]))
	}
	sort.SliceStable(out.Members, func(a, b int) bool { return out.Members[a].PID < out.Members[b].PID })
	return out
}

func memberOf(p *derive.Proc, usesGPU bool, workerOf int) Member {
	m := Member{PID: p.Key.PID, UsesGPU: usesGPU, WorkerOf: workerOf, Rank: p.Rank()}
	if info := p.Info; info != nil {
		m.PPID, m.Comm, m.Role, m.Exited = info.PPID, info.Comm, info.Role, info.Exited
		if info.Role == "" || info.Role == "rank" {
			m.LocalRank = info.Env["LOCAL_RANK"]
		}
	}
	switch {
	case m.Rank != "":
		m.Name = "rank " + m.Rank
	case m.LocalRank != "":
		m.Name = "local rank " + m.LocalRank
	}
	return m
}

// deathsOf are the members that died, as frozen-job triage found them,
// each with the member it was and where it died.
func deathsOf(in *Input) []Death {
	out := []Death{}
	for _, fd := range in.Frozen.Deaths {
		d := Death{PID: fd.PID, Cause: fd.Cause, Time: timeText(fd.When), Via: fd.Via}
		if p := in.View.ProcByPID(fd.PID); p != nil && p.Info != nil {
			d.Comm = p.Info.Comm
		}
		if fd.Match != nil {
			d.Member = fd.Match.Name()
		} else if p := in.View.ProcByPID(fd.PID); p != nil && p.Rank() != "" {
			d.Member = "rank " + p.Rank()
		}
		switch {
		case fd.Kill != nil:
			k := fd.Kill
			d.Comm = k.Comm
			switch {
			case k.MemCG != "" && k.LimitBytes > 0:
				d.Where = fmt.Sprintf("memory cgroup %s at its limit", k.MemCG)
			case k.MemCG != "":
				d.Where = "memory cgroup " + k.MemCG
			case k.TaskMemCG != "":
				d.Where = "memory cgroup " + k.TaskMemCG
			case k.Constraint == "CONSTRAINT_NONE":
				d.Where = "the whole machine out of memory"
			}
			if n := len(k.Lines); n > 0 {
				d.Line = safetext.Cap(killLine(in, k.PID, k.Lines), maxLineRunes)
			}
		case fd.Crash != nil:
			d.Comm = fd.Crash.Comm
			if fd.Crash.Object != "" {
				d.Where = "in " + fd.Crash.Object
			}
			d.Line = safetext.Cap(fd.Crash.Raw, maxLineRunes)
		}
		d.Comm = safetext.Cap(d.Comm, 64)
		out = append(out, d)
	}
	return out
}

// killLine is the "Killed process" line of a kill's report: the
// recognised OOM-kill event of that pid among its lines (the report's
// last line is the reaper's when it reaped).
func killLine(in *Input, pid int, lines []string) string {
	for _, ev := range in.kernel {
		if ev.Kind == kernlog.OOMKill && ev.PID == pid {
			for _, l := range lines {
				if l == ev.Raw {
					return l
				}
			}
		}
	}
	return lines[len(lines)-1]
}

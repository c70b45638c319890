package sample

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// trackedProc is one live process of the tree and its kept files.
type trackedProc struct {
	pid   int
	info  *timeline.ProcInfo
	statm *procfs.Kept
	task  *procfs.Dir
	// threads by tid, and their sampling order (sorted by tid).
	threads map[int]*trackedThread
	order   []*trackedThread
	// failed remembers tids listed but unreadable (vanished, zombie), so a
	// rescan does not count them again; pruned when no longer listed.
	failed    map[int]bool
	mainComm  []byte
	needFacts bool // the main thread was renamed (exec): re-read cmdline, env, limits
	// scanPID is loadavg's last pid when task/ was last listed (scanned:
	// it was known then).
	scanPID int
	scanned bool
	// Dormant threads (read from /proc; see dormant.go): the process's
	// stat kept open (where its CPU clock cannot be read), its CPU at the
	// last tick that read every thread, and the run time the threads read
	// since then have added (ns).
	pstat     *procfs.Kept
	cpuBase   uint64 // ns
	baseExact bool   // cpuBase from the process's CPU clock, not its stat
	haveBase  bool
	noClock   bool // its CPU clock could not be read: its stat is
	accounted uint64
	dormant   int // threads dormant at the last tick
	// factChecks counts the slow ticks left on which the command line is
	// read again: a process first seen between fork and exec of a program
	// with the same name (python3 starting python3) shows its parent's
	// command line and environment, and no rename tells the exec apart.
	factChecks int
	hadMM      bool // statm has shown an address space
	nextRollup time.Duration
	// rollupHeld: its due memory reading is held back by the job's budget
	// (counted once in Counts.RollupSkipped).
	rollupHeld bool
	gone       bool
	cgroup     *cgroupState // its cgroups (cgroup.go); nil until the first slow tick
}

func (p *trackedProc) close() {
	p.statm.Close()
	p.task.Close()
	p.pstat.Close()
	for _, t := range p.threads {
		t.close()
	}
}

// discover lists ROOT and adopts every new process whose parent is in the
// tree. Pids known not to be in the tree are remembered until they vanish
// from the listing, so each is read at most once.
func (s *Sampler) discover(t int64) {
	s.gen++
	gen := s.gen
	s.cands = s.cands[:0]
	err := s.procRoot.EachNumeric(func(pid int) {
		if _, ok := s.procs[pid]; ok {
			return
		}
		if _, ok := s.notDesc[pid]; ok {
			s.notDesc[pid] = gen
			return
		}
		st, err := procfs.ReadStatOnce(s.fs.PidPath(pid, "stat"))
		if err != nil {
			if isEMFILE(err) {
				s.readError(t, pid, err) // a process not looked at: gpufeed's failure
			}
			return // vanished before it could be read: not ours to count
		}
		if start, ok := s.observer[pid]; ok && start == st.StartTime {
			s.notDesc[pid] = gen // gpufeed itself, or what started it
			return
		}
		s.cands = append(s.cands, candidate{pid: pid, st: st})
	})
	if err != nil {
		s.readError(t, 0, err)
		return
	}
	// A child and its parent can appear in the same listing, in any order:
	// adopt until nothing changes.
	for changed := true; changed; {
		changed = false
		for i := range s.cands {
			c := &s.cands[i]
			if c.pid == 0 {
				continue
			}
			if _, ok := s.procs[c.st.PPID]; ok {
				s.addProc(c.pid, c.st, t)
				c.pid = 0
				changed = true
			}
		}
	}
	for _, c := range s.cands {
		if c.pid != 0 {
			s.notDesc[c.pid] = gen
		}
	}
	for pid, g := range s.notDesc {
		if g != gen {
			delete(s.notDesc, pid)
		}
	}
}

// addProc starts tracking a process: kept files for the fast tier, and the
// facts read once (command line, allowlisted environment, limits, affinity).
func (s *Sampler) addProc(pid int, st procfs.Stat, t int64) {
	key := timeline.ProcKey{PID: pid, StartTime: st.StartTime}
	if _, seen := s.tl.Procs[key]; seen {
		return
	}
	info := &timeline.ProcInfo{Key: key, PPID: st.PPID, Comm: string(st.Comm), FirstSeen: t, LastSeen: t}
	p := &trackedProc{pid: pid, info: info, threads: map[int]*trackedThread{}, mainComm: slices.Clone(st.Comm),
		factChecks: execRecheckSlowTicks}
	var err error
	if p.statm, err = procfs.OpenKept(s.fs.PidPath(pid, "statm"), procfs.PrivProcMount); err != nil {
		if procfs.IsVanished(err) {
			s.tl.Counts.VanishedProcs++
			return
		}
		s.readError(t, pid, err)
		return
	}
	if p.task, err = procfs.OpenDir(s.fs.PidPath(pid, "task")); err != nil {
		p.statm.Close()
		if procfs.IsVanished(err) {
			s.tl.Counts.VanishedProcs++
			return
		}
		s.readError(t, pid, err)
		return
	}
	s.schedWatch(pid, t) // before its threads are opened: their rows exist
	s.readLayout(p, t)
	s.readOnceFacts(p, t)
	s.tl.Procs[key] = info
	s.procs[pid] = p
	s.record(func(r Recorder) error { return r.WriteProc(info) })
	if t > 0 {
		s.event(timeline.Event{T: t, Kind: timeline.EventProcStart, PID: pid, Text: info.Comm})
	}
	p.scanPID, p.scanned = s.pidNow, s.pidKnown
	s.scanThreads(p, t)
}

// execRecheckSlowTicks is how many slow ticks (about a second each) a new
// process's command line is checked for an exec that kept the name: fork to
// exec takes milliseconds, so two checks catch it with a wide margin.
const execRecheckSlowTicks = 2

// cmdlineChanged reports whether the process's command line differs from
// the one recorded (an exec the comm did not reveal).
func (s *Sampler) cmdlineChanged(p *trackedProc) bool {
	args, err := s.fs.ReadCmdline(p.pid)
	return err == nil && !slices.Equal(args, p.info.Cmdline)
}

// readLayout reads where the process's program lies in its address space
// and reports whether it changed since the last reading: the layout never
// changes during a program's life, so a change is an exec, even one of the
// same program with the same command line (a launcher re-running its own
// script for each rank) that neither the name nor the command line shows.
func (s *Sampler) readLayout(p *trackedProc, t int64) (execd bool) {
	l, err := procfs.ReadLayout(s.fs.PidPath(p.pid, "stat"))
	if err != nil {
		if !procfs.IsVanished(err) && procfs.AsDenied(err) == nil {
			s.readError(t, p.pid, err)
		}
		return false
	}
	if !l.Visible() {
		return false
	}
	tl := timeline.Layout{StartCode: l.StartCode, EndCode: l.EndCode, StartStack: l.StartStack,
		StartData: l.StartData, EndData: l.EndData, StartBrk: l.StartBrk,
		ArgStart: l.ArgStart, ArgEnd: l.ArgEnd, EnvStart: l.EnvStart, EnvEnd: l.EnvEnd}
	old := p.info.Layout
	if old != nil && *old == tl {
		return false
	}
	p.info.Layout = &tl
	return old != nil
}

// readOnceFacts reads a process's command line, environment and open-file
// limit (again after an exec). Denied fields become NotVisible facts.
func (s *Sampler) readOnceFacts(p *trackedProc, t int64) {
	info := p.info
	if args, err := s.fs.ReadCmdline(p.pid); err == nil {
		info.Cmdline = args
	} else {
		s.fieldError(p, t, "cmdline", err)
	}
	if env, err := s.fs.ReadEnv(p.pid); err == nil {
		info.Env = env
	} else {
		s.fieldError(p, t, "env", err)
	}
	if nf, err := s.fs.NoFile(p.pid); err == nil {
		info.NoFileSoft, info.NoFileHard = &nf.Soft, &nf.Hard
	} else {
		s.fieldError(p, t, "nofile", err)
	}
	if st, err := procfs.ReadStatus(s.fs.PidPath(p.pid, "status")); err == nil {
		info.CPUsAllowed, info.MemsAllowed = st.CPUsAllowedList, st.MemsAllowedList
	} else {
		s.fieldError(p, t, "status", err)
	}
}

// fieldError records why a per-process field could not be read: denied
// becomes NotVisible[field]; vanished is left to the fast tier to notice.
func (s *Sampler) fieldError(p *trackedProc, t int64, field string, err error) {
	if d := procfs.AsDenied(err); d != nil {
		if p.info.NotVisible == nil {
			p.info.NotVisible = map[string]string{}
		}
		p.info.NotVisible[field] = d.NotVisible()
		return
	}
	if procfs.IsVanished(err) {
		return
	}
	s.readError(t, p.pid, err)
}

// scanThreads lists task/ and starts tracking new threads.
func (s *Sampler) scanThreads(p *trackedProc, t int64) {
	s.taskScans++
	var fresh []int
	listed := map[int]bool{}
	err := p.task.EachNumeric(func(tid int) {
		if len(p.failed) > 0 {
			listed[tid] = true
		}
		if _, ok := p.threads[tid]; !ok && !p.failed[tid] {
			fresh = append(fresh, tid)
		}
	})
	for tid := range p.failed {
		if !listed[tid] {
			delete(p.failed, tid)
		}
	}
	if err != nil {
		if !procfs.IsVanished(err) {
			s.readError(t, p.pid, err)
		}
		return
	}
	if len(fresh) == 0 {
		return
	}
	facts := s.kernelFacts(p, fresh, t)
	for _, tid := range fresh {
		var fact *schedbpf.Facts
		if f, ok := facts[tid]; ok {
			fact = &f
		}
		th, err := s.openThread(p, tid, t, fact)
		if err != nil {
			if procfs.IsVanished(err) || errors.Is(err, errGone) {
				s.tl.Counts.VanishedThreads++
			} else {
				s.readError(t, p.pid, err)
			}
			if p.failed == nil {
				p.failed = map[int]bool{}
			}
			p.failed[tid] = true
			continue
		}
		p.threads[tid] = th
	}
	p.order = p.order[:0]
	for _, th := range p.threads {
		p.order = append(p.order, th)
	}
	slices.SortFunc(p.order, func(a, b *trackedThread) int { return a.tid - b.tid })
}

// sampleProc reads one process and its threads for this tick.
func (s *Sampler) sampleProc(p *trackedProc, tk *timeline.Tick, t int64, slow, full bool) {
	// Fast tier: a changed thread count (task/'s link count) means threads
	// came or went. The slow tier rescans to catch same-count churn (one
	// thread exited, another started), but only when a pid was handed out
	// since the last scan: a new thread is a new pid. Listing a 1,000-thread
	// process's task/ costs about 4 ms.
	sameCount := false // the count is known and unchanged (else every thread is read)
	if nl, err := p.task.NLink(); err == nil {
		sameCount = int(nl)-2 == len(p.threads)+len(p.failed)
		if !sameCount || full || slow && (!s.pidKnown || !p.scanned || p.scanPID != s.pidNow) {
			p.scanPID, p.scanned = s.pidNow, s.pidKnown
			s.scanThreads(p, t)
		}
	}
	skipDormant := s.sched == nil && sameCount && !full && s.dormantTick(p, t, slow)
	b, err := p.statm.ReadInto(s.buf)
	var sm procfs.Statm
	if err == nil {
		err = procfs.ParseStatm(b, &sm)
	}
	if err != nil {
		if procfs.IsVanished(err) {
			p.gone = true
			return
		}
		s.readError(t, p.pid, err)
	}
	live := 0
	mainAlive := false
	var childTicks uint64
	first := len(tk.Threads)
	for i := 0; i < len(p.order); i++ {
		th := p.order[i]
		var ts threadSample
		var err error
		switch {
		case s.sched != nil:
			ts, err = s.sampleThreadBPF(p, th, slow, full)
		case th.preDone:
			ts, err, th.preDone = th.pre, th.preErr, false
		case skipDormant && th.dormant:
			ts = threadSample{ThreadSample: th.sample(p.pid)}
			s.carried++
		default:
			ts, err = s.readThread(p, th, t, full || slow && th.state != 'S')
		}
		if err != nil {
			if !procfs.IsVanished(err) && !errors.Is(err, errGone) {
				s.readError(t, p.pid, err)
			}
			s.threadExit(p, th, t)
			p.order = slices.Delete(p.order, i, i+1)
			i--
			continue
		}
		live++
		if th.tid == p.pid {
			mainAlive = true
			childTicks = th.childTicks
			if ts.Comm != nil && string(ts.Comm) != string(p.mainComm) {
				// exec (or a rename of the process): re-read what exec changes.
				p.mainComm = append(p.mainComm[:0], ts.Comm...)
				p.info.Comm = string(p.mainComm)
				p.needFacts = true
			}
			if slow && !p.needFacts && p.factChecks > 0 {
				p.factChecks--
				p.needFacts = s.cmdlineChanged(p)
			}
			if p.needFacts && slow {
				p.needFacts = false
				s.readOnceFacts(p, t)
			}
		}
		th.sampleAt = len(tk.Threads) - first
		if slow {
			s.slowThread(p, th, &ts.ThreadSample, t, full)
		} else if th.wantBlk {
			s.catchAsleep(p, th, &ts.ThreadSample)
		}
		tk.Threads = append(tk.Threads, ts.ThreadSample)
		th.info.LastSeen = t
	}
	if len(s.waitsPending) > 0 {
		s.kernelWaits(p, tk.Threads[first:], t)
	}
	if len(s.factsPending) > 0 {
		s.kernelNames(p, t)
	}
	s.endDormantTick(p, skipDormant)
	// A user process without an address space is exiting (exit_mm ran
	// before the threads turned zombie): its memory is not "0 bytes".
	if live == 0 || !mainAlive && sm.Resident == 0 || sm.Size == 0 && p.hadMM {
		p.gone = true
		return
	}
	p.hadMM = p.hadMM || sm.Size > 0
	p.info.LastSeen = t
	ps := timeline.ProcSample{PID: p.pid, Threads: live, RSSPages: sm.Resident}
	if mainAlive {
		ps.ChildCPUTicks = &childTicks
	}
	if slow {
		s.slowProc(p, &ps, t)
	}
	if full || time.Duration(t) >= p.nextRollup && s.rollupAllowed(p, t) {
		s.rollup(p, &ps, t)
	}
	tk.Procs = append(tk.Procs, ps)
}

// slowProc reads the once-a-second per-process files.
func (s *Sampler) slowProc(p *trackedProc, ps *timeline.ProcSample, t int64) {
	if s.readLayout(p, t) {
		// exec'd since the last slow tick: its command line and environment
		// are the new program's (a rank's RANK, where the parent had none).
		s.readOnceFacts(p, t)
	}
	if st, err := procfs.ReadStatus(s.fs.PidPath(p.pid, "status")); err == nil {
		if st.CPUsAllowedList != "" {
			p.info.CPUsAllowed = st.CPUsAllowedList
		}
		if st.MemsAllowedList != "" {
			p.info.MemsAllowed = st.MemsAllowedList
		}
	} else {
		s.fieldError(p, t, "status", err)
	}
	if io, err := s.fs.ReadIO(p.pid); err == nil {
		ps.IO = &timeline.IO{RChar: io.RChar, WChar: io.WChar, SyscR: io.SyscR, SyscW: io.SyscW,
			ReadBytes: io.ReadBytes, WriteBytes: io.WriteBytes}
	} else {
		s.fieldError(p, t, "io", err)
	}
	if n, err := s.fs.FDCount(p.pid); err == nil {
		ps.FDs = &n
	} else {
		s.fieldError(p, t, "fds", err)
	}
	s.slowCgroup(p, ps, t)
}

// rollup reads smaps_rollup within its CPU budget: after a read costing c,
// the next waits max(RollupEvery, c/RollupBudget). A process forked from
// its parent (no exec since) also has both smaps read, within the same
// budget: what it copied of the memory it inherited.
func (s *Sampler) rollup(p *trackedProc, ps *timeline.ProcSample, t int64) {
	// The cost is the OS thread's CPU time: the goroutine stays on that
	// thread while it is measured (a goroutine moved to another thread
	// between the two readings once made a cost negative, and the budget
	// with it).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru0)
	r, err := s.fs.ReadRollup(p.pid)
	if err != nil {
		s.fieldError(p, t, "pss", err)
	} else {
		ps.PSSBytes, ps.USSBytes = &r.PSS, &r.USS
	}
	if parent := s.forkParent(p); parent != nil {
		if in, ok := s.inherited(p, parent, t); ok {
			ps.Inherited = &in
		}
	}
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru1)
	cost := time.Duration(max(0, tvNS(ru1.Utime)+tvNS(ru1.Stime)-tvNS(ru0.Utime)-tvNS(ru0.Stime)))
	s.rollupSpent += cost
	p.rollupHeld = false
	wait := s.cfg.RollupEvery
	if budgeted := time.Duration(float64(cost) / s.cfg.RollupBudget); budgeted > wait {
		wait = budgeted
		s.tl.Counts.RollupSkipped++
	}
	p.nextRollup = time.Duration(t) + wait
}

// rollupAllowed says a due reading may be taken: a process's first (where
// the window starts for it: at the first tick, or when it was forked), or
// one while the job's memory readings so far (the first and last ticks'
// included) have used at most RollupJobBudget of the time since the start.
// A reading held back is counted once until it is taken, and the one due
// longest goes first: with room for a reading, a process waits while
// another held back was due before it (in pid order alone, the low pids,
// due again every RollupEvery, would take every reading of a job whose
// round of readings outlasts that period).
func (s *Sampler) rollupAllowed(p *trackedProc, t int64) bool {
	if p.nextRollup == 0 {
		return true
	}
	if float64(s.rollupSpent) <= s.cfg.RollupJobBudget*float64(t) && !s.heldBefore(p) {
		return true
	}
	if !p.rollupHeld {
		p.rollupHeld = true
		s.tl.Counts.RollupSkipped++
	}
	return false
}

// heldBefore says another process's memory reading, held back by the
// job's budget, was due before p's.
func (s *Sampler) heldBefore(p *trackedProc) bool {
	for _, q := range s.procs {
		if q != p && q.rollupHeld && !q.gone && q.nextRollup < p.nextRollup {
			return true
		}
	}
	return false
}

// forkParent is p's parent when p was forked from it and has not exec'd
// since (the same memory layout, both in the tree); nil otherwise.
func (s *Sampler) forkParent(p *trackedProc) *trackedProc {
	parent := s.procs[p.info.PPID]
	if parent == nil || parent.gone || p.info.Key.PID == s.cfg.PID || p.info.Layout == nil || parent.info.Layout == nil ||
		*p.info.Layout != *parent.info.Layout {
		return nil
	}
	return parent
}

// parentMaps are a parent's anonymous mappings, read once per tick for all
// its forked children.
type parentMaps struct {
	t    int64
	maps []procfs.AnonMapping
	err  error
}

// inherited reads what p holds of the anonymous mappings it inherited from
// parent: both smaps, the parent's once per tick.
func (s *Sampler) inherited(p, parent *trackedProc, t int64) (timeline.Inherited, bool) {
	pm := s.parentAnon[parent.pid]
	if pm == nil || pm.t != t {
		if s.parentAnon == nil {
			s.parentAnon = map[int]*parentMaps{}
		}
		pm = &parentMaps{t: t}
		pm.maps, pm.err = s.fs.AnonMappings(parent.pid)
		s.parentAnon[parent.pid] = pm
		if pm.err != nil {
			s.fieldError(parent, t, "smaps", pm.err)
		}
	}
	if pm.err != nil {
		return timeline.Inherited{}, false
	}
	maps, err := s.fs.AnonMappings(p.pid)
	if err != nil {
		s.fieldError(p, t, "smaps", err)
		return timeline.Inherited{}, false
	}
	in := procfs.MatchInherited(pm.maps, maps)
	return timeline.Inherited{Mappings: in.Mappings, CopiedBytes: in.Copied, SharedBytes: in.Shared, ParentRSSBytes: in.ParentRSS}, true
}

func (s *Sampler) procExit(p *trackedProc, t int64) {
	// The process's threads went with it: marked exited, not counted as
	// vanished, and no thread-exit event each (proc-exit says it).
	for _, th := range p.order {
		s.release(th)
		th.info.Exited = true
	}
	p.order = nil
	p.close()
	p.info.Exited = true
	s.schedUnwatch(p.pid)
	delete(s.procs, p.pid)
	delete(s.parentAnon, p.pid)
	s.event(timeline.Event{T: t, Kind: timeline.EventProcExit, PID: p.pid, Text: p.info.Comm})
}

func (s *Sampler) threadExit(p *trackedProc, th *trackedThread, t int64) {
	s.release(th)
	th.info.Exited = true
	delete(p.threads, th.tid)
	s.tl.Counts.VanishedThreads++
	s.event(timeline.Event{T: t, Kind: timeline.EventThreadExit, PID: p.pid, TID: th.tid, Text: th.info.Comm})
}

func (p *trackedProc) String() string { return fmt.Sprintf("pid %d (%s)", p.pid, p.info.Comm) }

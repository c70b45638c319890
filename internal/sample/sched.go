package sample

import (
	"cmp"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"

	"golang.org/x/sys/unix"
)

// The scheduling source. With --sched bpf (internal/schedbpf's counters), a
// tick reads every watched thread's run time, run-queue wait, slices,
// switches, state and CPU, the kernel's own counters that schedstat and
// status print, with one task iterator per process, where /proc costs a
// schedstat pread per thread (and a stat pread for each that ran); stat
// (utime/stime, name, the reaped children's CPU) moves to the slow tier,
// read for the threads that ran since their last reading, and the slow
// tier's context switches come from the counters too. wchan and the system
// call in progress stay /proc's, on the slow tier as before. Nothing runs
// on the scheduler's path but the wake-up program, attached for the tick
// after each slow tick (a tenth of the window at the defaults): the waker
// graph is that sample.
//
// The counters are /proc's own, so a series is the same whichever source
// filled it, with no base to keep, and a fall back to /proc mid-run
// continues it. (schedbpf's other mode, the events counted by programs on
// every switch, is not the sampler's: it cost the job too much.)

// SchedError is a --sched bpf run whose programs could not be loaded.
type SchedError struct{ Err error }

func (e *SchedError) Error() string { return "--sched bpf: " + e.Err.Error() }
func (e *SchedError) Unwrap() error { return e.Err }

// hostProc says whether the sampled tree is this host's /proc, the only
// one the kernel's events describe.
func (s *Sampler) hostProc() bool { return s.fs.Proc == "/proc" || s.fs.Proc == "" }

// startSched chooses the source and starts the events where chosen.
func (s *Sampler) startSched() error {
	mode := s.cfg.Sched
	if !s.hostProc() {
		return nil // a fixture tree: nothing to trace, nothing to say
	}
	s.schedSrc, s.waitsSrc = timeline.SchedProc, timeline.SchedProc
	if mode == "" || mode == SchedProc {
		return nil
	}
	tr, err := schedbpf.Start(nil, schedbpf.Options{NoFollow: true, MaxThreads: schedTableSize(s.fs), Counters: true,
		WaitsFromProc: s.cfg.waitsFromProc})
	if err != nil {
		if mode == SchedBPF {
			return &SchedError{Err: err}
		}
		var u *bpfcap.Unavailable
		if errors.As(err, &u) {
			s.schedNotBPF = u.Missing
		} else {
			s.schedNotBPF = err.Error()
		}
		return nil
	}
	s.sched = tr
	s.schedSrc = timeline.SchedBPF
	var why error
	if s.waitsKernel, why = tr.ReadsWaits(); s.waitsKernel {
		s.waitsSrc = timeline.SchedBPF
	} else if why != nil {
		s.waitsNotBPF = why.Error()
	}
	// stat's utime and stime are the task's CPU times scaled as the
	// kernel computes them, except on a CPU whose time is accounted at
	// kernel entry and exit (nohz_full): there stat adds the time since,
	// which the program cannot see. Such a host reads stat.
	s.factsKernel = s.waitsKernel && !nohzFull(s.fs)
	return nil
}

// schedTableSize sizes the threads' table, where the wake-up program keeps
// each woken thread's waker in progress: four times the host's tasks
// (loadavg's fourth field), rounded up to a power of two, 8,192 to 65,536.
// A thread past it has its wake-ups counted in the wakers' table directly.
// It sizes the counters' mapped rows too (the threads of all watched
// processes): past them, the reading goes on one iterator step per thread.
func schedTableSize(fs procfs.FS) int {
	n := 8192
	if b, err := os.ReadFile(fs.ProcPath("loadavg")); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if v, err := strconv.Atoi(total); err == nil {
					for n < 4*v && n < 65536 {
						n *= 2
					}
				}
			}
		}
	}
	return n
}

// schedFallback stops the kernel's counters after a failed reading: the
// rest of the run reads /proc, whose counters are the same, so the series
// goes on.
func (s *Sampler) schedFallback(t int64, err error) {
	s.readError(t, 0, err)
	s.sched.Close()
	s.sched = nil
	if s.waitsKernel {
		s.waitsKernel, s.waitsSrc = false, timeline.SchedProc
		s.waitsNotBPF = "reading the kernel's counters failed mid-window"
	}
	s.schedSrc = timeline.SchedProc
	s.schedNotBPF = "reading the kernel's counters failed mid-window: " + err.Error()
}

func (s *Sampler) stopSched() {
	if s.sched != nil {
		s.sched.Close()
		s.sched = nil
		s.waitsKernel = false
	}
}

// nohzFull says whether the host runs CPUs in full dynticks mode
// (nohz_full=), where utime and stime are accounted at kernel entry and exit.
func nohzFull(fs procfs.FS) bool {
	b, err := os.ReadFile(fs.SysPath("devices/system/cpu/nohz_full"))
	if err != nil {
		return false // no such file: a kernel without full dynticks
	}
	v := strings.TrimSpace(string(b))
	return v != "" && v != "(null)"
}

// kernelFacts reads the stat facts of a process's threads first seen (not
// its main thread, whose stat also carries the reaped children's CPU), in
// the kernel, in one program run: opening and reading each thread's stat
// file was about 18 ms of a 1,000-thread job's adoption in this project's
// virtual machine. A thread missing from the result is opened as before.
func (s *Sampler) kernelFacts(p *trackedProc, fresh []int, t int64) map[int]schedbpf.Facts {
	if !s.factsKernel || s.sched == nil {
		return nil
	}
	tids := make([]int, 0, len(fresh))
	for _, tid := range fresh {
		if tid != p.pid {
			tids = append(tids, tid)
		}
	}
	if len(tids) == 0 {
		return nil
	}
	fs, err := s.sched.ReadFacts(p.pid, tids)
	if err != nil {
		if !errors.Is(err, unix.ESRCH) {
			s.readError(t, p.pid, err)
			s.factsKernel = false
		}
		return nil
	}
	out := make(map[int]schedbpf.Facts, len(fs))
	for _, f := range fs {
		out[f.TID] = f
	}
	return out
}

// kernelNames reads, on the last tick, the names of the threads queued in
// factsPending (their stat never opened: asleep since they were first
// seen), in the kernel in one program run, where /proc's reading of every
// thread's stat would open them all: a thread renamed by another while it
// slept gets its new name. Where the reading fails, stat is read.
func (s *Sampler) kernelNames(p *trackedProc, t int64) {
	pending := s.factsPending
	defer func() { s.factsPending = s.factsPending[:0] }()
	tids := make([]int, 0, len(pending))
	for _, th := range pending {
		tids = append(tids, th.tid)
	}
	var got map[int]string // nil: not read in the kernel
	if s.factsKernel {
		if fs, err := s.sched.ReadFacts(p.pid, tids); err == nil {
			got = make(map[int]string, len(fs))
			for _, f := range fs {
				got[f.TID] = f.Comm
			}
		} else if !errors.Is(err, unix.ESRCH) {
			s.readError(t, p.pid, err)
		}
	}
	for _, th := range pending {
		if got == nil {
			s.applyStat(p, th) // its failure is the thread's exit, seen next time
			continue
		}
		if c, ok := got[th.tid]; ok && c != string(th.comm) {
			th.comm = append(th.comm[:0], c...)
			th.info.Comm = c
		}
	}
}

// kernelWaits reads where the threads readWait queued wait, in the kernel,
// in one reading for the process, and keeps each in its sample (samples:
// the process's this tick). A thread missing from the reading exited since
// its counters were read; its exit is seen on the next tick. Where the
// reading fails, /proc is read for them, and for the rest of the run.
func (s *Sampler) kernelWaits(p *trackedProc, samples []timeline.ThreadSample, t int64) {
	defer func() { s.waitsPending = s.waitsPending[:0] }()
	s.waitTIDs = s.waitTIDs[:0]
	for _, th := range s.waitsPending {
		s.waitTIDs = append(s.waitTIDs, th.tid)
	}
	var got map[int]schedbpf.Wait
	// The program looks each thread up by its tid: tens of µs for a few
	// threads, where /proc costs about 50 µs a thread.
	if s.waitsKernel {
		if ws, err := s.sched.ReadWaits(p.pid, s.waitTIDs); err == nil {
			got = make(map[int]schedbpf.Wait, len(ws))
			for _, w := range ws {
				got[w.TID] = w
			}
		} else if !errors.Is(err, unix.ESRCH) {
			s.readError(t, p.pid, err)
			s.waitsKernel, s.waitsSrc = false, timeline.SchedProc
			s.waitsNotBPF = "reading them in the kernel failed mid-window: " + err.Error()
		}
	}
	// The pending threads' samples by their place, not a lookup of each of
	// the process's samples: a 1,000-thread job's active threads are
	// queued on most ticks (catchAsleep).
	for _, th := range s.waitsPending {
		if th.sampleAt >= len(samples) || samples[th.sampleAt].TID != th.tid {
			continue // not this tick's sample (cannot happen: queued as it is appended)
		}
		ts := &samples[th.sampleAt]
		if got == nil { // not read in the kernel: /proc
			b, woke := s.blocked(p.pid, th.tid)
			keepWait(th, ts, b, woke)
			continue
		}
		w, ok := got[ts.TID]
		if !ok {
			continue
		}
		if w.Running {
			keepWait(th, ts, nil, true)
			continue
		}
		sc := procfs.Syscall{Number: w.Number}
		if w.Number >= 0 {
			sc.InSyscall, sc.Name, sc.Args = true, procfs.SyscallName(s.arch, w.Number), w.Args
		}
		keepWait(th, ts, s.blockedOf(p.pid, sc, nil, w.Wchan, nil), false)
	}
}

// schedWatch watches a newly adopted process's threads, and reads the
// counters again, so that the threads about to be opened take their first
// counters from the reading (schedBase), not from a schedstat file each:
// a 1,000-thread process's adoption opened 1,000 files, about 12 ms.
func (s *Sampler) schedWatch(pid int, t int64) {
	if s.sched == nil {
		return
	}
	if err := s.sched.Add(pid); err != nil {
		s.schedFallback(t, err)
		return
	}
	s.schedRead(t)
}

// schedRead reads every watched thread once for the tick.
func (s *Sampler) schedRead(t int64) {
	if s.sched == nil {
		return
	}
	err := s.sched.Read(&s.snap)
	if err == nil && s.cfg.schedFailAt > 0 && time.Duration(t) >= s.cfg.schedFailAt {
		err = errors.New("a failure the test asked for")
	}
	if err != nil {
		s.schedFallback(t, err)
		return
	}
	s.schedReads++
}

// schedBase takes a new thread's first counters: its row in the tick's
// reading, or, for a thread that started after it, its schedstat.
func (s *Sampler) schedBase(p *trackedProc, th *trackedThread) error {
	if row := s.snap.GetAt(th.tid, &th.rowAt); row != nil && row.PID == p.pid {
		th.lastSched = procfs.Schedstat{RunNS: row.RunNS, WaitNS: row.WaitNS, Slices: row.Slices}
		return nil
	}
	b, err := s.readSched(p, th)
	if err != nil {
		return err
	}
	return procfs.ParseSchedstat(b, &th.lastSched)
}

// sampleThreadBPF is the hot path with the kernel's counters: the thread's
// row in the tick's reading, no file read (the row is never behind the
// thread's first schedstat, read after the tick's reading for a thread that
// started then). stat is read on the slow tier (fresh)
// when the thread ran since its last reading, and on the last tick; a
// process's main thread's every tick it ran, as /proc's path does: its
// stat carries the reaped children's CPU (cutime+cstime), which shows
// children too short-lived to be seen tick by tick (a fork storm, a
// subprocess per sample).
func (s *Sampler) sampleThreadBPF(p *trackedProc, th *trackedThread, fresh, full bool) (threadSample, error) {
	var out threadSample
	ss := th.lastSched
	if row := s.snap.GetAt(th.tid, &th.rowAt); row != nil && row.PID == p.pid {
		ss = procfs.Schedstat{RunNS: max(th.lastSched.RunNS, row.RunNS),
			WaitNS: max(th.lastSched.WaitNS, row.WaitNS), Slices: max(th.lastSched.Slices, row.Slices)}
		if row.State != 0 {
			th.state = row.State
		}
		if row.CPU >= 0 {
			th.cpu = row.CPU
		}
		th.row = *row
		th.haveRow = true
	} else if s.snap.Complete && (th.haveRow || th.openedRead < s.schedReads) {
		// The reading holds every live thread of the process, and this
		// one was there before it was made: it exited since the last
		// (or left by another thread's exec). A thread opened after the
		// reading (this tick's listing) waits for the next.
		return out, errGone
	}
	if th.statJustRead {
		th.statJustRead = false
		th.statSched = ss
	} else if full && th.lazyStat && ss == th.statSched && s.factsKernel {
		s.factsPending = append(s.factsPending, th) // its name, read in the kernel with the others (kernelNames)
	} else if full || !th.haveStat || (fresh || th.tid == p.pid) && ss != th.statSched {
		comm, err := s.applyStat(p, th)
		if err != nil {
			return out, err
		}
		th.statSched = ss
		out.Comm = comm
	}
	th.lastSched = ss
	out.ThreadSample = timeline.ThreadSample{TID: th.tid, PID: p.pid, State: th.state,
		UTime: th.utime, STime: th.stime, RunNS: ss.RunNS, WaitNS: ss.WaitNS, Slices: ss.Slices, CPU: th.cpu}
	return out, nil
}

// switchesBPF is the slow tier's context switches from the counters: the
// thread's row. ok false (no row yet): read status as /proc does.
func (s *Sampler) switchesBPF(th *trackedThread) (*timeline.Switches, bool) {
	if s.sched == nil || !th.haveRow {
		return nil, false
	}
	return &timeline.Switches{Voluntary: th.row.Voluntary, Involuntary: th.row.Involuntary}, true
}

// readWakers keeps the waker graph of the job's threads (the threads the
// timeline knows) at the end of the window.
func (s *Sampler) readWakers() {
	if s.sched == nil {
		return
	}
	if err := s.sched.SampleWakers(false); err != nil {
		s.readError(s.lastT(), 0, err)
	}
	edges, dropped, err := s.sched.Wakers()
	if err != nil {
		s.readError(s.lastT(), 0, err)
		return
	}
	ours := map[int]bool{}
	for k := range s.tl.Threads {
		ours[k.TID] = true
	}
	w := &timeline.Wakers{Dropped: dropped, Edges: []timeline.WakeEdge{}}
	for _, e := range edges {
		if ours[e.Wakee] {
			w.Edges = append(w.Edges, timeline.WakeEdge{Wakee: e.Wakee, Waker: e.Waker, WakerPID: e.WakerPID, WakerComm: e.WakerComm, Count: e.Count})
		}
	}
	slices.SortFunc(w.Edges, func(a, b timeline.WakeEdge) int {
		return cmp.Or(cmp.Compare(a.Wakee, b.Wakee), cmp.Compare(b.Count, a.Count), cmp.Compare(a.Waker, b.Waker))
	})
	kept := w.Edges[:0]
	for i, e := range w.Edges {
		if i >= timeline.MaxWakersPerThread && w.Edges[i-timeline.MaxWakersPerThread].Wakee == e.Wakee {
			continue
		}
		kept = append(kept, e)
	}
	w.Edges = kept
	w.SampledNS = int64(s.sched.WakersSampled())
	s.tl.Meta.Wakers = w
}

// wakerEvery is how many slow periods apart the wake-up program is
// attached, each time for a tenth of them.
const wakerEvery = 3

// sampleWakers attaches the wake-up program on every wakerEvery-th slow
// tick, for a tenth of wakerEvery slow periods (at the defaults, 100 ms
// ticks and a 1 s slow tier: on the first tick, for 300 ms every 3 s, a
// tenth of the window), at least one tick. Attaching and detaching patch
// the kernel's text (a static key and a static call: each a round of
// interrupts to every CPU), about 7 % of gpufeed's CPU on a 1,000-thread
// job when it was attached for one tick every second; the waker graph is
// scaled by the time it was attached, so longer, rarer spells count the
// same share of the window. An attach that fails stops the sampling,
// said once.
func (s *Sampler) sampleWakers(t int64, slow, full bool) {
	if s.sched == nil || s.wakersFailed {
		return
	}
	if slow {
		s.wakerSlow++
	}
	var on bool
	if s.wakersOn {
		on = !full && time.Duration(t-s.wakersSince) < s.cfg.SlowEvery*wakerEvery/10
	} else if on = slow && !full && (s.wakerSlow-1)%wakerEvery == 0; on {
		s.wakersSince = t
	}
	if err := s.sched.SampleWakers(on); err != nil {
		s.wakersFailed = true
		s.readError(t, 0, err)
		return
	}
	s.wakersOn = on
}

// schedUnwatch stops reading an exited process's threads.
func (s *Sampler) schedUnwatch(pid int) {
	if s.sched != nil {
		s.sched.Remove(pid)
	}
}

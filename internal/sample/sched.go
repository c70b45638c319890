package sample

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The scheduling source. With the scheduler's events counted in the kernel
// (internal/schedbpf), a tick reads every watched thread's run time,
// run-queue wait, slices, state and CPU in one batch lookup, where /proc
// costs a schedstat pread per thread (and a stat pread for each that ran);
// stat (utime/stime, name, the reaped children's CPU) moves to the slow
// tier, read for the threads that ran since their last reading, and the
// slow tier's context switches come from the events too (status is read
// once per thread, for the base). wchan and the system call in progress
// stay /proc's, on the slow tier as before.
//
// The counters stay on /proc's scale: when a thread is first seen its
// schedstat (and, at its first slow tick, its status) is read once and the
// difference to its row kept as the thread's base, so a series is the same
// whichever source filled it, and a fall back to /proc mid-run continues it.

// SchedError is a --sched bpf run whose events could not be loaded.
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
	s.schedSrc = timeline.SchedProc
	if mode == "" || mode == SchedProc {
		return nil
	}
	size := schedTableSize(s.fs)
	if s.cfg.schedTable > 0 {
		size = s.cfg.schedTable
	}
	tr, err := schedbpf.Start(nil, schedbpf.Options{NoFollow: true, MaxThreads: size})
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
	return nil
}

// schedTableSize sizes the threads' table: a batch lookup of a hash map
// walks every bucket, used or not, so a table sized for 65,536 threads cost
// most of a tick's reading on a 1,000-thread job. Four times the host's
// tasks now (loadavg's fourth field), rounded up to a power of two, 8,192
// to 65,536; a job that outgrows it falls back to /proc (schedRead).
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

// schedFallback stops the events after a failed reading: the rest of the
// run reads /proc (the bases keep the series continuous).
func (s *Sampler) schedFallback(t int64, err error) {
	s.readError(t, 0, err)
	s.sched.Close()
	s.sched = nil
	s.schedSrc = timeline.SchedProc
	s.schedNotBPF = "reading the scheduler's events failed mid-window: " + err.Error()
}

func (s *Sampler) stopSched() {
	if s.sched != nil {
		s.sched.Close()
		s.sched = nil
	}
}

// schedWatch watches a newly adopted process's threads.
func (s *Sampler) schedWatch(pid int, t int64) {
	if s.sched == nil {
		return
	}
	if err := s.sched.Add(pid); err != nil {
		s.schedFallback(t, err)
	}
}

// schedRead reads every watched thread once for the tick.
func (s *Sampler) schedRead(t int64) {
	if s.sched == nil {
		return
	}
	if err := s.sched.Read(&s.snap); err != nil {
		s.schedFallback(t, err)
		return
	}
	if s.snap.Dropped > 0 {
		// A thread without a row would read as not having run.
		s.schedFallback(t, fmt.Errorf("scheduler tracing: the threads' table is full (%d threads not counted)", s.snap.Dropped))
	}
}

// schedBase reads a new thread's schedstat and row, and keeps their
// difference as the thread's base.
func (s *Sampler) schedBase(p *trackedProc, th *trackedThread) error {
	b, err := s.readSched(p, th)
	if err != nil {
		return err
	}
	var ss procfs.Schedstat
	if err := procfs.ParseSchedstat(b, &ss); err != nil {
		return err
	}
	row, err := s.sched.Lookup(th.tid)
	if err != nil {
		return fmt.Errorf("scheduler tracing: thread %d: %w", th.tid, err)
	}
	th.lastSched = ss
	if row != nil && row.PID == p.pid {
		th.base = procfs.Schedstat{RunNS: sub(ss.RunNS, row.RunNS), WaitNS: sub(ss.WaitNS, row.WaitNS), Slices: sub(ss.Slices, row.Slices)}
	} else {
		th.base = ss
	}
	return nil
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// sampleThreadBPF is the hot path with the events: the thread's row in
// the tick's reading, no file read. stat is read on the slow tier (fresh)
// when the thread ran since its last reading, and on the last tick; a
// process's main thread's every tick it ran, as /proc's path does: its
// stat carries the reaped children's CPU (cutime+cstime), which shows
// children too short-lived to be seen tick by tick (a fork storm, a
// subprocess per sample).
func (s *Sampler) sampleThreadBPF(p *trackedProc, th *trackedThread, fresh, full bool) (threadSample, error) {
	var out threadSample
	ss := th.lastSched
	if row := s.snap.Get(th.tid); row != nil && row.PID == p.pid {
		if row.Exited {
			return out, errGone
		}
		ss = procfs.Schedstat{RunNS: max(th.lastSched.RunNS, th.base.RunNS+row.RunNS),
			WaitNS: max(th.lastSched.WaitNS, th.base.WaitNS+row.WaitNS), Slices: max(th.lastSched.Slices, th.base.Slices+row.Slices)}
		if row.State != 0 {
			th.state = row.State
		}
		if row.CPU >= 0 {
			th.cpu = row.CPU
		}
		th.row = *row
		th.haveRow = true
	}
	if th.statJustRead {
		th.statJustRead = false
		th.statSched = ss
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

// switchesBPF is the slow tier's context switches from the events: the
// thread's status read once (its base), its row's counts after. ok false:
// read status as /proc does.
func (s *Sampler) switchesBPF(p *trackedProc, th *trackedThread, t int64) (*timeline.Switches, bool) {
	if s.sched == nil {
		return nil, false
	}
	if !th.haveSwBase {
		st, err := procfs.ReadStatus(s.fs.TaskPath(p.pid, th.tid, "status"))
		if err != nil || !st.HaveCtxt {
			return nil, false
		}
		row, err := s.sched.Lookup(th.tid)
		if err != nil {
			s.schedFallback(t, err)
			return nil, false
		}
		th.swBase = timeline.Switches{Voluntary: st.VoluntaryCtxt, Involuntary: st.NonvoluntaryCtxt}
		if row != nil && row.PID == p.pid {
			th.swBase = timeline.Switches{Voluntary: sub(st.VoluntaryCtxt, row.Voluntary), Involuntary: sub(st.NonvoluntaryCtxt, row.Involuntary)}
		}
		th.haveSwBase = true
		return &timeline.Switches{Voluntary: st.VoluntaryCtxt, Involuntary: st.NonvoluntaryCtxt}, true
	}
	sw := th.swBase
	if th.haveRow {
		sw.Voluntary += th.row.Voluntary
		sw.Involuntary += th.row.Involuntary
	}
	if th.sw != nil {
		sw.Voluntary = max(sw.Voluntary, th.sw.Voluntary)
		sw.Involuntary = max(sw.Involuntary, th.sw.Involuntary)
	}
	return &sw, true
}

// readWakers keeps the waker graph of the job's threads (the threads the
// timeline knows) at the end of the window.
func (s *Sampler) readWakers() {
	if s.sched == nil {
		return
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
	s.tl.Meta.Wakers = w
}

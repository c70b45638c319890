package sample

import (
	"errors"
	"strconv"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// trackedThread is one live thread and its kept fast-tier files. stat and
// sched are nil when the descriptor limit was reached: such a thread is
// read by opening its files each tick (slower, never dropped).
type trackedThread struct {
	tid   int
	info  *timeline.ThreadInfo
	stat  *procfs.Kept
	sched *procfs.Kept
	comm  []byte
	// Last stat fields and the schedstat they were read with.
	state byte
	utime uint64
	stime uint64
	cpu   int
	// childTicks is the process's reaped children's CPU (cutime+cstime)
	// at the last stat reading.
	childTicks uint64
	haveStat   bool
	// statJustRead: openThread read stat a moment ago; the first sample uses it.
	statJustRead bool
	lastSched    procfs.Schedstat
	// prevSched is the schedstat read before lastSched; stillSince is when
	// the thread's schedstat last moved (or it was first read), and dormant
	// says it has not moved for a whole slow period (dormant.go).
	prevSched  procfs.Schedstat
	stillSince int64
	stillSet   bool
	dormant    bool
	// pre is its reading made ahead of the tick's loop (preDone), while
	// telling whether a dormant thread ran (dormant.go).
	pre     threadSample
	preErr  error
	preDone bool
	// The last slow-tier readings, carried forward while the thread has not
	// run since: a thread that did not run cannot have switched context,
	// changed system call or moved to another wait.
	sw       *timeline.Switches
	swSlices uint64 // schedstat slices when sw was read
	blk      *timeline.Blocked
	blkRunNS uint64 // schedstat run time when blk was read
	blkState byte
	haveBlk  bool
	// schedstat run time at the previous slow tick.
	slowRunNS uint64
	slowSeen  bool
	// sampleAt is the place of the thread's sample among its process's
	// this tick, where kernelWaits finds it.
	sampleAt int
	// wantBlk: the slow tick found the thread on a CPU or a run queue, so
	// where it waits was not read; the first tick of the period that finds
	// it asleep, having run since (slowRunNS), reads it (catchAsleep).
	wantBlk bool
	// With the kernel's counters (sched.go): the counters at its last stat
	// reading, its row in the last reading that had one, and where that
	// row was.
	statSched procfs.Schedstat
	row       schedbpf.Thread
	haveRow   bool
	rowAt     int // where its row was in the last reading (Snapshot.GetAt)
	// openedRead is the number of scheduler readings made when the
	// thread was opened: every reading after it has the thread while it
	// lives.
	openedRead int
	// lazyStat: its first stat facts were read in the kernel (kernelFacts)
	// and its stat file is not open yet: readStat opens it when first
	// needed (a thread that never runs never opens it).
	lazyStat bool
}

func (t *trackedThread) close() {
	t.stat.Close()
	t.sched.Close()
	t.stat, t.sched = nil, nil
}

// keptFiles counts the descriptors the thread holds.
func (t *trackedThread) keptFiles() int {
	n := 0
	if t.stat != nil {
		n++
	}
	if t.sched != nil {
		n++
	}
	return n
}

// release closes a thread's files and returns them to the budget.
func (s *Sampler) release(th *trackedThread) {
	s.kept -= th.keptFiles()
	th.close()
}

// threadSample is a ThreadSample plus the comm bytes read with it (aliasing
// the sampler's buffer until the next read).
type threadSample struct {
	timeline.ThreadSample
	Comm []byte
}

// openThread keeps a new thread's stat and schedstat open and reads its
// identity (start time, name). fact, where not nil, is its stat as read in
// the kernel (kernelFacts): nothing is opened until a reading needs it.
func (s *Sampler) openThread(p *trackedProc, tid int, t int64, fact *schedbpf.Facts) (*trackedThread, error) {
	th := &trackedThread{tid: tid, openedRead: s.schedReads, lazyStat: fact != nil}
	// Keep the two files open while the descriptor budget allows; past it
	// (a job with more threads than half the open-file limit) the thread is
	// read by opening its files each tick: slower, never dropped.
	if fact == nil && s.kept+2 <= s.keptBudget {
		var err error
		if th.stat, err = procfs.OpenKept(s.fs.TaskPath(p.pid, tid, "stat"), procfs.PrivProcMount); err != nil && !isEMFILE(err) {
			return nil, err
		}
		// With the kernel's counters schedstat is read at most once, for a
		// thread that started after the tick's reading.
		if s.sched == nil {
			if th.sched, err = procfs.OpenKept(s.fs.TaskPath(p.pid, tid, "schedstat"), procfs.PrivProcMount); err != nil && !isEMFILE(err) {
				th.close()
				return nil, err
			}
		}
	}
	s.kept += th.keptFiles()
	var st procfs.Stat
	if fact != nil {
		st = procfs.Stat{State: fact.State, UTime: fact.UTime, STime: fact.STime, Processor: fact.CPU,
			Comm: []byte(fact.Comm), StartTime: fact.StartTime}
	} else {
		b, err := s.readStat(p, th)
		if err == nil {
			err = procfs.ParseStat(b, &st)
		}
		if err != nil {
			s.release(th)
			return nil, err
		}
	}
	if st.State == 'Z' || st.State == 'X' {
		s.release(th)
		return nil, errGone
	}
	if s.sched != nil {
		if err := s.schedBase(p, th); err != nil {
			s.release(th)
			return nil, err
		}
	}
	th.comm = append([]byte(nil), st.Comm...)
	// This read is also the first sample's stat: do not read it twice.
	th.state, th.utime, th.stime, th.cpu, th.haveStat, th.statJustRead = st.State, st.UTime, st.STime, st.Processor, true, true
	th.childTicks = st.CUTime + st.CSTime
	key := timeline.ThreadKey{TID: tid, StartTime: st.StartTime}
	if old, ok := s.tl.Threads[key]; ok {
		// Seen before (a rescan after a transient read failure): keep one record.
		th.info = old
		old.Exited = false
	} else {
		th.info = &timeline.ThreadInfo{Key: key, PID: p.pid, Comm: string(th.comm), FirstSeen: t, LastSeen: t}
		s.tl.Threads[key] = th.info
		info := th.info
		s.record(func(r Recorder) error { return r.WriteThread(info) })
	}
	return th, nil
}

func isEMFILE(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// readStat reads the thread's stat into the shared buffer.
func (s *Sampler) readStat(p *trackedProc, th *trackedThread) ([]byte, error) {
	if th.lazyStat {
		th.lazyStat = false
		if s.kept+1 <= s.keptBudget {
			k, err := procfs.OpenKept(s.fs.TaskPath(p.pid, th.tid, "stat"), procfs.PrivProcMount)
			switch {
			case err == nil:
				th.stat = k
				s.kept++
			case !isEMFILE(err):
				return nil, err
			}
		}
	}
	if th.stat != nil {
		return th.stat.ReadInto(s.buf[:2048])
	}
	return readOnce(s.fs.TaskPath(p.pid, th.tid, "stat"), s.buf[:2048])
}

func (s *Sampler) readSched(p *trackedProc, th *trackedThread) ([]byte, error) {
	if th.sched != nil {
		return th.sched.ReadInto(s.buf[2048:2304])
	}
	return readOnce(s.fs.TaskPath(p.pid, th.tid, "schedstat"), s.buf[2048:2304])
}

// readOnce is the fallback when no descriptor could be kept.
func readOnce(path string, buf []byte) ([]byte, error) {
	k, err := procfs.OpenKept(path, procfs.PrivProcMount)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return k.ReadInto(buf)
}

// sampleThread is the hot path. schedstat is read first (one pread); stat
// (the second pread, and the costlier file to format) is read only when
// schedstat shows the thread ran, waited or was switched since the last
// read, or when fresh is set. A thread that has not run cannot have gained
// CPU time, changed state by itself (sleeping to stopped, to uninterruptible,
// to exited all happen in the thread's own context) or renamed itself, so
// its stat fields are carried forward. What this can miss: a thread woken
// but not yet run (runnable, shown with its previous state until it runs),
// and a rename written by another thread into /proc/TID/comm; the slow tier
// refreshes threads not known to be sleeping, and the final tick refreshes all.
func (s *Sampler) sampleThread(p *trackedProc, th *trackedThread, fresh bool) (threadSample, error) {
	var out threadSample
	b, err := s.readSched(p, th)
	if err != nil {
		return out, err
	}
	var ss procfs.Schedstat
	if err := procfs.ParseSchedstat(b, &ss); err != nil {
		return out, err
	}
	if th.statJustRead {
		th.statJustRead = false
	} else if fresh || !th.haveStat || ss != th.lastSched {
		comm, err := s.applyStat(p, th)
		if err != nil {
			return out, err
		}
		out.Comm = comm
	}
	th.prevSched, th.lastSched = th.lastSched, ss
	out.ThreadSample = th.sample(p.pid)
	return out, nil
}

// sample is the thread's sample from its last readings.
func (th *trackedThread) sample(pid int) timeline.ThreadSample {
	return timeline.ThreadSample{TID: th.tid, PID: pid, State: th.state, UTime: th.utime, STime: th.stime,
		RunNS: th.lastSched.RunNS, WaitNS: th.lastSched.WaitNS, Slices: th.lastSched.Slices, CPU: th.cpu}
}

// slowThread adds the once-a-second details: context switches, and for a
// thread asleep (S) or in uninterruptible wait (D), where it waits.
//
// Switch counts are re-read only when the thread was scheduled since the
// last reading (schedstat's slice count moved); otherwise they cannot have
// changed and are carried forward.
//
// Where a thread waits is read when it is informative: for a thread that ran
// during the last slow period (an active thread caught asleep: a launch
// thread in ioctl or futex), and once for a thread that has stayed asleep
// for a whole slow period (persistently blocked: where a frozen job is
// stuck), then carried forward until it runs again. The final tick reads
// whatever is still missing. An idle pool of a thousand threads thus costs
// no wchan or syscall reads at start-up.
func (s *Sampler) slowThread(p *trackedProc, th *trackedThread, ts *timeline.ThreadSample, t int64, final bool) {
	if th.sw != nil && ts.Slices == th.swSlices {
		ts.Switches = th.sw
	} else if sw, ok := s.switchesBPF(th); ok {
		th.sw, th.swSlices = sw, ts.Slices
		ts.Switches = sw
	} else {
		st, err := procfs.ReadStatus(s.fs.TaskPath(p.pid, th.tid, "status"))
		if err == nil && st.HaveCtxt {
			th.sw = &timeline.Switches{Voluntary: st.VoluntaryCtxt, Involuntary: st.NonvoluntaryCtxt}
			th.swSlices = ts.Slices
			ts.Switches = th.sw
		} else if err != nil && !procfs.IsVanished(err) && procfs.AsDenied(err) == nil {
			s.readError(t, p.pid, err)
		}
	}
	ranSinceSlow := th.slowSeen && ts.RunNS != th.slowRunNS
	idleWholePeriod := th.slowSeen && ts.RunNS == th.slowRunNS
	th.slowRunNS, th.slowSeen = ts.RunNS, true
	th.wantBlk = false
	if ts.State != 'S' && ts.State != 'D' {
		th.haveBlk = false
		// On a CPU or a run queue now: an active thread, whose waits the
		// slow tick missed. A thread that runs a third of the time and
		// sleeps on the device a third would go unread in every slow
		// tick of a 4 s window one time in five, its sleep unexplained.
		th.wantBlk = ts.State == 'R'
		return
	}
	if th.haveBlk && ts.RunNS == th.blkRunNS && ts.State == th.blkState {
		ts.Blocked = th.blk
		return
	}
	if !ranSinceSlow && !idleWholePeriod && !final {
		return // first sight of this thread: wait one slow period to tell active from idle
	}
	s.readWait(p, th, ts)
}

// readWait reads where the thread waits into its sample and keeps it, to be
// carried forward while the thread does not run.
//
// A thread that woke between its state reading and this one (the system
// call file says it runs) is not read: half a reading (the wait channel
// of the sleep it just left, without the call and its timeout) would make
// a poll loop's timed wake-ups look like work arriving. It is read on the
// first tick that finds it asleep again, as a thread the slow tick found
// running.
func (s *Sampler) readWait(p *trackedProc, th *trackedThread, ts *timeline.ThreadSample) {
	if s.waitsKernel {
		s.waitsPending = append(s.waitsPending, th) // read with the process's others (kernelWaits)
		return
	}
	b, woke := s.blocked(p.pid, th.tid)
	keepWait(th, ts, b, woke)
}

// keepWait keeps a wait read (woke: the thread was found running) in the
// thread's sample and state.
func keepWait(th *trackedThread, ts *timeline.ThreadSample, b *timeline.Blocked, woke bool) {
	if woke {
		ts.Blocked, th.haveBlk, th.wantBlk = nil, false, true
		return
	}
	ts.Blocked = b
	th.blk, th.blkRunNS, th.blkState, th.haveBlk = ts.Blocked, ts.RunNS, ts.State, true
}

// catchAsleep reads where an active thread waits on the first tick after
// a slow tick that missed it (wantBlk) to find it asleep, having run since
// (so the state is fresh, not carried from before it ran): the reading the
// slow tick would have made had it fallen in the sleep. It costs no more
// than that reading, once a slow period at most; a thread that never
// sleeps is never read.
func (s *Sampler) catchAsleep(p *trackedProc, th *trackedThread, ts *timeline.ThreadSample) {
	if ts.State != 'S' && ts.State != 'D' || ts.RunNS == th.slowRunNS {
		return
	}
	th.wantBlk = false
	s.readWait(p, th, ts)
}

// blocked reads the system call in progress, wchan and, for calls that
// wait on a descriptor, what that descriptor is. woke says the system call
// file found the thread running: it left its wait after its state was read,
// and nothing is returned. The call is read first: it says whether the
// wait returns by itself, which wchan cannot.
func (s *Sampler) blocked(pid, tid int) (blk *timeline.Blocked, woke bool) {
	sc, err := s.fs.ReadSyscall(pid, tid, s.arch)
	if err == nil && sc.Running {
		return nil, true
	}
	w, werr := s.fs.ReadWchan(pid, tid)
	return s.blockedOf(pid, sc, err, w, werr), false
}

// blockedOf is the wait a system call reading and a wait channel reading
// (from /proc or the kernel) say, errors included; nil where nothing was
// read.
func (s *Sampler) blockedOf(pid int, sc procfs.Syscall, err error, wchan string, werr error) *timeline.Blocked {
	b := &timeline.Blocked{}
	var denied []string
	if werr == nil {
		b.Wchan = wchan
	} else if d := procfs.AsDenied(werr); d != nil {
		denied = append(denied, "wchan "+d.NotVisible())
	}
	switch {
	case err == nil && sc.InSyscall:
		b.Syscall = sc.Name
		b.Timed = sc.Timed()
		if b.Syscall == "" {
			b.Syscall = "syscall " + strconv.Itoa(sc.Number)
		}
		if fd, ok := sc.FDArg(); ok {
			if target, err := s.fs.FDTarget(pid, fd); err == nil {
				b.On = target
			} else if d := procfs.AsDenied(err); d != nil {
				denied = append(denied, "fd "+d.NotVisible())
			}
		} else if sc.Name == "futex" || sc.Name == "futex_waitv" {
			b.On = "futex 0x" + strconv.FormatUint(sc.Args[0], 16)
		}
	case err != nil:
		if d := procfs.AsDenied(err); d != nil {
			denied = append(denied, "syscall "+d.NotVisible())
		}
	}
	if len(denied) > 0 {
		b.NotVisible = denied[0]
		for _, d := range denied[1:] {
			b.NotVisible += "; " + d
		}
	}
	if *b == (timeline.Blocked{}) {
		return nil
	}
	return b
}

// applyStat reads a thread's stat and keeps what it says (state, user and
// system time, CPU last run on, name, the reaped children's CPU); comm
// aliases the read buffer, valid until the next read. errGone for a
// thread that exited.
func (s *Sampler) applyStat(p *trackedProc, th *trackedThread) (comm []byte, err error) {
	b, err := s.readStat(p, th)
	if err != nil {
		return nil, err
	}
	var st procfs.Stat
	if err := procfs.ParseStat(b, &st); err != nil {
		return nil, err
	}
	if st.State == 'Z' || st.State == 'X' {
		return nil, errGone
	}
	if string(st.Comm) != string(th.comm) { // compiles to a comparison, no allocation
		th.comm = append(th.comm[:0], st.Comm...)
		th.info.Comm = string(th.comm)
	}
	th.state, th.utime, th.stime, th.cpu = st.State, st.UTime, st.STime, st.Processor
	th.childTicks = st.CUTime + st.CSTime
	th.haveStat = true
	return st.Comm, nil
}

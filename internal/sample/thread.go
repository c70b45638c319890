package sample

import (
	"errors"
	"strconv"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/probe/proc"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// trackedThread is one live thread and its kept fast-tier files. stat and
// sched are nil when the descriptor limit was reached: such a thread is
// read by opening its files each tick (slower, never dropped).
type trackedThread struct {
	tid   int
	info  *timeline.ThreadInfo
	stat  *proc.Kept
	sched *proc.Kept
	comm  []byte
	state byte
}

func (t *trackedThread) close() {
	t.stat.Close()
	t.sched.Close()
	t.stat, t.sched = nil, nil
}

// threadSample is a ThreadSample plus the comm bytes read with it (aliasing
// the sampler's buffer until the next read).
type threadSample struct {
	timeline.ThreadSample
	Comm []byte
}

// openThread keeps a new thread's stat and schedstat open and reads its
// identity (start time, name).
func (s *Sampler) openThread(p *trackedProc, tid int, t int64) (*trackedThread, error) {
	th := &trackedThread{tid: tid}
	var err error
	statPath := s.fs.TaskPath(p.pid, tid, "stat")
	if th.stat, err = proc.OpenKept(statPath, proc.PrivProcMount); err != nil && !isEMFILE(err) {
		return nil, err
	}
	if th.sched, err = proc.OpenKept(s.fs.TaskPath(p.pid, tid, "schedstat"), proc.PrivProcMount); err != nil && !isEMFILE(err) {
		th.close()
		return nil, err
	}
	var st proc.Stat
	b, err := s.readStat(p, th)
	if err == nil {
		err = proc.ParseStat(b, &st)
	}
	if err != nil {
		th.close()
		return nil, err
	}
	if st.State == 'Z' || st.State == 'X' {
		th.close()
		return nil, errGone
	}
	th.comm = append([]byte(nil), st.Comm...)
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
	k, err := proc.OpenKept(path, proc.PrivProcMount)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return k.ReadInto(buf)
}

// sampleThread is the hot path: two preads and two allocation-free parses.
func (s *Sampler) sampleThread(p *trackedProc, th *trackedThread) (threadSample, error) {
	var out threadSample
	b, err := s.readStat(p, th)
	if err != nil {
		return out, err
	}
	var st proc.Stat
	if err := proc.ParseStat(b, &st); err != nil {
		return out, err
	}
	if st.State == 'Z' || st.State == 'X' {
		return out, errGone
	}
	b, err = s.readSched(p, th)
	if err != nil {
		return out, err
	}
	var ss proc.Schedstat
	if err := proc.ParseSchedstat(b, &ss); err != nil {
		return out, err
	}
	if string(st.Comm) != string(th.comm) { // compiles to a comparison, no allocation
		th.comm = append(th.comm[:0], st.Comm...)
		th.info.Comm = string(th.comm)
	}
	th.state = st.State
	out.ThreadSample = timeline.ThreadSample{TID: th.tid, PID: p.pid, State: st.State,
		UTime: st.UTime, STime: st.STime, RunNS: ss.RunNS, WaitNS: ss.WaitNS, Slices: ss.Slices, CPU: st.Processor}
	out.Comm = st.Comm
	return out, nil
}

// slowThread adds the once-a-second details: context switches, and for a
// thread asleep (S) or in uninterruptible wait (D), where it waits.
func (s *Sampler) slowThread(p *trackedProc, th *trackedThread, ts *timeline.ThreadSample, t int64) {
	st, err := proc.ReadStatus(s.fs.TaskPath(p.pid, th.tid, "status"))
	if err == nil && st.HaveCtxt {
		ts.Switches = &timeline.Switches{Voluntary: st.VoluntaryCtxt, Involuntary: st.NonvoluntaryCtxt}
	} else if err != nil && !proc.IsVanished(err) && proc.AsDenied(err) == nil {
		s.readError(t, p.pid, err)
	}
	if ts.State == 'S' || ts.State == 'D' {
		ts.Blocked = s.blocked(p.pid, th.tid)
	}
}

// blocked reads wchan, the system call in progress and, for calls that wait
// on a descriptor, what that descriptor is.
func (s *Sampler) blocked(pid, tid int) *timeline.Blocked {
	b := &timeline.Blocked{}
	var denied []string
	if w, err := s.fs.ReadWchan(pid, tid); err == nil {
		b.Wchan = w
	} else if d := proc.AsDenied(err); d != nil {
		denied = append(denied, "wchan "+d.NotVisible())
	}
	sc, err := s.fs.ReadSyscall(pid, tid, s.arch)
	switch {
	case err == nil && sc.InSyscall:
		b.Syscall = sc.Name
		if b.Syscall == "" {
			b.Syscall = "syscall " + strconv.Itoa(sc.Number)
		}
		if fd, ok := sc.FDArg(); ok {
			if target, err := s.fs.FDTarget(pid, fd); err == nil {
				b.On = target
			} else if d := proc.AsDenied(err); d != nil {
				denied = append(denied, "fd "+d.NotVisible())
			}
		} else if sc.Name == "futex" || sc.Name == "futex_waitv" {
			b.On = "futex 0x" + strconv.FormatUint(sc.Args[0], 16)
		}
	case err != nil:
		if d := proc.AsDenied(err); d != nil {
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

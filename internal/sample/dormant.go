package sample

import (
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Dormant threads, read from /proc. A thread's schedstat is a pread per
// thread and tick: 10,000 a second for a 1,000-thread job at 100 ms, about
// 3 % of a core, nearly all of it for threads that sleep the whole window
// (a DataLoader's idle pool, intra-op and NCCL helpers, a server's
// workers). A thread whose schedstat has not moved for a whole slow period
// is dormant: its sample is carried from its last reading, exact for as
// long as it does not run.
//
// Whether it ran is told by its process: the process's stat holds the CPU
// of all its threads (utime+stime, clock ticks). When that has grown by more
// than the threads read since the last full reading account for (past the
// clock ticks' rounding), a dormant thread ran, and every thread is read on
// that tick. Every thread is read on the last tick and when the thread
// count changed (a thread came or went). The comparison is with the last
// full reading however long ago (the rounding does not add up), so a
// dormant thread's run shows at most dormantSlackNS (with the rounding)
// late, never lumped into one tick. Slow ticks carry dormant threads too:
// what the slow tier adds (switches, where a thread waits) is carried
// already for a thread that has not run.

// minDormant is the fewest dormant threads for which skipping them is worth
// the process's stat read.
const minDormant = 4

// dormantSlackNS is the run time unaccounted for past which a dormant
// thread is taken to have run: two clock ticks of rounding in the process's
// utime+stime, and 10 ms.
const dormantSlackNS = 2*1e9/clockTick + 10e6

// readThread reads a thread from /proc (sampleThread) and keeps whether it
// is dormant.
func (s *Sampler) readThread(p *trackedProc, th *trackedThread, t int64, fresh bool) (threadSample, error) {
	ts, err := s.sampleThread(p, th, fresh)
	if err == nil {
		s.noteStill(p, th, t)
	}
	return ts, err
}

// noteStill keeps, after a thread's schedstat reading, whether it is
// dormant, and adds the run time it gained to its process's account.
func (s *Sampler) noteStill(p *trackedProc, th *trackedThread, t int64) {
	if !th.stillSet || th.lastSched != th.prevSched {
		if th.stillSet && th.lastSched.RunNS > th.prevSched.RunNS {
			p.accounted += th.lastSched.RunNS - th.prevSched.RunNS
		}
		th.stillSince, th.stillSet, th.dormant = t, true, false
		return
	}
	th.dormant = t-th.stillSince >= int64(s.cfg.SlowEvery)
}

// processCPU reads the process's utime+stime (clock ticks), keeping its
// stat open while it has dormant threads.
func (s *Sampler) processCPU(p *trackedProc) (uint64, bool) {
	if p.pstat == nil {
		k, err := procfs.OpenKept(s.fs.PidPath(p.pid, "stat"), procfs.PrivProcMount)
		if err != nil {
			return 0, false
		}
		p.pstat = k
	}
	b, err := p.pstat.ReadInto(s.buf[:2048])
	if err != nil {
		return 0, false
	}
	var st procfs.Stat
	if procfs.ParseStat(b, &st) != nil {
		return 0, false
	}
	return st.UTime + st.STime, true
}

// dormantTick reads the process's threads that are not dormant (their
// readings kept for the tick's loop, as it would read them: on a slow tick,
// stat again for a thread not asleep), then its CPU, and says whether the
// dormant ones may be carried: no more CPU went unaccounted for since the
// last reading of every thread than the slack.
func (s *Sampler) dormantTick(p *trackedProc, t int64, slow bool) bool {
	if p.dormant < minDormant || !p.haveBase {
		return false
	}
	for _, th := range p.order {
		if th.dormant {
			continue
		}
		ts, err := s.readThread(p, th, t, slow && th.state != 'S')
		if err == nil && ts.Comm != nil {
			ts.Comm = th.comm // the read buffer's is overwritten by the next read
		}
		th.pre, th.preErr, th.preDone = ts, err, true
	}
	cpu, ok := s.processCPU(p)
	if !ok || cpu < p.cpuBase {
		return false
	}
	unaccounted := int64((cpu-p.cpuBase)*(1e9/clockTick)) - int64(p.accounted)
	return unaccounted <= dormantSlackNS
}

// endDormantTick counts the process's dormant threads for the next tick
// and, after a tick that read every thread, takes the process's CPU as the
// new base.
func (s *Sampler) endDormantTick(p *trackedProc, skipped bool) {
	n := 0
	for _, th := range p.order {
		if th.dormant {
			n++
		}
	}
	p.dormant = n
	if skipped {
		return
	}
	p.haveBase, p.accounted = false, 0
	if s.sched == nil && n >= minDormant {
		p.cpuBase, p.haveBase = s.processCPU(p)
	}
}

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
// Whether it ran is told by its process: its CPU clock is the run time of
// all its threads, in nanoseconds, the same counter each thread's schedstat
// shows (procfs.ProcessCPUNS; where the proc root's pids are not this
// process's, as with a host's /proc in a container, its stat's
// utime+stime, in clock ticks). When that has grown by more than the
// threads read since the last full reading account for (past the slack),
// a dormant thread ran, and every thread is read on that tick. Every
// thread is read on the last tick and when the thread count changed (a
// thread came or went). The comparison is with the last full reading
// however long ago (the slack does not add up), so a dormant thread's run
// shows at most dormantSlackNS late (dormantSlackTicksNS from the stat),
// never lumped into one tick. Slow ticks carry dormant threads too: what
// the slow tier adds (switches, where a thread waits) is carried already
// for a thread that has not run.

// minDormant is the fewest dormant threads for which skipping them is worth
// reading the process's CPU.
const minDormant = 4

// dormantSlackNS is the run time unaccounted for past which a dormant
// thread is taken to have run: 10 ms, for what the threads read before the
// process's CPU may gain between their reading and its; where the process's
// CPU comes from its stat (dormantSlackTicksNS), two clock ticks of
// rounding in its utime+stime more.
const (
	dormantSlackNS      = 10e6
	dormantSlackTicksNS = 2*1e9/clockTick + dormantSlackNS
)

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

// processCPU reads the process's CPU time in nanoseconds, and whether it
// is exact (its CPU clock) or in clock ticks (its stat's utime+stime, kept
// open while it has dormant threads). At 1,000 threads the clock costs
// about a sixth less than the stat (each walks every thread, their memory
// cold after 100 ms: about 300 against 360 µs here); at 10,000, the stat's
// two walks were a third of the sampler's CPU.
func (s *Sampler) processCPU(p *trackedProc) (ns uint64, exact, ok bool) {
	if s.ownPIDs && !p.noClock {
		if ns, err := procfs.ProcessCPUNS(p.pid); err == nil {
			return ns, true, true
		}
		p.noClock = true // gone, or not readable here: its stat says why
	}
	if p.pstat == nil {
		k, err := procfs.OpenKept(s.fs.PidPath(p.pid, "stat"), procfs.PrivProcMount)
		if err != nil {
			return 0, false, false
		}
		p.pstat = k
	}
	b, err := p.pstat.ReadInto(s.buf[:2048])
	if err != nil {
		return 0, false, false
	}
	var st procfs.Stat
	if procfs.ParseStat(b, &st) != nil {
		return 0, false, false
	}
	return (st.UTime + st.STime) * (1e9 / clockTick), false, true
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
	cpu, exact, ok := s.processCPU(p)
	if !ok || cpu < p.cpuBase || exact != p.baseExact {
		return false
	}
	slack := int64(dormantSlackTicksNS)
	if exact {
		slack = dormantSlackNS
	}
	return int64(cpu-p.cpuBase)-int64(p.accounted) <= slack
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
		p.cpuBase, p.baseExact, p.haveBase = s.processCPU(p)
	}
}

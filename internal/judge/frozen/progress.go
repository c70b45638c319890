package frozen

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Measure is what the job's live members did over a span of the window:
// the measures of progress. CPU share alone is not one: a host thread
// blocked in a synchronise that returns twenty times a second is feeding a
// busy GPU with 0.6 % of a core. Progress is measured, thread by thread, as
// wake-ups out of waits that have no timeout (something arrived: data on a
// pipe or socket, a lock released, a synchronise returned), a thread moving
// from one wait to another, CPU beyond housekeeping, I/O, and, where the
// device reports it, the job's GPU work completing.
type Measure struct {
	// CPUCores is the on-CPU time all the job's threads gained, in cores
	// (seconds of CPU per second of window); Busiest the thread that gained
	// most.
	CPUCores     float64
	BusiestTID   int
	BusiestPID   int
	BusiestCores float64
	CPUFromTicks bool // no schedstat: from utime+stime, at clock-tick resolution
	Threads      int
	// Wakeups counts the reading intervals in which one of the job's live
	// threads was woken out of a wait without a timeout: the interval
	// began with the thread asleep (S or D) and its schedstat run count
	// moved, so it was woken at least once. An interval counts once
	// however often the thread woke in it: the run count also grows with
	// every preemption after a wake-up (a DataLoader worker sharing two
	// CPUs was scheduled in three times per voluntary switch), so slices
	// overstate wake-ups. TimerWakeups counts those out of a timed wait (a
	// sleep, a poll or futex given a timeout): the thread's own timer
	// firing, housekeeping such as a watchdog. The readings that began
	// with the thread running say nothing of a wait and are left out, and
	// so are those over which a child of the process exited (the parent
	// wakes to reap it). WokenTID is the thread woken in most readings
	// (out of waits seen to have no timeout first), WokenReadings the
	// readings of it judged, WokenUnseen how many of its WokenCount were
	// out of a wait whose kind was not visible (its system call could not
	// be read: another user's thread), counted as progress, the safe side
	// against a false stall, and said so; WokenNotVisible says why.
	// WokenSlices is its run count over those readings: what the stall
	// rule weighs against StallMinWakeups, the safe side (a thread woken
	// ten times within one reading is not left out), while what the text
	// claims is the readings, which are true.
	Wakeups         uint64
	TimerWakeups    uint64
	WokenTID        int
	WokenPID        int
	WokenCount      uint64
	WokenReadings   uint64
	WokenUnseen     uint64
	WokenNotVisible string
	WokenSlices     uint64
	// MovedTID is a thread seen in two different waits without a timeout
	// (0 when none): it ran in between.
	MovedTID  int
	MovedPID  int
	MovedFrom string
	MovedTo   string
	// IOBytesPerSec is rchar+wchar of all processes; IOVisible is false
	// when no process's /proc/PID/io could be read.
	IOBytesPerSec float64
	IOVisible     bool
	// GPU: whether a device the job uses was sampled, the job's highest and
	// lowest utilisation on it. GPUPerProcess says the device reported the
	// job's processes' own share (the simulated device, NVML's process
	// utilisation), so another process's kernels on a shared GPU are not
	// counted; otherwise it is the whole device's. DeviceMaxUtil is the
	// whole device's highest, for a GPU shared with other work.
	GPUVisible    bool
	GPUMaxUtil    float64
	GPUMinUtil    float64
	GPUDevices    []int
	GPUPerProcess bool
	DeviceMaxUtil float64
	// CompletionsVisible: the device reports completed operations per
	// process (the simulated device does, NVML does not); Completions is
	// how many of the job's completed over the span.
	CompletionsVisible bool
	Completions        uint64
	// GPUWorked says some sample showed the job's GPU working (utilisation
	// above thresholds.GPUWorkMinUtil, or an operation completed);
	// GPUFirstWork and GPULastWork are the first and last such samples'
	// times (timeline nanoseconds).
	GPUWorked                 bool
	GPUFirstWork, GPULastWork int64
	// PollCores is the part of CPUCores spent by threads woken only by
	// their own timers, at most thresholds.TimerPollMaxCPUPerWake per
	// wake-up: poll loops re-arming (gloo's 10 ms epoll_wait, a
	// watchdog), no work done; it is no sign of progress.
	PollCores float64
	// Waits is where each live thread waits at the span's end, with what
	// that wait is (WaitKind), by pid then tid.
	Waits []ThreadWait
	// ChildCores is the CPU of the children the job's live processes
	// reaped over the span (cutime+cstime growth), in cores: children too
	// short-lived to be sampled (a fork storm's) show only there.
	ChildCores float64
	// Started counts the job's processes first seen over the span (after
	// the window's first reading), StartedExited those of them that also
	// exited in it; Forking says they came often enough to be progress
	// (thresholds.ForkMinCount, ForkMinPerSec).
	Started, StartedExited int
	Forking                bool
	SpanSec                float64
	// ReapReadings counts the readings over which a live process's reaped
	// children's CPU grew (each reaped at least one child); Reaping says
	// they came often enough to be a stream of children
	// (thresholds.ForkMinCount, ForkMinPerSec), not one member's death.
	ReapReadings int
	Reaping      bool
}

// ThreadWait is one live thread at the end of a span.
type ThreadWait struct {
	PID, TID int
	State    byte
	// Wait is the last reading of where it sleeps (nil when none was read).
	Wait *timeline.Blocked
	Kind WaitKind
	// Wakeups and TimerWakeups as in Measure, for this thread, out of its
	// Readings (the reading intervals judged).
	Wakeups, TimerWakeups, Readings uint64
}

// wakeSource is where the wake-up counts come from: a reading interval
// that began with the thread asleep and over which its run count moved.
const wakeSource = "/proc/PID/task/TID/{schedstat,stat} (scheduled in since a reading that found it asleep)"

// HostProgress lists what on the host side shows the job progressing, in
// words for evidence; empty when nothing does.
func (m Measure) HostProgress() []string {
	var out []string
	if m.CPUCores-m.PollCores > thresholds.StallMaxCPUCores {
		out = append(out, fmt.Sprintf("its threads gained %.2f %% of one core", m.CPUCores*100))
	}
	if m.WokenSlices >= thresholds.StallMinWakeups {
		out = append(out, m.wokenText())
	}
	if m.MovedTID != 0 {
		out = append(out, fmt.Sprintf("tid %d moved from %s to %s", m.MovedTID, m.MovedFrom, m.MovedTo))
	}
	if m.IOVisible && m.IOBytesPerSec > thresholds.StallMaxIOBytesPerSec {
		out = append(out, fmt.Sprintf("it moved %.0f B/s of I/O", m.IOBytesPerSec))
	}
	if m.Reaping && m.ChildCores > thresholds.StallMaxCPUCores {
		out = append(out, fmt.Sprintf("the children it reaped (in %d readings) gained %.2f %% of one core", m.ReapReadings, m.ChildCores*100))
	}
	if m.Forking {
		out = append(out, fmt.Sprintf("%d of its processes started in %.1f s (%d of them also ended)", m.Started, m.SpanSec, m.StartedExited))
	}
	return out
}

// wokenText says how often the thread woken most was woken, and out of
// what kind of wait, as far as it was visible.
func (m Measure) wokenText() string {
	of := fmt.Sprintf("%d of its %d readings", m.WokenCount, m.WokenReadings)
	seen := m.WokenCount - m.WokenUnseen
	why := m.WokenNotVisible
	if why == "" {
		why = "where it waited was not read"
	}
	switch {
	case m.WokenUnseen == 0:
		return fmt.Sprintf("tid %d was woken out of a wait with no timeout in %s", m.WokenTID, of)
	case seen == 0:
		return fmt.Sprintf("tid %d was woken in %s, out of a wait whose kind was not visible (%s): its own timer's wake-ups would read the same", m.WokenTID, of, why)
	}
	return fmt.Sprintf("tid %d was woken out of a wait with no timeout in %d of its %d readings, and out of one whose kind was not visible in %d more", m.WokenTID, seen, m.WokenReadings, m.WokenUnseen)
}

// WakeupsUnseen says the only host progress is wake-ups out of waits whose
// kind was not visible: a timer's wake-ups (a watchdog's, a sleep's) would
// read the same, so the job may be stalled all the same.
func (m Measure) WakeupsUnseen() bool {
	p := m.HostProgress()
	return len(p) == 1 && m.WokenSlices >= thresholds.StallMinWakeups && m.WokenUnseen == m.WokenCount
}

// Progressing says whether anything measured shows the job moving: host
// progress, or the device completing the job's work.
func (m Measure) Progressing() bool {
	return len(m.HostProgress()) > 0 || (m.CompletionsVisible && m.Completions > 0)
}

// GPUIdle says the job's GPU work stayed under thresholds.StallMaxGPUUtil and
// completed nothing (true when no GPU was in view: nothing says otherwise).
func (m Measure) GPUIdle() bool {
	return !m.GPUVisible || (m.GPUMaxUtil <= thresholds.StallMaxGPUUtil && !(m.CompletionsVisible && m.Completions > 0))
}

// GPUSpinning says the GPUs stayed pinned busy while the job made no
// progress: no host thread woke, and the device (where it says) completed
// none of the job's work: a collective kernel waiting for a peer.
func (m Measure) GPUSpinning() bool {
	return m.GPUVisible && m.GPUMinUtil >= thresholds.StallSpinGPUUtil && !m.Progressing()
}

// isTimer says whether a wait returns by itself: a sleep, a signal wait,
// or a wait given a timeout (recorded by the sampler from the call's
// arguments; sleeps are known by name in recordings that predate that).
func isTimer(b *timeline.Blocked) bool {
	if b == nil {
		return false
	}
	switch b.Syscall {
	case "nanosleep", "clock_nanosleep", "pause", "rt_sigsuspend":
		return true
	}
	return b.Timed
}

// sameWait says two readings are the same wait (the same call on the same
// descriptor or futex word); readings that name no call are never compared.
func sameWait(a, b *timeline.Blocked) bool {
	if a.Syscall == "" || b.Syscall == "" {
		return true
	}
	return a.Syscall == b.Syscall && a.On == b.On
}

// halfReading says half is a reading of full's wait, made half: it
// names the same wait channel but no call, though the call was visible
// (nothing was denied), so the thread woke between the two reads (the
// system call file said "running"). Recordings from before the sampler
// dropped such readings hold them: a poll loop's 10 ms epoll_wait read as
// "do_epoll_wait, no call" made its timed wake-ups count as work arriving,
// and a hung job's window was not judged stalled.
func halfReading(half, full *timeline.Blocked) bool {
	return half.Syscall == "" && half.NotVisible == "" && half.Wchan != "" && full.Syscall != "" && half.Wchan == full.Wchan
}

func waitText(b *timeline.Blocked) string {
	if b.On != "" {
		return b.Syscall + " on " + safe(b.On)
	}
	return b.Syscall
}

// threadAcc accumulates one thread's measures over a span.
type threadAcc struct {
	pid, tid    int
	first, last timeline.ThreadSample
	prevT       int64
	blk         *timeline.Blocked
	// Reading intervals: judged, woken out of an untimed wait or one of
	// unknown kind, of those the unknown ones, woken out of a timed wait.
	readings, wakes, unseen, timerWk uint64
	// wakeSlices is the run count the untimed wake-ups moved.
	wakeSlices uint64
	// timerSlices is the run count the timed wake-ups moved: a poll loop's
	// CPU is weighed against each of its wake-ups.
	timerSlices uint64
	why         string // why the unknown waits were not visible
	lastT       int64
}

// scan measures the span [from, end of window] and finds the last instant
// at which anything showed progress (the end of the last reading interval
// with an untimed wake-up, a move between waits, CPU beyond housekeeping,
// I/O, GPU work or a completion), from itself when nothing did.
func scan(v *view, from int64) (Measure, int64) {
	var m Measure
	lastProgress := from
	reaped := v.childExits()
	secs := time.Duration(v.t1 - from).Seconds()

	// Where each thread first waits in the span: the wake-ups before a
	// thread's first reading came out of that wait.
	firstBlk := map[int]*timeline.Blocked{}
	for _, tk := range v.tl.Ticks {
		if tk.T < from {
			continue
		}
		for i := range tk.Threads {
			s := &tk.Threads[i]
			if first, ok := firstBlk[s.TID]; s.Blocked != nil && (!ok || halfReading(first, s.Blocked)) {
				firstBlk[s.TID] = s.Blocked
			}
		}
	}

	accs := map[int]*threadAcc{}
	type ioAcc struct {
		prevT int64
		prev  uint64
	}
	ios := map[int]*ioAcc{}
	type compAcc struct{ first, last uint64 }
	comps := map[[2]int]*compAcc{}
	devices := map[int]bool{}
	m.GPUMinUtil = 100
	// Processes of the job started over the span: a job that keeps
	// starting processes (a fork storm, a shell loop) is doing something,
	// even when each child lives less than a reading and the parent only
	// wakes to reap them.
	var starts []int64
	for pid, p := range v.procs {
		if p.FirstSeen > v.t0 && p.FirstSeen >= from {
			starts = append(starts, p.FirstSeen)
			m.Started++
			if !v.alive(pid) {
				m.StartedExited++
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	m.SpanSec = secs
	m.Forking = secs > 0 && m.Started >= thresholds.ForkMinCount && float64(m.Started)/secs >= thresholds.ForkMinPerSec
	childPrev, childPrevT := map[int]uint64{}, map[int]int64{}
	members := v.memberExits()
	lastReap := from
	var childNS float64
	var prevTickT int64 = -1
	for _, tk := range v.tl.Ticks {
		if tk.T < from {
			continue
		}
		progress := false
		if m.Forking && prevTickT >= 0 {
			i := sort.Search(len(starts), func(i int) bool { return starts[i] > prevTickT })
			progress = i < len(starts) && starts[i] <= tk.T
		}
		// Reaped children's CPU: what the live processes' cutime+cstime
		// gained between their readings, leaving out the readings over
		// which a member exited (a child sampled in two readings or more:
		// its death is no progress, and its CPU was counted while it
		// lived). A fork storm's child glimpsed in one reading is no
		// member.
		var reapedNS float64
		for _, ps := range tk.Procs {
			if ps.ChildCPUTicks == nil || !v.alive(ps.PID) {
				continue
			}
			if prev, ok := childPrev[ps.PID]; ok && *ps.ChildCPUTicks > prev && !reapedBetween(members[ps.PID], childPrevT[ps.PID], tk.T) {
				reapedNS += float64(*ps.ChildCPUTicks-prev) * 1e9 / v.clockTick()
				m.ReapReadings++
			}
			childPrev[ps.PID], childPrevT[ps.PID] = *ps.ChildCPUTicks, tk.T
		}
		childNS += reapedNS
		if reapedNS > 0 {
			lastReap = tk.T
		}
		var cpuNS float64
		for i := range tk.Threads {
			s := &tk.Threads[i]
			if !v.alive(s.PID) {
				continue
			}
			a := accs[s.TID]
			if a == nil {
				blk := s.Blocked
				if f := firstBlk[s.TID]; blk != nil && f != nil && halfReading(blk, f) {
					blk = f
				}
				accs[s.TID] = &threadAcc{pid: s.PID, tid: s.TID, first: *s, last: *s, prevT: tk.T, blk: blk, lastT: tk.T}
				continue
			}
			ran := float64(runNS(v, a.last, *s))
			d := sub(s.Slices, a.last.Slices)
			// A thread read running (R) at the interval's start was not in
			// a wait: its slices over the interval count preemptions (a
			// busy thread sharing a CPU, a cgroup's quota throttling it)
			// as much as wake-ups, and say nothing of what woke it. Its
			// CPU speaks for it. Counted as wake-ups, a throttled busy
			// thread read "woken 53 times out of a wait with no timeout".
			if d > 0 && a.last.State != 'R' && !reapedBetween(reaped[s.PID], a.prevT, tk.T) {
				w := a.blk
				if w == nil {
					w = firstBlk[s.TID]
				}
				if isTimer(w) {
					a.timerWk++
					a.timerSlices += d
					if ran <= float64(d)*float64(thresholds.TimerPollMaxCPUPerWake) {
						ran = 0 // a poll loop's own cost: no work done
					}
				} else {
					a.wakes++
					a.wakeSlices += d
					if w == nil || w.Syscall == "" {
						a.unseen++
						switch {
						case a.why != "" || w == nil:
						case w.NotVisible != "":
							a.why = w.NotVisible
						case w.Wchan != "":
							// read, but in no system call: a page
							// fault's wait, or one left as it was read
							a.why = "it waited in " + safe(w.Wchan) + ", in no system call that was read"
						}
					}
					progress = true
				}
			}
			if !reapedBetween(reaped[s.PID], a.prevT, tk.T) {
				a.readings++
			}
			cpuNS += ran
			if s.Blocked != nil && !(a.blk != nil && halfReading(s.Blocked, a.blk)) {
				if a.blk != nil && !sameWait(a.blk, s.Blocked) && !(isTimer(a.blk) && isTimer(s.Blocked)) {
					if m.MovedTID == 0 {
						m.MovedTID, m.MovedPID, m.MovedFrom, m.MovedTo = s.TID, s.PID, waitText(a.blk), waitText(s.Blocked)
					}
					progress = true
				}
				a.blk = s.Blocked
			}
			a.last, a.prevT, a.lastT = *s, tk.T, tk.T
		}
		if prevTickT >= 0 && cpuNS/1e9 > thresholds.StallMaxCPUCores*time.Duration(tk.T-prevTickT).Seconds() {
			progress = true
		}
		// I/O: each live process's increments between its readings, leaving
		// out the readings over which one of its children exited: the kernel
		// folds a reaped child's counters into its parent's /proc/PID/io.
		for _, ps := range tk.Procs {
			if ps.IO == nil || !v.alive(ps.PID) {
				continue
			}
			n := ps.IO.RChar + ps.IO.WChar
			r := ios[ps.PID]
			if r == nil {
				ios[ps.PID] = &ioAcc{prevT: tk.T, prev: n}
				continue
			}
			if !reapedBetween(reaped[ps.PID], r.prevT, tk.T) {
				d := float64(sub(n, r.prev))
				if secs > 0 {
					m.IOBytesPerSec += d / secs
				}
				if dt := time.Duration(tk.T - r.prevT).Seconds(); dt > 0 && d/dt > thresholds.StallMaxIOBytesPerSec {
					progress = true
				}
			}
			r.prevT, r.prev = tk.T, n
		}
		// GPU: the devices the job uses, the job's own share where the
		// device reports it per process.
		for _, g := range tk.GPUs {
			util, perProc, ok := v.jobGPU(g)
			if !ok {
				continue
			}
			m.GPUVisible = true
			m.GPUPerProcess = m.GPUPerProcess || perProc
			devices[g.Index] = true
			m.GPUMaxUtil = max(m.GPUMaxUtil, util)
			m.GPUMinUtil = min(m.GPUMinUtil, util)
			m.DeviceMaxUtil = max(m.DeviceMaxUtil, *g.UtilPercent)
			if !perProc {
				for _, pt := range g.Points {
					m.GPUMaxUtil = max(m.GPUMaxUtil, pt.Percent)
				}
			}
			if util > thresholds.StallMaxGPUUtil {
				progress = true
			}
			worked := util > thresholds.GPUWorkMinUtil
			for _, gp := range g.Processes {
				if _, in := v.procs[gp.PID]; !in || gp.CompletedOps == nil {
					continue
				}
				k := [2]int{g.Index, gp.PID}
				c := comps[k]
				if c == nil {
					comps[k] = &compAcc{first: *gp.CompletedOps, last: *gp.CompletedOps}
					continue
				}
				if *gp.CompletedOps > c.last {
					progress, worked = true, true
				}
				c.last = max(c.last, *gp.CompletedOps)
			}
			if worked {
				if !m.GPUWorked {
					m.GPUWorked, m.GPUFirstWork = true, tk.T
				}
				m.GPULastWork = tk.T
			}
		}
		if progress {
			lastProgress = tk.T
		}
		prevTickT = tk.T
	}
	m.IOVisible = len(ios) > 0
	if secs > 0 {
		m.ChildCores = childNS / 1e9 / secs
		m.Reaping = m.ReapReadings >= thresholds.ForkMinCount && float64(m.ReapReadings)/secs >= thresholds.ForkMinPerSec
	}
	if m.Reaping && m.ChildCores > thresholds.StallMaxCPUCores {
		// A stream of reaped children: every reading in which one was
		// reaped showed the job working.
		lastProgress = max(lastProgress, lastReap)
	}
	for d := range devices {
		m.GPUDevices = append(m.GPUDevices, d)
	}
	sort.Ints(m.GPUDevices)
	if !m.GPUVisible {
		m.GPUMinUtil = 0
	}
	for _, c := range comps {
		m.CompletionsVisible = true
		m.Completions += c.last - c.first
	}

	tids := make([]int, 0, len(accs))
	for tid := range accs {
		tids = append(tids, tid)
	}
	sort.Ints(tids) // ties go to the lowest tid, every time
	for _, tid := range tids {
		a := accs[tid]
		cores := 0.0
		if secs > 0 {
			cores = float64(runNS(v, a.first, a.last)) / 1e9 / secs
		}
		m.CPUCores += cores
		if a.wakes == 0 && a.timerWk > 0 && cores*secs*1e9 <= float64(a.timerSlices)*float64(thresholds.TimerPollMaxCPUPerWake) {
			m.PollCores += cores
		}
		m.Threads++
		if cores > m.BusiestCores || m.BusiestTID == 0 {
			m.BusiestCores, m.BusiestTID, m.BusiestPID = cores, a.tid, a.pid
		}
		m.CPUFromTicks = m.CPUFromTicks || (a.first.RunNS == 0 && a.last.RunNS == 0)
		m.Wakeups += a.wakes
		m.TimerWakeups += a.timerWk
		// Of the threads woken enough to show progress, the one woken in
		// most readings out of waits seen to have no timeout, then in
		// most readings at all; where none was woken enough, the one
		// scheduled in most.
		if a.wakes > 0 && wokenMore(a, m) {
			m.WokenCount, m.WokenTID, m.WokenPID = a.wakes, a.tid, a.pid
			m.WokenReadings, m.WokenUnseen, m.WokenNotVisible, m.WokenSlices = a.readings, a.unseen, a.why, a.wakeSlices
		}
		if a.lastT != v.t1 {
			continue // exited before the end: not waiting anywhere
		}
		// a.blk is the thread's last reading of a wait, a half reading
		// left out (halfReading)
		blk := a.blk
		if a.last.State != 'S' && a.last.State != 'D' {
			blk = nil
		}
		tw := ThreadWait{PID: a.pid, TID: a.tid, State: a.last.State, Wait: blk, Wakeups: a.wakes, TimerWakeups: a.timerWk, Readings: a.readings}
		tw.Kind = v.waitKind(tw)
		m.Waits = append(m.Waits, tw)
	}
	sort.SliceStable(m.Waits, func(i, j int) bool {
		if m.Waits[i].PID != m.Waits[j].PID {
			return m.Waits[i].PID < m.Waits[j].PID
		}
		return m.Waits[i].TID < m.Waits[j].TID
	})
	return m, lastProgress
}

// wokenMore says a's wake-ups show progress better than those of the
// thread m names: they reach the threshold where m's do not, or more of
// them were out of waits seen to have no timeout, or they came in more
// readings, or moved the run count more.
func wokenMore(a *threadAcc, m Measure) bool {
	enough := func(slices uint64) bool { return slices >= thresholds.StallMinWakeups }
	if enough(a.wakeSlices) != enough(m.WokenSlices) {
		return enough(a.wakeSlices)
	}
	if seen, best := a.wakes-a.unseen, m.WokenCount-m.WokenUnseen; seen != best {
		return seen > best
	}
	if a.wakes != m.WokenCount {
		return a.wakes > m.WokenCount
	}
	return a.wakeSlices > m.WokenSlices
}

// runNS is the on-CPU time a thread gained between two samples: schedstat
// run time, or utime+stime when schedstat was not read.
func runNS(v *view, a, b timeline.ThreadSample) uint64 {
	if a.RunNS > 0 || b.RunNS > 0 {
		return sub(b.RunNS, a.RunNS)
	}
	return uint64(float64(sub(b.UTime+b.STime, a.UTime+a.STime)) * 1e9 / v.clockTick())
}

// jobGPU is the job's utilisation of a sampled device: the sum of its
// processes' own shares where the device reports them, else the whole
// device's (ok is false when the device was not read, or lists processes
// none of which is the job's).
func (v *view) jobGPU(g gpu.Sample) (util float64, perProc, ok bool) {
	if g.UtilPercent == nil {
		return 0, false, false
	}
	listed, have := false, false
	sum := 0.0
	for _, gp := range g.Processes {
		if _, in := v.procs[gp.PID]; !in {
			continue
		}
		listed = true
		if gp.SMUtilPercent != nil {
			sum += *gp.SMUtilPercent
			have = true
		}
	}
	if len(g.Processes) > 0 && !listed {
		return 0, false, false
	}
	if have {
		return min(100, sum), true, true
	}
	return *g.UtilPercent, false, true
}

// Progress is what the whole job did over the window, or over its tail
// since the last member died when that tail is long enough to judge; and,
// when it made no progress and waits for requests or a timer, the idle
// span.
type Progress struct {
	Measure
	// Judged is false when the window is too short or too sparse to judge.
	Judged bool
	// From is where the judged part of the window starts (nanoseconds since
	// Meta.Started); Since names what happened there ("since rank 2
	// exited"), empty when the whole window was judged.
	From  int64
	Since string
	// Span and Samples are the judged part's length and sample count.
	Span    time.Duration
	Samples int
	// LiveProcs is the number of the job's processes alive at the end.
	LiveProcs int
	// Idle is set when the job is idle: over the window, or over its tail
	// since it last showed progress (a server past its start-up), nothing
	// progressed, its GPU did nothing, and every live thread waits for
	// requests or a timer. Nil otherwise.
	Idle *Idle
	// Starting is set when the window shows only the job's start-up: it
	// started in view (thresholds.StartUpInView), its GPU ran no step over
	// the whole window, and it is neither stalled nor idle. Nil otherwise.
	Starting *Starting
}

// Starting is a window that holds the job's start-up and none of its
// steps: a CPU-side verdict over it would judge imports, a model or
// dataset loading, or a launcher's own scripts as if they fed a GPU.
type Starting struct {
	// Measure is the whole window's.
	Measure
	// Started is when the job's first process started (timeline
	// nanoseconds; before the window when negative against Meta.Started);
	// Launched says gpufeed started it.
	Started  int64
	Launched bool
	// Quiet is where the job's last sign of progress was (the window's end
	// when it still moved at the end); QuietIdle says every live thread
	// waits for requests or a timer since then, a tail too short to call
	// the job idle (thresholds.IdleAfterStartUpMinSpan).
	Quiet     int64
	QuietIdle bool
}

// Idle is the span over which the job was idle, and what it waited in.
type Idle struct {
	Measure
	From    int64
	Span    time.Duration
	Samples int
	// Whole is set when the idle span is the whole window.
	Whole bool
	// StartUp is set when the idle span is a tail shorter than the usual
	// quiet-tail rule asks for, judged because what came before it was the
	// job's start-up: how much of that start-up the window held.
	StartUp time.Duration
}

// Stalled says whether nothing progressed and the job is not merely idle:
// members wait on each other or on a dead peer, or the GPU stays busy
// completing nothing.
func (p Progress) Stalled() bool {
	if !p.Judged || p.LiveProcs == 0 || p.Idle != nil || p.Progressing() {
		return false
	}
	return !p.GPUVisible || p.GPUMaxUtil <= thresholds.StallMaxGPUUtil || p.GPUSpinning()
}

// measureProgress measures the live members' progress: over the window's
// tail since the last member died when that tail can be judged on its own,
// otherwise over the whole window (a member that died is not progressing;
// what it did before it died is no sign of life); then whether the job is
// idle rather than stalled.
func measureProgress(v *view, deaths []Death) Progress {
	p := measureTail(v, deaths)
	if p.Idle == nil && !p.Stalled() && len(deaths) == 0 && p.LiveProcs > 0 {
		p.Starting = v.starting()
	}
	return p
}

// starting says the window holds the job's start-up and none of its steps:
// the job started in view (at most thresholds.StartUpInView before the
// window, or gpufeed launched it) and its GPU, in view, stayed at or under
// thresholds.StallMaxGPUUtil in every sample of the window and worked, if
// at all, in one burst of at most thresholds.StartUpWarmUpMaxSpan (a
// warm-up). A launcher
// resolving its interpreter on a loaded host (a pyenv shim runs a dozen
// shell scripts before Python) and the imports after it took all of a 5 s
// window; the CPU-side rules read the scripts as batch preparation and the
// sleeping shell as a launch thread with too little work. Nil otherwise.
func (v *view) starting() *Starting {
	whole, quiet := scan(v, v.t0)
	if !whole.GPUVisible || whole.GPUMaxUtil > thresholds.StallMaxGPUUtil {
		return nil
	}
	// A warm-up (a kernel or a copy to check the device) is one burst; a
	// job whose small kernels run throughout the window is working, with
	// too little work per launch.
	if whole.GPUWorked && time.Duration(whole.GPULastWork-whole.GPUFirstWork) > thresholds.StartUpWarmUpMaxSpan {
		return nil
	}
	started, ok := v.jobStarted()
	if !ok || (started < v.t0-int64(thresholds.StartUpInView) && !v.tl.Meta.Target.Launched) {
		return nil
	}
	s := &Starting{Measure: whole, Started: started, Launched: v.tl.Meta.Target.Launched, Quiet: v.t1}
	if whole.Progressing() && quiet < v.t1 && v.samplesFrom(quiet) >= 2 {
		if tail, _ := scan(v, quiet); !tail.Progressing() {
			s.Quiet, s.QuietIdle = quiet, v.idleWaits(tail)
		}
	}
	return s
}

// measureTail is measureProgress before the start-up check.
func measureTail(v *view, deaths []Death) Progress {
	var p Progress
	p.From = v.t0
	lastDeath, who := int64(-1<<62), 0
	for _, d := range deaths {
		if t, ok := v.lastProcT[d.PID]; ok && (t > lastDeath || (t == lastDeath && d.PID < who)) {
			lastDeath, who = t, d.PID
		}
	}
	// The tail starts at the first reading without the member: it died
	// somewhere after its last sample, and what the others did up to then
	// (its last exchanges with them) is no sign of life after it.
	if lastDeath > v.t0 {
		next := v.t1
		for _, tk := range v.tl.Ticks {
			if tk.T > lastDeath {
				next = tk.T
				break
			}
		}
		if time.Duration(v.t1-next) >= thresholds.StallMinWindow {
			p.From = next
			p.Since = "since " + v.procName(who) + " ended"
		}
	}
	p.Samples = v.samplesFrom(p.From)
	p.Span = time.Duration(v.t1 - p.From)
	p.Judged = p.Samples >= thresholds.StallMinSamples && p.Span >= thresholds.StallMinWindow
	for pid := range v.procs {
		if v.alive(pid) {
			p.LiveProcs++
		}
	}
	if p.Span <= 0 {
		return p
	}
	var quiet int64
	p.Measure, quiet = scan(v, p.From)
	// A job that progressed early in the span and not since (a server past
	// its start-up, a job that froze a moment after gpufeed attached, a
	// peer finishing its last exchange) is judged over the quiet tail after
	// its last sign of progress, when that tail is long enough to judge and
	// most of the window.
	if p.Progressing() {
		span := time.Duration(v.t1 - quiet)
		if v.samplesFrom(quiet) < thresholds.StallMinSamples {
			return p
		}
		if span < thresholds.StallMinWindow || float64(span) < thresholds.QuietMinShare*float64(v.span()) {
			return v.idleAfterStartUp(p, quiet, len(deaths) > 0)
		}
		tail, _ := scan(v, quiet)
		if tail.Progressing() {
			return p
		}
		// The same situation reads the same whichever rule judged it: a
		// start-up before an idle tail is named as such (judged on the
		// whole span, before the tail replaces it).
		_, startUp := v.startUpBefore(p)
		p.Since = v.quietSince(p.Since, quiet, startUp && v.idleWaits(tail))
		p.Measure, p.From, p.Span, p.Samples = tail, quiet, span, v.samplesFrom(quiet)
	}
	if !p.Judged || p.LiveProcs == 0 || len(deaths) > 0 {
		return p // a job that lost a member is not idle
	}
	if v.idleWaits(p.Measure) {
		p.Idle = &Idle{Measure: p.Measure, From: p.From, Span: p.Span, Samples: p.Samples, Whole: p.From == v.t0}
	}
	return p
}

// idleAfterStartUp judges a quiet tail too short for the rule above (under
// StallMinWindow, or under half the window) when what came before it was
// the job's own start-up: the job started inside the window (or at most
// thresholds.StartUpInView before it: a server started by diagnose -- CMD,
// or with cmd & gpufeed diagnose --pid $!), its GPU ran no steps over the
// whole window (at most a warm-up), and the tail lasts
// thresholds.IdleAfterStartUpMinSpan with every live thread waiting for requests or a timer. Such a job is idle
// since its start-up ended: a server that took most of a short window to
// import its modules and bind its socket, on a loaded host, was called
// "too little work". The tail only ever makes it idle, never stalled (a
// stall needs the full tail rule): p is returned unchanged otherwise.
func (v *view) idleAfterStartUp(p Progress, quiet int64, lostMember bool) Progress {
	span := time.Duration(v.t1 - quiet)
	if !p.Judged || p.LiveProcs == 0 || lostMember || span < thresholds.IdleAfterStartUpMinSpan {
		return p
	}
	started, ok := v.startUpBefore(p)
	if !ok {
		return p
	}
	tail, _ := scan(v, quiet)
	if tail.Progressing() || !v.idleWaits(tail) {
		return p
	}
	q := p
	q.Measure, q.From, q.Span, q.Samples = tail, quiet, span, v.samplesFrom(quiet)
	q.Since = v.quietSince(q.Since, quiet, true)
	q.Idle = &Idle{Measure: tail, From: quiet, Span: span, Samples: q.Samples, StartUp: time.Duration(quiet - max(started, v.t0))}
	return q
}

// quietSince names where a quiet tail starts ("since 2.5 s into the
// window, its last sign of progress", or "the end of its start-up"), after
// what the span already said (since a member ended).
func (v *view) quietSince(prev string, quiet int64, startUp bool) string {
	what := "its last sign of progress"
	if startUp {
		what = "the end of its start-up"
	}
	into := "since " + fmtSeconds(time.Duration(quiet-v.t0)) + " into the window, " + what
	if prev != "" {
		into = prev + ", and " + into
	}
	return into
}

// startUpBefore says what progressed before a quiet tail was the job's
// start-up: the job started at most thresholds.StartUpInView before the
// window, or gpufeed launched it, and no step ran: the GPU stayed under
// StallMaxGPUUtil in every sample (a warm-up kernel's completion during the start-up is allowed;
// the tail itself must complete nothing, idleWaits checks it). It returns
// when the job started.
func (v *view) startUpBefore(p Progress) (int64, bool) {
	if p.GPUVisible && p.GPUMaxUtil > thresholds.StallMaxGPUUtil {
		return 0, false
	}
	started, ok := v.jobStarted()
	if !ok {
		return 0, false
	}
	// A command gpufeed launched is in its start-up at the window's start
	// however long gpufeed took to start sampling it (loading its eBPF
	// programs takes seconds on a loaded host).
	if started < v.t0-int64(thresholds.StartUpInView) && !v.tl.Meta.Target.Launched {
		return 0, false
	}
	return started, true
}

// jobStarted is when the job's first process started (timeline T, which
// may be before the window), from the target's start time and the
// window's uptime; a launched command starts at the window's start when
// it was held there, or when its start time is not known.
func (v *view) jobStarted() (int64, bool) {
	m := v.tl.Meta
	if m.Target.Held {
		// Forked before the window, but held before its execve until the
		// first reading: its start is the window's.
		return v.t0, true
	}
	if m.UptimeNS > 0 && m.Target.StartTime > 0 {
		return int64(float64(m.Target.StartTime)*1e9/v.clockTick()) - m.UptimeNS, true
	}
	if m.Target.Launched {
		return v.t0, true
	}
	return 0, false
}

func (v *view) samplesFrom(from int64) int {
	n := 0
	for _, tk := range v.tl.Ticks {
		if tk.T >= from {
			n++
		}
	}
	return n
}

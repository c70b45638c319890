package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// WaitKind is what a sleeping thread waits for, from where it was last seen
// blocked (its system call, what the call waits on, its process's listening
// sockets and device channels) and whether it kept waking on a timer.
type WaitKind string

const (
	// WaitTimer: a sleep or a signal wait, or a timed wait that kept
	// returning on its timeout: the thread waits for time to pass.
	WaitTimer WaitKind = "timer"
	// WaitRequest: accept on a listening socket, or an event loop (poll,
	// select, epoll_wait) in a process that holds a listening socket: it
	// waits for a client.
	WaitRequest WaitKind = "request"
	// WaitLock: a futex or semaphore: another thread of the process.
	WaitLock WaitKind = "lock"
	// WaitPeer: a read, receive or poll on a pipe or socket: another
	// process (a peer rank, a worker, the other end of a pipe).
	WaitPeer WaitKind = "peer"
	// WaitChild: wait4 or waitid: a child of the job.
	WaitChild WaitKind = "child"
	// WaitObserver: wait4 or waitid in the process gpufeed runs under,
	// with no live child in the job: it waits for gpufeed itself (a shell
	// that started gpufeed on its own $$), so nothing of the job runs.
	WaitObserver WaitKind = "observer"
	// WaitDevice: a device channel (a synchronise, a blocking copy).
	WaitDevice WaitKind = "device"
	// WaitDisk: uninterruptible sleep (storage, a network file system, a driver).
	WaitDisk WaitKind = "disk"
	// WaitRunning: on a CPU or runnable at the end.
	WaitRunning WaitKind = "running"
	// WaitUnknown: where it waits was not read or not visible.
	WaitUnknown WaitKind = "unknown"
)

// waitKind names what a live thread waits for at the end of a span.
func (v *view) waitKind(tw ThreadWait) WaitKind {
	switch tw.State {
	case 'D':
		return WaitDisk
	case 'R':
		return WaitRunning
	case 'S':
	default:
		return WaitUnknown // stopped, traced, dead
	}
	b := tw.Wait
	if b == nil || b.Syscall == "" {
		return WaitUnknown
	}
	p := v.procs[tw.PID]
	switch b.Syscall {
	case "nanosleep", "clock_nanosleep", "pause", "rt_sigsuspend":
		return WaitTimer
	case "accept", "accept4":
		return WaitRequest
	case "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2":
		if listens(p) {
			return WaitRequest
		}
	case "wait4", "waitid":
		if v.waitsForObserver(tw.PID) {
			return WaitObserver
		}
		return WaitChild
	}
	// A timed wait that kept timing out is a timer, whatever it waits on
	// (a watchdog's condition variable, a heartbeat's poll); a timed wait
	// that never returned waits for its event (the timeout is a deadline).
	if isTimer(b) && tw.TimerWakeups >= thresholds.StallMinWakeups {
		return WaitTimer
	}
	switch b.Syscall {
	case "futex", "futex_waitv", "semop", "semtimedop":
		return WaitLock
	}
	if onDevice(p, b.On) {
		return WaitDevice
	}
	if b.On != "" {
		return WaitPeer
	}
	switch b.Syscall {
	case "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "msgrcv":
		return WaitPeer
	}
	return WaitUnknown
}

// waitsForObserver says pid is the process gpufeed runs under and has no
// live child in the job: the only child it can wait for is gpufeed's own
// chain, which the sampler leaves out of the job.
func (v *view) waitsForObserver(pid int) bool {
	if pid == 0 || v.tl.Meta.ObserverParent != pid {
		return false
	}
	for cpid, p := range v.procs {
		if p.PPID == pid && v.alive(cpid) {
			return false
		}
	}
	return true
}

func listens(p *timeline.ProcInfo) bool {
	return p != nil && p.Listening != nil && len(p.Listening.Sockets) > 0
}

func onDevice(p *timeline.ProcInfo, on string) bool {
	if gpu.IsNVIDIANode(on) {
		return true
	}
	if p == nil || p.DeviceChannels == nil || on == "" {
		return false
	}
	for _, c := range p.DeviceChannels.Channels {
		if c == on {
			return true
		}
	}
	return false
}

// servers are the processes that wait for requests and are not members of
// a distributed job: their threads waiting on a lock wait for work the
// accepting thread hands them (a thread pool behind a listener). A rank's
// listeners (the rendezvous store, gloo's pair listener) are a side job:
// its locked threads wait on the collective.
func (v *view) servers(m Measure) map[int]bool {
	out := map[int]bool{}
	for _, w := range m.Waits {
		if w.Kind == WaitRequest && !distributedMember(v.procs[w.PID]) {
			out[w.PID] = true
		}
	}
	return out
}

// distributedMember says a process is (likely) a member of a distributed
// job: a rank by its environment (RANK, LOCAL_RANK, SLURM_PROCID...), a
// process told the job's size (WORLD_SIZE, LOCAL_WORLD_SIZE), or a child
// started by multiprocessing's spawn or forkserver, as torch.multiprocessing
// spawn starts ranks that learn their rank from arguments.
func distributedMember(p *timeline.ProcInfo) bool {
	if p == nil {
		return false
	}
	if _, _, ok := rank(p); ok {
		return true
	}
	if _, ok := p.Env["WORLD_SIZE"]; ok {
		return true
	}
	if _, ok := p.Env["LOCAL_WORLD_SIZE"]; ok {
		return true
	}
	return isSpawnChild(p) || strings.Contains(cmd(p), "from multiprocessing.forkserver import main")
}

// idleWaits says whether a span that made no progress is idle: the job's
// GPU did nothing, at least one thread waits for requests or a timer, and
// every other live thread waits for one too, for a child, or (in a server)
// on a lock for work. Members waiting on a peer, on the device, on the
// disk, on a lock outside a server, or anywhere not visible, are not idle.
func (v *view) idleWaits(m Measure) bool {
	if !m.GPUIdle() || len(m.Waits) == 0 {
		return false
	}
	servers := v.servers(m)
	anchor := false
	for _, w := range m.Waits {
		switch w.Kind {
		case WaitTimer, WaitRequest, WaitObserver:
			anchor = true
		case WaitChild:
		case WaitLock:
			if !servers[w.PID] {
				return false
			}
		default:
			return false
		}
	}
	return anchor
}

// listeningText names what a thread in accept listens on: "tcp
// 127.0.0.1:8000", from its process's listening sockets.
func (v *view) listeningText(pid int, on string) string {
	p := v.procs[pid]
	if p == nil || p.Listening == nil {
		return ""
	}
	if ino, ok := strings.CutPrefix(on, "socket:["); ok {
		n, _ := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64)
		for _, s := range p.Listening.Sockets {
			if s.Inode == n {
				return (&timeline.Listening{Sockets: []timeline.ListenSocket{s}}).Names()[0]
			}
		}
	}
	return strings.Join(p.Listening.Names(), ", ")
}

// describeWait says in words what a thread of the given kind waits in:
// "waits for connections in accept4 on a listening socket (tcp
// 127.0.0.1:8000)".
func (v *view) describeWait(w ThreadWait) string {
	b := w.Wait
	switch w.Kind {
	case WaitRequest:
		if b.Syscall == "accept" || b.Syscall == "accept4" {
			s := "waits for connections in " + b.Syscall + " on a listening socket"
			if l := v.listeningText(w.PID, b.On); l != "" {
				s += " (" + safe(l) + ")"
			}
			return s
		}
		return "waits for requests in " + b.Syscall + " (an event loop of a process listening on " + safe(v.listeningText(w.PID, "")) + ")"
	case WaitTimer:
		if isTimer(b) && (b.Syscall == "futex" || strings.Contains(b.Syscall, "poll") || strings.Contains(b.Syscall, "select")) {
			return fmt.Sprintf("waits on a timer: %s with a timeout, woken by it in %d of %d readings", b.Syscall, w.TimerWakeups, w.Readings)
		}
		return "waits on a timer in " + b.Syscall
	case WaitLock:
		return "waits on a lock (" + b.Syscall + ") for work from the thread that takes requests"
	case WaitChild:
		return "waits for its child in " + b.Syscall
	case WaitObserver:
		return "waits in " + b.Syscall + " for its only child, gpufeed itself (the observer, left out of the job)"
	}
	return string(w.Kind)
}

// stillClause says that nothing in the job moved over the span, and what
// its own timers cost meanwhile. A poll or sleep loop re-arming is
// housekeeping (thresholds.TimerPollMaxCPUPerWake), but its CPU is not
// nothing: a Python loop doing 60 µs of work after each 1 ms sleep uses
// 5.5 % of a core, and "nothing moved" alone read false for it.
func stillClause(m Measure, span time.Duration) string {
	s := "nothing in the job moved over " + fmtSeconds(span)
	if m.TimerWakeups > 0 {
		s += fmt.Sprintf(" but its own timers (a thread woken out of a timed wait in %s, %.2f %% of one core in all)",
			plural(int(m.TimerWakeups), "reading", "readings"), m.CPUCores*100)
	}
	return s
}

// idleFinding is the verdict-carrying finding of an idle job: what it
// waits in, that its GPU is idle, and what would make it busy.
func idleFinding(v *view, p Progress) finding.Finding {
	id := p.Idle
	m := id.Measure
	window := strconv.Itoa(id.Samples) + " samples over " + fmtSeconds(id.Span)
	since := ""
	if !id.Whole {
		since = " (" + p.Since + ")"
		window += ", " + p.Since
	}
	// One description per distinct wait, requests first, then timers.
	type group struct {
		kind WaitKind
		what string
		pid  int
		tids []int
		w    ThreadWait
	}
	var groups []*group
	index := map[string]*group{}
	for _, w := range m.Waits {
		what := v.describeWait(w)
		key := strconv.Itoa(w.PID) + "|" + what
		g := index[key]
		if g == nil {
			g = &group{kind: w.Kind, what: what, pid: w.PID, w: w}
			index[key] = g
			groups = append(groups, g)
		}
		g.tids = append(g.tids, w.TID)
	}
	order := map[WaitKind]int{WaitObserver: 0, WaitRequest: 1, WaitTimer: 2, WaitLock: 3, WaitChild: 4}
	sort.SliceStable(groups, func(i, j int) bool { return order[groups[i].kind] < order[groups[j].kind] })
	lead := groups[0]
	who := v.procName(lead.pid)
	if len(lead.tids) > 1 {
		who += " (" + plural(len(lead.tids), "thread", "threads") + ")"
	}
	var others []string
	for _, g := range groups[1:] {
		others = append(others, plural(len(g.tids), "other thread", "other threads")+" "+strings.Replace(g.what, "waits", "wait", 1))
	}
	gpu := "no GPU was in view (and no thread waits on one)"
	if m.GPUVisible {
		gpu = fmt.Sprintf("the GPU is idle (the job's kernels ran at most %.0f %% of any sample)", m.GPUMaxUtil)
	}
	claim := "the job is idle: " + who + " " + lead.what
	if len(others) > 0 {
		claim += "; " + strings.Join(others, "; ")
	}
	claim += "; " + gpu + "; " + stillClause(m, id.Span) + since

	ev := make([]finding.Evidence, 0, len(groups)+5)
	at := "at " + fmtSeconds(v.span()) + " into the window"
	for _, g := range groups {
		b := g.w.Wait
		text := fmt.Sprintf("%s, state %c", b.Syscall, g.w.State)
		if b.On != "" {
			text += ", on " + safe(b.On)
		}
		if b.Wchan != "" && b.Wchan != "0" {
			text += ", wchan " + safe(b.Wchan)
		}
		if b.Timed {
			text += ", with a timeout"
		}
		src := fmt.Sprintf("/proc/%d/task/TID/{stat,wchan,syscall}", g.pid)
		if g.kind == WaitRequest {
			src += fmt.Sprintf(", /proc/%d/net/{tcp,tcp6,unix}", g.pid)
		}
		ev = append(ev, finding.Evidence{What: v.procName(g.pid) + ": " + plural(len(g.tids), "thread", "threads") + " " + tidList(v, g.tids),
			Text: text, Window: at, Source: src})
	}
	ev = append(ev, finding.Evidence{What: fmt.Sprintf("wake-ups out of waits with no timeout, counted once a reading (%s)", plural(m.Threads, "live thread", "live threads")), Value: float64(m.Wakeups),
		Window: window, Source: wakeSource})
	if m.TimerWakeups > 0 {
		ev = append(ev, finding.Evidence{What: "wake-ups out of timed waits, counted once a reading (their own timers)", Value: float64(m.TimerWakeups), Window: window,
			Source: "/proc/PID/task/TID/schedstat, /proc/PID/task/TID/syscall"})
	}
	ev = append(ev, finding.Evidence{What: fmt.Sprintf("CPU gained by all %d live threads of the job", m.Threads), Value: round(m.CPUCores*100, 3), Unit: "% of one core",
		Window: window, Source: cpuSource(m)})
	if m.IOVisible {
		ev = append(ev, finding.Evidence{What: "bytes read and written by the job (rchar + wchar, pipes and sockets included)", Value: round(m.IOBytesPerSec, 1), Unit: "B/s", Window: window, Source: "/proc/PID/io"})
	}
	ev = append(ev, gpuEvidence(v, m, window)...)

	var listening []string
	for _, pid := range v.sortedPIDs() {
		if v.alive(pid) && listens(v.procs[pid]) {
			listening = append(listening, v.procs[pid].Listening.Names()...)
		}
	}
	decision := "Nothing is wrong and there is nothing to speed up: an idle job keeps its GPU idle. "
	switch {
	case lead.kind == WaitObserver:
		decision = "Nothing of the job runs but gpufeed itself: the process it watches only waits for gpufeed, its child. " +
			"Point --pid at the job's own process (the training process, or the launcher of its ranks), or start the job under gpufeed: gpufeed diagnose -- COMMAND."
	case lead.kind == WaitRequest:
		decision += "It waits for requests"
		if len(listening) > 0 {
			decision += " on " + safe(strings.Join(listening, ", "))
		}
		decision += ": to see how it feeds the GPU, diagnose it while it serves real traffic or a load generator sends it concurrent requests (batching requests is then what keeps the GPU busy)."
	default:
		decision += "It waits for time to pass (" + lead.w.Wait.Syscall + "): attach while it does its work (--pid during its busy phase), or run it with the work it is waiting to do."
	}
	return finding.Finding{
		ID:       "job-idle",
		Severity: finding.Info,
		Claim:    claim,
		Evidence: ev,
		Decision: decision,
		Supports: finding.Idle,
		Subject:  "job",
	}
}

func cpuSource(m Measure) string {
	if m.CPUFromTicks {
		return "/proc/PID/task/TID/stat (utime+stime)"
	}
	return "/proc/PID/task/TID/schedstat"
}

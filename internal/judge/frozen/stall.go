package frozen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// stalledFinding is the verdict-carrying finding: nothing progresses.
func stalledFinding(v *view, p Progress, blocked []BlockedThread, deaths []Death) finding.Finding {
	window := strconv.Itoa(p.Samples) + " samples over " + fmtSeconds(p.Span)
	if p.Since != "" {
		window += ", " + p.Since
	}
	ev := []finding.Evidence{
		{What: fmt.Sprintf("wake-ups out of waits with no timeout, counted once a reading (%s; each is something arriving: data, a lock released, a synchronise returning)", plural(p.Threads, "live thread", "live threads")),
			Value: float64(p.Wakeups), Window: window, Source: wakeSource},
		{What: fmt.Sprintf("CPU gained by all %d live threads of the job", p.Threads), Value: round(p.CPUCores*100, 3), Unit: "% of one core", Window: window, Source: cpuSource(p.Measure)},
		{What: "CPU of the busiest thread, " + v.procName(p.BusiestPID) + " " + v.threadName(p.BusiestTID), Value: round(p.BusiestCores*100, 3), Unit: "% of one core", Window: window, Source: cpuSource(p.Measure)},
	}
	if p.TimerWakeups > 0 {
		ev = append(ev, finding.Evidence{What: "wake-ups out of timed waits, counted once a reading (their own timers: watchdogs, heartbeats; no sign of progress)", Value: float64(p.TimerWakeups),
			Window: window, Source: "/proc/PID/task/TID/schedstat, /proc/PID/task/TID/syscall"})
	}
	if p.IOVisible {
		ev = append(ev, finding.Evidence{What: "bytes read and written by the job (rchar + wchar, pipes and sockets included)", Value: round(p.IOBytesPerSec, 1), Unit: "B/s", Window: window, Source: "/proc/PID/io"})
	}
	ev = append(ev, gpuEvidence(v, p.Measure, window)...)
	gpu := quietGPU(p)
	if p.GPUVisible && p.GPUSpinning() {
		switch {
		case p.CompletionsVisible:
			gpu = fmt.Sprintf("the GPUs stayed at %.0f %% or more yet completed none of the job's work: a kernel spinning, such as a collective waiting for a peer that never arrives", p.GPUMinUtil)
		default:
			gpu = fmt.Sprintf("the GPUs stayed at %.0f %% or more while no thread waiting on them was woken: a collective kernel spinning on a peer that never arrives (this device does not report completed work; one kernel running longer than the window looks the same)", p.GPUMinUtil)
		}
	}
	return finding.Finding{
		ID:       "job-stalled",
		Severity: finding.Critical,
		Claim:    "the job is stalled: " + quietClaim(p, gpu) + " over " + fmtSeconds(p.Span) + sinceText(p),
		Evidence: ev,
		Decision: stallDecision(v, p, blocked, deaths),
		// Sources: 004 (The OOM killer; The NCCL hang)
		Supports: finding.Stalled,
		Subject:  "job",
	}
}

// explainsStall lists the findings that explain a stall whatever the
// threads' waits: a member that died or is missing, a lost GPU, a thread
// stuck in the kernel, ranks told apart by their stacks.
var explainsStall = []string{"member-died", "rank-missing", "gpu-fell-off-bus", "hung-task", "uninterruptible-sleep", "rank-positions"}

// stallUnseen says whether a stall rests on nothing but the quiet itself:
// none of r's findings explains it, the GPU is not seen spinning, and no
// live thread was seen in a wait a stall is made of (a lock outside a
// server, a peer, the device, the disk) while at least one wait could not
// be read. An observer without the privilege to read another user's
// threads' waits (wchan and syscall need CAP_SYS_PTRACE) sees a sleeping
// job exactly as a deadlocked one.
func stallUnseen(r Result) bool {
	if len(r.Deaths) > 0 || r.Progress.GPUSpinning() {
		return false
	}
	for _, f := range r.Findings {
		if slices.Contains(explainsStall, f.ID) {
			return false
		}
	}
	unknown := false
	for _, w := range r.Progress.Waits {
		switch w.Kind {
		case WaitUnknown:
			unknown = unknown || w.State == 'S'
		case WaitLock, WaitPeer, WaitDevice, WaitDisk:
			return false
		}
	}
	return unknown
}

// unseenFinding is the stall finding of a job whose quiet cannot be told
// from idleness: what was measured, and how to see where it waits.
func unseenFinding(v *view, p Progress, stalled finding.Finding) finding.Finding {
	n := 0
	for _, w := range p.Waits {
		if w.Kind == WaitUnknown && w.State == 'S' {
			n++
		}
	}
	return finding.Finding{
		ID:       "job-waits-unseen",
		Severity: finding.Warning,
		Claim: fmt.Sprintf("nothing in the job moved over %s: %s; but where %s is not visible, so a stuck job (stalled) and one waiting for work or for time to pass (idle) read the same",
			fmtSeconds(p.Span)+sinceText(p), quietClaim(p, quietGPU(p)), safetext.Count(n, "sleeping thread waits", "sleeping threads wait")),
		Evidence: stalled.Evidence,
		Decision: "See where the threads wait before acting: " + unseenHow(v) + ". A thread in a timer sleep, accept or an event loop is idle; one on a lock, a pipe, a socket or the device, with nothing moving, is stalled.",
		// Sources: 004 (frozen jobs: follow the wait)
		Subject: "job",
	}
}

// quietClaim is what the quiet measures read over a span, in words: the
// wake-ups, the CPU, the I/O and gpu (what the GPUs did).
func quietClaim(p Progress, gpu string) string {
	io := "I/O not visible"
	if p.IOVisible {
		io = "moved " + strconv.FormatFloat(p.IOBytesPerSec, 'f', 0, 64) + " B/s of I/O"
	}
	return fmt.Sprintf("none of its %d live threads was woken out of a wait with no timeout, they gained %.2f %% of one core, %s and %s",
		p.Threads, p.CPUCores*100, io, gpu)
}

// quietGPU is what the GPUs did over a quiet span, short of spinning.
func quietGPU(p Progress) string {
	if p.GPUVisible {
		return "the GPUs stayed idle"
	}
	return "no GPU was visible"
}

// unseenHow says how to read the waits gpufeed could not.
func unseenHow(v *view) string {
	pid := v.tl.Meta.Target.PID
	return fmt.Sprintf("run gpufeed as root, with CAP_SYS_PTRACE, or as the job's own user (each thread's wait is in /proc/PID/task/TID/wchan and syscall), or `py-spy dump --pid %d` as that user", pid)
}

// gpuEvidence is what the device said about the job's work over a span:
// its highest (and, pinned, lowest) utilisation, the whole device's when
// another process shares it, the operations it completed for the job.
func gpuEvidence(v *view, m Measure, window string) []finding.Evidence {
	if !m.GPUVisible {
		return nil
	}
	src := v.tl.Meta.GPUSource
	if src == "" {
		src = "GPU samples"
	}
	whose := "GPU utilisation"
	if m.GPUPerProcess {
		whose = "GPU utilisation by the job's processes (the device's per-process share)"
	}
	ev := []finding.Evidence{{What: whose + ", highest sample (GPUs " + ints(m.GPUDevices) + ")", Value: round(m.GPUMaxUtil, 1), Unit: "%", Window: window, Source: src}}
	if m.GPUSpinning() {
		ev = append(ev, finding.Evidence{What: whose + ", lowest sample", Value: round(m.GPUMinUtil, 1), Unit: "%", Window: window, Source: src})
	}
	if m.GPUPerProcess && m.DeviceMaxUtil > m.GPUMaxUtil+thresholds.StallMaxGPUUtil {
		ev = append(ev, finding.Evidence{What: "the whole device's utilisation, highest sample: other processes' work on a shared GPU (a neighbour), not the job's", Value: round(m.DeviceMaxUtil, 1), Unit: "%", Window: window, Source: src})
	}
	if m.CompletionsVisible {
		ev = append(ev, finding.Evidence{What: "operations the device completed for the job", Value: float64(m.Completions), Window: window, Source: src + " (per-process completed operations)"})
	}
	return ev
}

func round(x float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', digits, 64), 64)
	return v
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func sinceText(p Progress) string {
	if p.Since == "" {
		return ""
	}
	return " (" + p.Since + ")"
}

// childExits maps each pid to the times (last sample) at which its child
// processes were last seen before they exited.
func (v *view) childExits() map[int][]int64 {
	out := map[int][]int64{}
	for pid, p := range v.procs {
		if v.alive(pid) {
			continue
		}
		if t, ok := v.lastProcT[pid]; ok {
			out[p.PPID] = append(out[p.PPID], t)
		}
	}
	return out
}

// memberExits is childExits for the children sampled in two readings or
// more: members of the job, not a fork storm's children glimpsed once.
func (v *view) memberExits() map[int][]int64 {
	out := map[int][]int64{}
	for pid, p := range v.procs {
		if v.alive(pid) {
			continue
		}
		if t, ok := v.lastProcT[pid]; ok && t > p.FirstSeen {
			out[p.PPID] = append(out[p.PPID], t)
		}
	}
	return out
}

// reapedBetween says whether the readings [from, to) may hold the reaping
// of a child: the child was last seen before to, and no more than
// thresholds.ReapGrace before from. The parent wakes to reap it (and the kernel folds
// the child's I/O counters into the parent's) some time after its last
// sample: at once on a quiet host, a few readings later on a loaded one.
func reapedBetween(exits []int64, from, to int64) bool {
	for _, t := range exits {
		if t < to && t+int64(thresholds.ReapGrace) >= from {
			return true
		}
	}
	return false
}

// stallDecision is the change a stall calls for, fitted to the wait found:
// a collective (a dead or missing member, a rank of a distributed job, NCCL
// in the job, a GPU spinning on a peer) gets the distributed advice; a job
// that waits on itself gets the wait followed: a pipe and its writer (or
// that no thread of the job writes it), a lock that threads of one process
// wait on while another of them reads, threads waiting on each other's
// locks and nothing else, a socket and the process at its other end.
func stallDecision(v *view, p Progress, blocked []BlockedThread, deaths []Death) string {
	const first = "Nothing moves, so profiling cannot help: "
	if len(deaths) > 0 || p.GPUSpinning() || v.distributed() {
		loud, _ := v.failLoudly()
		return first + "read the findings that follow (a member that died, where each thread waits). A frozen distributed job is usually a dead rank whose peers wait in a collective forever: check the kernel log for kills (`dmesg -T | grep -i 'killed process'`), and " + loud + " so survivors fail loudly next time."
	}
	type reader struct {
		b  BlockedThread
		on string
	}
	var pipes, sockets []reader
	futex := map[int][]int{} // pid: tids waiting on a futex
	writers := map[string][]BlockedThread{}
	for _, b := range blocked {
		if b.Exited {
			continue
		}
		switch {
		case b.Syscall == "futex" || b.Syscall == "futex_waitv":
			futex[b.PID] = append(futex[b.PID], b.TID)
		case strings.HasPrefix(b.On, "pipe:") && isWrite(b.Syscall):
			writers[b.On] = append(writers[b.On], b)
		case strings.HasPrefix(b.On, "pipe:"):
			pipes = append(pipes, reader{b, b.On})
		case strings.HasPrefix(b.On, "socket:"):
			sockets = append(sockets, reader{b, b.On})
		}
	}
	var say []string
	if len(pipes) > 0 {
		r := pipes[0]
		who := v.procName(r.b.PID) + " " + v.threadName(r.b.TID)
		inode := strings.TrimSuffix(strings.TrimPrefix(r.on, "pipe:["), "]")
		if w := writers[r.on]; len(w) > 0 {
			say = append(say, fmt.Sprintf("%s waits to read %s while its writer, %s %s, is blocked writing it: one of them holds what the other needs", who, safe(r.on), v.procName(w[0].PID), v.threadName(w[0].TID)))
		} else {
			say = append(say, fmt.Sprintf("%s waits to read %s and no thread of the job was seen writing it: its writer is another process (a worker or peer that died) or none "+
				"(`ls -l /proc/*/fd 2>/dev/null | grep 'pipe:\\[%s\\]'` lists its holders); give the read a timeout", who, safe(r.on), inode))
		}
		if tids := futex[r.b.PID]; len(tids) > 0 {
			say = append(say, fmt.Sprintf("%s of pid %d %s on a lock or condition (futex), likely the reader's: do not block on input while holding a lock",
				plural(len(tids), "other thread", "other threads"), r.b.PID, map[bool]string{true: "waits", false: "wait"}[len(tids) == 1]))
			delete(futex, r.b.PID)
		}
	}
	if len(sockets) > 0 {
		r := sockets[0]
		say = append(say, fmt.Sprintf("%s %s waits to read %s, for the process at its other end (`ss -xp` or `ss -tp` names it): a peer, a server or a worker that stopped answering; give the call a timeout",
			v.procName(r.b.PID), v.threadName(r.b.TID), safe(r.on)))
	}
	if len(pipes) == 0 && len(sockets) == 0 {
		for _, pid := range v.sortedPIDs() {
			if tids := futex[pid]; len(tids) >= 2 {
				say = append(say, fmt.Sprintf("%d threads of %s wait on locks or conditions (futex) and on nothing else: they wait on each other, a deadlock. Take locks in one order everywhere, or with timeouts", len(tids), v.procName(pid)))
				break
			}
		}
	}
	stacks := " `gpufeed diagnose --py-stacks` shows the Python line each thread waits on."
	if v.hasPyStacks() {
		stacks = " The Python stacks below show the line each thread waits on."
	}
	if len(say) == 0 {
		return first + "follow each thread's wait (the findings that follow say where each waits): a read waits for its writer, a futex for a lock or condition another thread holds." + stacks
	}
	return first + strings.Join(say, "; ") + "." + stacks
}

// hasPyStacks says whether the window read the job's Python stacks
// (--py-stacks): the decision then points at them, not at the flag.
func (v *view) hasPyStacks() bool {
	return slices.ContainsFunc(v.tl.Events, func(e timeline.Event) bool { return e.Kind == timeline.EventPyStacks })
}

// isWrite says a syscall writes.
func isWrite(sc string) bool {
	switch sc {
	case "write", "writev", "pwrite64", "pwritev", "pwritev2", "sendmsg", "sendto", "splice", "vmsplice":
		return true
	}
	return false
}

// distributed says the job is one of several ranks or runs NCCL: a stall is
// then most likely a collective waiting for a peer.
func (v *view) distributed() bool {
	for _, pid := range v.sortedPIDs() {
		p := v.procs[pid]
		if p.Exited {
			continue
		}
		if isRankProcess(p) || v.backendOf(pid).nccl {
			return true
		}
	}
	return false
}

package judge

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// Rules on the job's syscall summary (counted in the kernel per thread
// over the window; diagnose --profile).
func init() {
	register(Rule{ID: "thread-ioctls-in-loop", Title: "A thread of the job calls into the GPU driver's device files thousands of times a second (allocating or synchronising in the loop)",
		// Sources: 000 (ioctl storms on /dev/nvidia* as the syscall-level
		// sign of allocations and synchronisations inside the training
		// loop); strace -c -f as the manual reading of it.
		Run: runIoctls})
	register(Rule{ID: "thread-futex-dominated", Title: "The launch thread spends most of the window waiting on a futex (a lock, a condition, a queue), and who wakes it",
		// Sources: 000 (futex-dominated threads in strace -c, who waits on
		// whom); futex(2).
		Run: runFutex})
	register(Rule{ID: "main-thread-polls-dataloader", Title: "The launch thread waits in poll and read on the DataLoader workers' queues",
		// Sources: 000 (poll/read on the DataLoader's queues in strace -f of
		// the main process); PyTorch's DataLoader (workers send batches
		// through multiprocessing queues: a pipe the main process polls).
		Run: runQueuePolls})
}

// The least a syscall pattern needs: a thousand ioctls a second from one
// thread ("thousands per step" at a step or more a second); half the
// window inside futex waits; a fifth of it inside polls and reads of the
// workers' queues.
const (
	ioctlsPerSecond    = 1000
	futexDominantShare = 0.5
	queueWaitShare     = 0.2
)

func syscallsOf(in *Input) *profile.SyscallSummary {
	if in.Timeline == nil {
		return nil
	}
	s := in.Timeline.Meta.Syscalls
	if s == nil || s.State != profile.StateOn || s.WindowNS <= 0 {
		return nil
	}
	return s
}

func syscallWindow(s *profile.SyscallSummary) string {
	return fmt.Sprintf("over %.1f s", float64(s.WindowNS)/1e9)
}

const syscallSource = "raw_syscalls sys_enter/sys_exit counted in the kernel (eBPF)"

// runIoctls: the busiest ioctl caller of the job. On a GPU host the
// driver's ioctls on /dev/nvidia* are what cudaMalloc, cudaFree, a
// blocking synchronisation and event queries cost in the kernel: thousands
// a second mean the loop allocates or synchronises.
func runIoctls(in *Input) []finding.Finding {
	s := syscallsOf(in)
	if s == nil {
		return nil
	}
	// Only ioctls that succeeded, from a process that talks to the GPU's
	// driver, count: Python's open() asks every file it opens whether it
	// is a terminal (ioctl TCGETS, failing with ENOTTY), so a loop reading
	// files makes thousands of failed ioctls a second with no GPU at all.
	var best profile.ThreadSyscalls
	var bestN uint64
	for _, th := range s.Threads {
		r := th.Stat("ioctl")
		if n := r.Calls - min(r.Errors, r.Calls); n > bestN && talksToDriver(in, th.PID, th.TID) {
			best, bestN = th, n
		}
	}
	secs := float64(s.WindowNS) / 1e9
	rate := float64(bestN) / secs
	if rate < ioctlsPerSecond {
		return nil
	}
	r := best.Stat("ioctl")
	who := fmt.Sprintf("%s (pid %d, tid %d)", best.Comm, best.PID, best.TID)
	isLaunch := in.Job.Launch != nil && in.Job.Launch.T.Key.TID == best.TID
	if isLaunch {
		who = "the launch thread " + threadName(in.Job.Launch.T)
	}
	sev := finding.Info
	if isLaunch && in.starved() {
		sev = finding.Warning
	}
	f := finding.Finding{ID: "thread-ioctls-in-loop", Severity: sev, Subject: fmt.Sprintf("pid %d tid %d (%s)", best.PID, best.TID, best.Comm),
		Claim: fmt.Sprintf("%s made %.0f ioctl calls a second that succeeded (%.0f%% of the window inside ioctls)", who, rate, 100*float64(r.TimeNS)/float64(s.WindowNS))}
	f.Evidence = append(f.Evidence,
		ev("ioctl calls that succeeded", rate, "/s", syscallWindow(s), syscallSource),
		ev("time inside them", 100*float64(r.TimeNS)/float64(s.WindowNS), "% of the window", syscallWindow(s), syscallSource))
	if r.Errors > 0 {
		f.Evidence = append(f.Evidence, ev("of which failed", float64(r.Errors), "calls", syscallWindow(s), syscallSource))
	}
	if d := in.Timeline.Meta.DriverCalls; d != nil && d.State == profile.StateOn {
		if td, ok := d.Thread(best.TID); ok {
			f.Evidence = append(f.Evidence,
				ev("the same thread's CUDA allocations and frees", d.PerSecond(td.Allocs+td.Frees), "/s", fmt.Sprintf("over %.1f s", float64(d.WindowNS)/1e9), "eBPF uprobes on the CUDA driver"),
				ev("the same thread's CUDA synchronisations", d.PerSecond(td.Syncs), "/s", fmt.Sprintf("over %.1f s", float64(d.WindowNS)/1e9), "eBPF uprobes on the CUDA driver"))
			if td.Launches > 0 && d.LaunchContinuous {
				f.Evidence = append(f.Evidence, ev("ioctls per kernel launch", float64(bestN)/float64(td.Launches), "calls", syscallWindow(s), syscallSource+"; eBPF uprobes on the CUDA driver"))
			}
		}
	}
	f.Decision = "Find what calls into the driver in the loop: allocations (the caching allocator emptied by torch.cuda.empty_cache(), tensors of changing shapes; keep shapes fixed, preallocate) or synchronisations (.item(), .cpu(), torch.cuda.synchronize(), blocking copies): move them out of the step."
	return []finding.Finding{f}
}

// talksToDriver says the thread's process holds a GPU's device files
// (/dev/nvidia*, read at the end of the window) or was seen calling the
// CUDA driver (its uprobes): its ioctls can be the driver's.
func talksToDriver(in *Input, pid, tid int) bool {
	if d := in.Timeline.Meta.DriverCalls; d != nil && d.State == profile.StateOn {
		if _, ok := d.Thread(tid); ok {
			return true
		}
	}
	p := in.View.ProcByPID(pid)
	return p != nil && p.Info.DeviceChannels != nil && slices.ContainsFunc(p.Info.DeviceChannels.Channels, gpu.IsNVIDIANode)
}

// runFutex: the launch thread spent half the window or more inside futex
// waits (a thread blocked the whole window included): it waits on a lock
// (the GIL, a framework mutex), a condition or a queue. The futex words it
// waited on longest say who woke them, as far as the window shows.
func runFutex(in *Input) []finding.Finding {
	s := syscallsOf(in)
	launchThread := in.Job.Launch
	if s == nil || launchThread == nil {
		return nil
	}
	th, ok := s.Thread(launchThread.T.Key.TID)
	if !ok {
		return nil
	}
	wait := th.Stat("futex").TimeNS + th.Stat("futex_wait").TimeNS
	if p := th.InProgress; p != nil && (p.Name == "futex" || p.Name == "futex_wait") {
		wait += p.SinceNS
	}
	share := float64(wait) / float64(s.WindowNS)
	if share < futexDominantShare {
		return nil
	}
	sev := finding.Info
	if in.starved() {
		sev = finding.Warning
	}
	f := finding.Finding{ID: "thread-futex-dominated", Severity: sev, Subject: threadSubject(launchThread.T),
		Claim: fmt.Sprintf("the launch thread %s was inside futex waits %.0f%% of the window%s", threadName(launchThread.T), 100*share, wakersText(s, th))}
	f.Evidence = append(f.Evidence,
		ev("launch thread time inside futex waits (a wait still going at the end included)", 100*share, "% of the window", syscallWindow(s), syscallSource),
		ev("its futex calls", float64(th.Stat("futex").Calls+th.Stat("futex_wait").Calls), "calls", syscallWindow(s), syscallSource))
	for _, w := range waitedWords(s, th, 3) {
		var wakers []string
		for _, k := range w.Wakers {
			wakers = append(wakers, fmt.Sprintf("tid %d %s (%d wakes)", k.TID, k.Comm, k.Calls))
		}
		text := "none seen in the window"
		if len(wakers) > 0 {
			text = strings.Join(wakers, ", ")
		}
		f.Evidence = append(f.Evidence, evText(fmt.Sprintf("woken on futex word %#x (waited %s there)", w.Addr, time.Duration(waitedOn(w, th.TID)).Round(time.Millisecond)),
			text, syscallWindow(s), syscallSource+", futex(2)'s address and operation"))
	}
	f.Decision = "See what the launch thread waits for (py-spy dump --pid PID, or diagnose --py-stacks): the GIL held by another Python thread (move that work to a process), a lock held by a logging or checkpoint thread, or a queue no producer fills fast enough (more DataLoader workers)."
	return []finding.Finding{f}
}

// waitedWords are the futex words thread th waited on longest, at most n.
func waitedWords(s *profile.SyscallSummary, th profile.ThreadSyscalls, n int) []profile.FutexWord {
	var out []profile.FutexWord
	for _, w := range s.Futexes {
		if w.PID == th.PID && waitedOn(w, th.TID) > 0 {
			out = append(out, w)
		}
	}
	// s.Futexes is ordered by all waiters' time; order by this thread's.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if waitedOn(out[j], th.TID) > waitedOn(out[i], th.TID) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func waitedOn(w profile.FutexWord, tid int) int64 {
	for _, t := range w.Waiters {
		if t.TID == tid {
			return t.TimeNS
		}
	}
	return 0
}

// wakersText names who woke the word the thread waited on longest.
func wakersText(s *profile.SyscallSummary, th profile.ThreadSyscalls) string {
	ws := waitedWords(s, th, 1)
	if len(ws) == 0 {
		return ""
	}
	w := ws[0]
	if len(w.Wakers) == 0 {
		return ", and no thread of the job woke the word it waited on in the window"
	}
	k := w.Wakers[0]
	return fmt.Sprintf(", mostly on one word that thread %d (%s) woke %d times", k.TID, k.Comm, k.Calls)
}

// queueCalls are the calls a process waits in for a multiprocessing
// queue's pipe or socket.
var queueCalls = []string{"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "read", "recvfrom", "recvmsg"}

// runQueuePolls: the GPU starved while the launch thread of a job with
// DataLoader workers spent a fifth of the window or more inside polls and
// reads: it waited for the workers' batches (preprocessing-bound; the
// workers cannot keep up).
func runQueuePolls(in *Input) []finding.Finding {
	s := syscallsOf(in)
	launchThread := in.Job.Launch
	if s == nil || launchThread == nil || !in.starved() {
		return nil
	}
	workers := 0
	for _, p := range in.workerProcs() {
		if p.Role == "dataloader-worker" {
			workers++
		}
	}
	if workers == 0 {
		return nil
	}
	th, ok := s.Thread(launchThread.T.Key.TID)
	if !ok {
		return nil
	}
	var ns int64
	var calls uint64
	var parts []string
	for _, name := range queueCalls {
		r := th.Stat(name)
		ns += r.TimeNS
		calls += r.Calls
		if r.Calls > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, r.Calls))
		}
	}
	if p := th.InProgress; p != nil && containsName(queueCalls, p.Name) {
		ns += p.SinceNS
	}
	share := float64(ns) / float64(s.WindowNS)
	if share < queueWaitShare {
		return nil
	}
	sev := finding.Info
	supports := finding.Class("")
	if pre := in.Attribution.Share[finding.Preprocessing]; pre >= thresholds.ModerateSharePct {
		sev, supports = in.causeSeverity(pre), finding.Preprocessing
	}
	secs := float64(s.WindowNS) / 1e9
	f := finding.Finding{ID: "main-thread-polls-dataloader", Severity: sev, Supports: supports, Subject: threadSubject(launchThread.T),
		Claim: fmt.Sprintf("the launch thread %s was inside polls and reads of its %d DataLoader workers' queues %.0f%% of the window (%s)",
			threadName(launchThread.T), workers, 100*share, strings.Join(parts, ", "))}
	f.Evidence = append(f.Evidence,
		ev("launch thread time inside poll, select, epoll and read calls (a wait still going at the end included)", 100*share, "% of the window", syscallWindow(s), syscallSource),
		ev("those calls", float64(calls)/secs, "/s", syscallWindow(s), syscallSource),
		ev("DataLoader worker processes", float64(workers), "processes", "alive at the end of the window", "the observed process tree"))
	f.Decision = "The workers do not keep up: raise num_workers while a core stays free for the launch thread, make __getitem__ cheaper (decode less, cache, move transforms to the GPU), and set pin_memory=True and a prefetch_factor that covers a slow batch."
	return []finding.Finding{f}
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

package frozen

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// waking is a sleeping thread blocked where given that is scheduled in
// perTick times between samples, gaining cpuPerTick of CPU each time.
func waking(b *timeline.Blocked, perTick uint64, cpuPerTick uint64) func(int) timeline.ThreadSample {
	return func(i int) timeline.ThreadSample {
		return timeline.ThreadSample{State: 'S', RunNS: 5e6 + uint64(i)*cpuPerTick, Slices: 100 + uint64(i)*perTick, Blocked: b}
	}
}

// gpuProcs adds a device sample per tick listing processes with their own
// utilisation and, when done is set, their completed operations.
func (b *tlb) gpuProcs(index int, device func(int) float64, procs map[int]func(int) (float64, *uint64)) {
	for i := range b.tl.Ticks {
		u := device(i)
		s := gpu.Sample{Index: index, UtilPercent: &u}
		for pid, f := range procs {
			sm, done := f(i)
			s.Processes = append(s.Processes, gpu.Process{PID: pid, SMUtilPercent: &sm, CompletedOps: done})
		}
		b.tl.Ticks[i].GPUs = append(b.tl.Ticks[i].GPUs, s)
	}
}

func listening(p *timeline.ProcInfo, addr string, inode uint64) {
	p.Listening = &timeline.Listening{Sockets: []timeline.ListenSocket{{Proto: "tcp", Addr: addr, Inode: inode}}}
}

// TestSyncLoopIsProgress: one host thread blocked in recvfrom on the
// device channel, woken twice per 100 ms (a synchronise returning twenty
// times a second), gaining 0.6 % of a core, the GPU pinned at 98 %: it
// progresses. Before wake-ups were measured this was "stalled, a collective
// kernel spinning".
func TestSyncLoopIsProgress(t *testing.T) {
	for _, completions := range []bool{false, true} {
		b := newTL(31, 100*time.Millisecond)
		p := b.proc(10, 1, "python3", nil, nil)
		p.DeviceChannels = &timeline.DeviceChannels{Channels: []string{"socket:[300097]"}}
		b.thread(10, 10, "python3", waking(&timeline.Blocked{Syscall: "recvfrom", On: "socket:[300097]", Wchan: "unix_stream_read_generic"}, 2, 6e5))
		if completions {
			b.gpuProcs(0, func(int) float64 { return 98 }, map[int]func(int) (float64, *uint64){10: func(i int) (float64, *uint64) { return 98, u64(uint64(500 * i)) }})
		} else {
			b.gpuUtil(0, func(int) float64 { return 98 })
		}
		r := Analyze(b.tl, nil)
		if r.Progress.Stalled() || r.Progress.Idle != nil || r.Progress.Wakeups != 30 || r.Progress.WokenSlices != 60 || r.Progress.GPUSpinning() {
			t.Errorf("completions %v: a synchronise returning 20 times a second is progress: %+v", completions, r.Progress)
		}
		if completions && r.Progress.Completions != 15000 {
			t.Errorf("completions %d, want 15000", r.Progress.Completions)
		}
		none(t, r.Findings, "job-stalled")
		if v := Verdict(r); v != nil {
			t.Errorf("no frozen verdict for a working job: %+v", v)
		}
	}
}

// TestPreemptionsAreNotWakeups: a busy thread throttled by its cgroup's
// quota is read running at every reading, and its run count grows with each
// preemption. That is CPU, not something arriving: the claim names its CPU
// and no thread "woken out of a wait with no timeout". A thread read asleep
// at an interval's start still counts its wake-ups.
func TestPreemptionsAreNotWakeups(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
		// half a core, five slices a reading, a futex read once
		return timeline.ThreadSample{State: 'R', RunNS: 5e6 + uint64(i)*5e7, Slices: 100 + uint64(i)*5,
			Blocked: &timeline.Blocked{Syscall: "futex", On: "futex 0x10", Wchan: "futex_wait_queue"}}
	})
	p := MeasureProgress(b.tl)
	if p.Wakeups != 0 || p.WokenCount != 0 {
		t.Errorf("a thread read running throughout counted %d wake-ups (tid %d, %d)", p.Wakeups, p.WokenTID, p.WokenCount)
	}
	claims := strings.Join(p.HostProgress(), "; ")
	if strings.Contains(claims, "woken") || !strings.Contains(claims, "of one core") {
		t.Errorf("claims %q: want its CPU and no wake-ups", claims)
	}

	// Asleep at every other reading: the intervals that began asleep count.
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
		st := byte('S')
		if i%2 == 1 {
			st = 'R'
		}
		return timeline.ThreadSample{State: st, RunNS: 5e6 + uint64(i)*1e5, Slices: 100 + uint64(i)*2,
			Blocked: &timeline.Blocked{Syscall: "futex", On: "futex 0x10", Wchan: "futex_wait_queue"}}
	})
	// Each of them counts once: a second slice may be a preemption after
	// the wake-up, and the claim says readings, not times.
	if p := MeasureProgress(b.tl); p.Wakeups != 15 || p.WokenTID != 10 || p.WokenCount != 15 || p.WokenReadings != 30 || p.WokenSlices != 30 {
		t.Errorf("15 intervals begun asleep, 2 slices each: %d wake-ups (tid %d, in %d of %d readings, %d slices), want 15 of 30 and 30 slices",
			p.Wakeups, p.WokenTID, p.WokenCount, p.WokenReadings, p.WokenSlices)
	} else if got, want := strings.Join(p.HostProgress(), "; "), "tid 10 was woken out of a wait with no timeout in 15 of its 30 readings"; !strings.Contains(got, want) {
		t.Errorf("claims %q, want %q", got, want)
	}
}

// TestWakeupsOutOfUnseenWaitsSaySo: seen as another user, a thread's
// system call is not visible, so whether its wait had a timeout is not
// known. Its wake-ups still count as progress (the safe side against a
// false stall), but the claim says the kind of wait was not visible, not
// that it had no timeout. A thread whose wait was seen to have none is
// named first, even when woken in fewer readings.
func TestWakeupsOutOfUnseenWaitsSaySo(t *testing.T) {
	unseen := &timeline.Blocked{NotVisible: "syscall not visible: needs CAP_SYS_PTRACE (or the same uid with ptrace_scope 0)"}
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", waking(unseen, 3, 2e5))
	p := MeasureProgress(b.tl)
	got := strings.Join(p.HostProgress(), "; ")
	want := "tid 10 was woken in 30 of its 30 readings, out of a wait whose kind was not visible (syscall not visible: needs CAP_SYS_PTRACE (or the same uid with ptrace_scope 0)): its own timer's wake-ups would read the same"
	if p.Stalled() || !p.WakeupsUnseen() || got != want {
		t.Errorf("stalled %v, unseen %v, claims %q, want %q", p.Stalled(), p.WakeupsUnseen(), got, want)
	}
	if strings.Contains(got, "no timeout") {
		t.Errorf("claims %q: a wait not seen is not known to have no timeout", got)
	}

	// beside it, a thread woken out of a futex with no timeout in five
	// readings: the one named
	b.thread(10, 11, "worker", func(i int) timeline.ThreadSample {
		s := waking(&timeline.Blocked{Syscall: "futex", On: "futex 0x7f80", Wchan: "futex_do_wait"}, 1, 1e4)(i)
		if i > 5 {
			s.Slices = 105
		}
		return s
	})
	p = MeasureProgress(b.tl)
	got = strings.Join(p.HostProgress(), "; ")
	if want := "tid 11 was woken out of a wait with no timeout in 5 of its 30 readings"; got != want || p.WakeupsUnseen() {
		t.Errorf("claims %q (unseen %v), want %q", got, p.WakeupsUnseen(), want)
	}

	// read, but in no system call: the wait channel is said
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", waking(&timeline.Blocked{Wchan: "folio_wait_bit_common"}, 1, 1e4))
	p = MeasureProgress(b.tl)
	if got, want := strings.Join(p.HostProgress(), "; "), "out of a wait whose kind was not visible (it waited in folio_wait_bit_common, in no system call that was read)"; !strings.Contains(got, want) {
		t.Errorf("claims %q, want %q", got, want)
	}

	// one thread seen in both: both counts
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
		if i < 10 {
			return waking(unseen, 1, 1e4)(i)
		}
		return waking(&timeline.Blocked{Syscall: "read", On: "pipe:[7]", Wchan: "pipe_read"}, 1, 1e4)(i)
	})
	p = MeasureProgress(b.tl)
	if got, want := strings.Join(p.HostProgress(), "; "), "tid 10 was woken out of a wait with no timeout in 20 of its 30 readings, and out of one whose kind was not visible in 10 more"; got != want {
		t.Errorf("claims %q, want %q", got, want)
	}
}

// TestTimerWakeupsAreNotProgress: an NCCL hang as it looks on the host: the
// main thread in a futex that never returns, a watchdog woken ten times a
// second out of its timed condition wait, the GPU pinned by the spinning
// collective. The watchdog's wake-ups are its own timer: stalled.
func TestTimerWakeupsAreNotProgress(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, map[string]string{"RANK": "0"})
	b.thread(10, 10, "pt_main_thread", idle("futex", "futex 0x7f00", "futex_wait_queue"))
	b.thread(10, 11, "pt_nccl_watchdg", waking(&timeline.Blocked{Syscall: "futex", On: "futex 0x7f80", Timed: true}, 1, 2e4))
	b.gpuUtil(0, func(int) float64 { return 100 })
	r := Analyze(b.tl, nil)
	if !r.Progress.Stalled() || !r.Progress.GPUSpinning() || r.Progress.Wakeups != 0 || r.Progress.TimerWakeups != 30 {
		t.Fatalf("%+v", r.Progress)
	}
	f := one(t, r.Findings, "job-stalled")
	if !strings.Contains(f.Claim, "spinning on a peer") || !strings.Contains(f.Claim, "none of its 2 live threads was woken") {
		t.Errorf("claim %q", f.Claim)
	}
	if e, ok := evidence(f, "timed waits"); !ok || e.Value != 30 {
		t.Errorf("the timer wake-ups should be shown as no sign of progress: %+v", f.Evidence)
	}
	// The same watchdog in an untimed wait is woken by something: progress.
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 11, "worker", waking(&timeline.Blocked{Syscall: "futex", On: "futex 0x7f80"}, 1, 2e4))
	if p := MeasureProgress(b.tl); p.Stalled() || p.WokenCount != 30 {
		t.Errorf("woken 30 times out of an untimed wait is progress: %+v", p)
	}
}

// TestGPUBusyWithNoCompletionsIsStalled: where the device reports completed
// work, a GPU pinned busy that completes none of the job's operations is a
// spin (stalled); the claim says so.
func TestGPUBusyWithNoCompletionsIsStalled(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", idle("recvfrom", "socket:[5]", "unix_stream_read_generic"))
	b.gpuProcs(0, func(int) float64 { return 100 }, map[int]func(int) (float64, *uint64){10: func(int) (float64, *uint64) { return 100, u64(77) }})
	r := Analyze(b.tl, nil)
	if !r.Progress.Stalled() || !r.Progress.CompletionsVisible || r.Progress.Completions != 0 {
		t.Fatalf("%+v", r.Progress)
	}
	f := one(t, r.Findings, "job-stalled")
	if !strings.Contains(f.Claim, "completed none of the job's work") {
		t.Errorf("claim %q", f.Claim)
	}
	if e, ok := evidence(f, "operations the device completed"); !ok || e.Value != 0 {
		t.Errorf("%+v", f.Evidence)
	}
}

// TestIdleServer: a server in accept on its listening socket, the GPU idle
// while another process keeps the device busy (the device reports each
// process's share): idle, with what it waits in, the GPU, and what to do.
func TestIdleServer(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	p := b.proc(10, 1, "python3", []string{"python3", "serve.py"}, nil)
	listening(p, "127.0.0.1:8000", 4242)
	b.thread(10, 10, "python3", idle("accept4", "socket:[4242]", "inet_csk_accept"))
	b.quietProc(10)
	b.gpuProcs(0, func(int) float64 { return 97 }, map[int]func(int) (float64, *uint64){
		10: func(int) (float64, *uint64) { return 0, u64(3) },
		99: func(i int) (float64, *uint64) { return 97, u64(uint64(i * 40)) }, // a neighbour on the GPU
	})
	r := Analyze(b.tl, nil)
	if r.Progress.Stalled() || r.Progress.Idle == nil || !r.Progress.Idle.Whole {
		t.Fatalf("want idle: %+v", r.Progress)
	}
	none(t, r.Findings, "job-stalled")
	none(t, r.Findings, "blocked-threads")
	f := one(t, r.Findings, "job-idle")
	want := "the job is idle: pid 10 (python3) waits for connections in accept4 on a listening socket (tcp 127.0.0.1:8000); the GPU is idle (the job's kernels ran at most 0 % of any sample); nothing in the job moved over 3.0 s"
	if f.Claim != want || f.Severity != finding.Info || f.Supports != finding.Idle {
		t.Errorf("claim\n got %q\nwant %q (%s)", f.Claim, want, f.Severity)
	}
	if !strings.Contains(f.Decision, "tcp 127.0.0.1:8000") || !strings.Contains(f.Decision, "load") {
		t.Errorf("decision %q", f.Decision)
	}
	if e, ok := evidence(f, "whole device"); !ok || e.Value != 97 {
		t.Errorf("the neighbour's load on the GPU should be named: %+v", f.Evidence)
	}
	v := Verdict(r)
	if v == nil || v.Class != finding.Idle || v.Confidence != confIdle || v.Summary != want || len(v.Because) != 1 {
		t.Errorf("verdict %+v", v)
	}
}

// TestIdleOrStalledByWhatTheThreadsWaitOn: the same quiet process is idle or
// stalled depending on what its threads wait for.
func TestIdleOrStalledByWhatTheThreadsWaitOn(t *testing.T) {
	type th struct {
		syscall, on string
		timed       bool
	}
	for _, tc := range []struct {
		name      string
		threads   []th
		listens   bool
		env       map[string]string
		wantIdle  bool
		wantStall bool
	}{
		{"sleep", []th{{"clock_nanosleep", "", true}}, false, nil, true, false},
		{"accept without a listening table read", []th{{"accept", "socket:[1]", false}}, false, nil, true, false},
		{"asyncio server: epoll on a listening process", []th{{"epoll_wait", "anon_inode:[eventpoll]", false}}, true, nil, true, false},
		{"epoll without a listener waits on peers", []th{{"epoll_wait", "anon_inode:[eventpoll]", false}}, false, nil, false, true},
		{"thread pool behind accept", []th{{"accept4", "socket:[1]", false}, {"futex", "futex 0x1", false}, {"futex", "futex 0x2", false}}, true, nil, true, false},
		{"a rank's store listener does not make its locked threads idle", []th{{"poll", "", false}, {"futex", "futex 0x1", false}}, true, map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, false, true},
		{"a spawned rank (rank passed as an argument) is no server", []th{{"epoll_wait", "anon_inode:[eventpoll]", false}, {"futex", "futex 0x1", false}}, true, nil, false, true},
		{"a process told the world size is no server", []th{{"accept", "socket:[1]", false}, {"futex", "futex 0x1", false}}, true, map[string]string{"WORLD_SIZE": "2"}, false, true},
		{"waiters behind a lock held by a sleeping thread", []th{{"futex", "futex 0x1", false}, {"futex", "futex 0x1", false}, {"clock_nanosleep", "", true}}, false, nil, false, true},
		{"a timed lock wait that never returns is a lock", []th{{"futex", "futex 0x1", true}}, false, nil, false, true},
		{"a read on a pipe", []th{{"read", "pipe:[7]", false}}, false, nil, false, true},
		{"a wait not visible", []th{{"", "", false}}, false, nil, false, true},
	} {
		b := newTL(31, 100*time.Millisecond)
		var cmdline []string
		if strings.HasPrefix(tc.name, "a spawned rank") {
			cmdline = []string{"/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)", "--multiprocessing-fork"}
		}
		p := b.proc(10, 1, "python3", cmdline, tc.env)
		if tc.listens {
			listening(p, "127.0.0.1:29500", 1)
		}
		for i, x := range tc.threads {
			blk := &timeline.Blocked{Syscall: x.syscall, On: x.on, Timed: x.timed}
			if x.syscall == "" {
				blk = &timeline.Blocked{NotVisible: "needs CAP_SYS_PTRACE"}
			}
			b.thread(10, 10+i, "python3", func(int) timeline.ThreadSample { return timeline.ThreadSample{State: 'S', RunNS: 5e6, Blocked: blk} })
		}
		b.quietProc(10)
		r := Analyze(b.tl, nil)
		if (r.Progress.Idle != nil) != tc.wantIdle || r.Progress.Stalled() != tc.wantStall {
			var kinds []string
			for _, w := range r.Progress.Waits {
				kinds = append(kinds, string(w.Kind))
			}
			t.Errorf("%s: idle %v stalled %v, want %v %v (waits %v)", tc.name, r.Progress.Idle != nil, r.Progress.Stalled(), tc.wantIdle, tc.wantStall, kinds)
		}
	}
}

// TestPollerIsATimer: a thread woken over and over out of a poll with a
// timeout, nothing else: its wake-ups are its timer, and the job is idle,
// waiting on it.
func TestPollerIsATimer(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", waking(&timeline.Blocked{Syscall: "poll", Timed: true}, 1, 1e4))
	b.quietProc(10)
	r := Analyze(b.tl, nil)
	if r.Progress.Idle == nil || r.Progress.Stalled() || r.Progress.Waits[0].Kind != WaitTimer {
		t.Fatalf("%+v", r.Progress)
	}
	f := one(t, r.Findings, "job-idle")
	if !strings.Contains(f.Claim, "waits on a timer: poll with a timeout, woken by it in 30 of 30 readings") || !strings.Contains(f.Claim, "no GPU was in view") {
		t.Errorf("%q", f.Claim)
	}
	// What the timer's wake-ups cost is said beside "nothing moved": 30
	// wake-ups of 10 µs over 3 s, one a reading.
	if !strings.Contains(f.Claim, "nothing in the job moved over 3.0 s but its own timers (a thread woken out of a timed wait in 30 readings, 0.01 % of one core in all)") {
		t.Errorf("the claim does not say what the timer's wake-ups cost: %q", f.Claim)
	}
	if v := Verdict(r); v == nil || v.Confidence != confIdleNoGPU {
		t.Errorf("%+v", v)
	}
}

// TestIdleAfterStartUp: a server that starts (reads its modules, launches
// a warm-up kernel, its thread woken) in the first 0.6 s (its I/O read
// once a second shows until 1.0 s), then waits in
// accept for the rest of a 4 s window: idle since its start-up, not stalled
// and not idle over a window where it worked most of the time.
func TestIdleAfterStartUp(t *testing.T) {
	build := func(busyTicks int) *tlb {
		b := newTL(41, 100*time.Millisecond)
		p := b.proc(10, 1, "python3", nil, nil)
		listening(p, "127.0.0.1:8000", 4242)
		b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
			n := min(i, busyTicks)
			s := timeline.ThreadSample{State: 'S', RunNS: uint64(n) * 5e7, Slices: uint64(n) * 3}
			if i >= busyTicks {
				s.Blocked = &timeline.Blocked{Syscall: "accept4", On: "socket:[4242]"}
			} else {
				s.Blocked = &timeline.Blocked{Syscall: "read", On: "/usr/lib/python3.11/x.py"}
			}
			return s
		})
		b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
			return timeline.ProcSample{IO: &timeline.IO{RChar: uint64(min(i, busyTicks)) * 1e6}}, i%10 == 0 || i == 40
		})
		b.gpuUtil(0, func(i int) float64 {
			if i < busyTicks {
				return 30
			}
			return 0
		})
		return b
	}
	r := Analyze(build(6).tl, nil)
	id := r.Progress.Idle
	if id == nil || id.Whole || r.Progress.Stalled() || id.Span < 3*time.Second {
		t.Fatalf("want idle since start-up: %+v", r.Progress)
	}
	f := one(t, r.Findings, "job-idle")
	if !strings.Contains(f.Claim, "(since 1.0 s into the window, its last sign of progress)") {
		t.Errorf("%q", f.Claim)
	}
	// Busy for 2.5 s of 4: the quiet tail is not most of the window.
	if r := Analyze(build(25).tl, nil); r.Progress.Idle != nil || r.Progress.Stalled() {
		t.Errorf("a job busy most of the window is neither idle nor stalled: %+v", r.Progress)
	}
}

// TestIdleAfterAShortStartUpInView: a server started inside the window
// (diagnose -- CMD) that spent 2.5 s of a 4 s window starting (reading its
// modules in D state, a warm-up kernel completed, the GPU never above 1 %)
// and then waited in accept: idle since its start-up ended, though the
// quiet tail is under half the window. The same timeline attached to a
// server that started long before the window, one whose GPU ran steps, or
// one whose tail is under a second, is not judged idle by it; and a short
// tail never makes a job stalled.
func TestIdleAfterAShortStartUpInView(t *testing.T) {
	startupTicks := 25
	build := func(tailAccept bool, gpu float64, startTicks uint64) *tlb {
		b := newTL(41, 100*time.Millisecond)
		b.tl.Meta.UptimeNS = 100000e9                                      // boot was 100000 s before the window
		b.tl.Meta.Target = timeline.Target{PID: 10, StartTime: startTicks} // clock ticks since boot (100 Hz)
		p := b.proc(10, 1, "python3", []string{"python3", "serve.py"}, nil)
		listening(p, "127.0.0.1:8000", 4242)
		b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
			n := min(i, startupTicks)
			s := timeline.ThreadSample{State: 'S', RunNS: uint64(n) * 1e5, Slices: uint64(n) * 3}
			switch {
			case i >= startupTicks && tailAccept:
				s.Blocked = &timeline.Blocked{Syscall: "accept4", On: "socket:[4242]"}
			case i >= startupTicks:
				s.Blocked = &timeline.Blocked{Syscall: "recvfrom", On: "socket:[77]"} // a peer, not a client
			default:
				s.State = 'D'
				s.Blocked = &timeline.Blocked{Syscall: "read", On: "/usr/lib/python3.11/x.py"}
			}
			return s
		})
		b.gpuProcs(0, func(i int) float64 {
			if i < startupTicks {
				return gpu
			}
			return 0
		}, map[int]func(int) (float64, *uint64){10: func(i int) (float64, *uint64) {
			sm := 0.0
			if i < startupTicks {
				sm = gpu
			}
			if i < 5 {
				return sm, u64(0)
			}
			return sm, u64(1) // the warm-up kernel, completed during the start-up
		}})
		return b
	}
	const launchedAtWindowStart = 100000 * 100 // clock ticks: 100000 s after boot
	r := Analyze(build(true, 1, launchedAtWindowStart).tl, nil)
	id := r.Progress.Idle
	if id == nil || r.Progress.Stalled() || id.StartUp != 2500*time.Millisecond || id.Span != 1500*time.Millisecond {
		t.Fatalf("want idle since the start-up ended: %+v (idle %+v)", r.Progress, id)
	}
	f := one(t, r.Findings, "job-idle")
	if !strings.Contains(f.Claim, "waits for connections in accept4") || !strings.Contains(f.Claim, "(since 2.5 s into the window, the end of its start-up)") {
		t.Errorf("%q", f.Claim)
	}
	if v := Verdict(r); v == nil || v.Class != finding.Idle {
		t.Errorf("verdict %+v", v)
	}
	// Started 0.5 s before the window (cmd & gpufeed diagnose --pid $!): idle too.
	if r := Analyze(build(true, 1, launchedAtWindowStart-50).tl, nil); r.Progress.Idle == nil {
		t.Errorf("a start-up half a second before the window is in view: %+v", r.Progress)
	}
	for _, c := range []struct {
		what     string
		b        *tlb
		starting bool
	}{
		{"a server that started an hour before the window", build(true, 1, launchedAtWindowStart-360000), false},
		{"a job whose GPU ran steps before the tail", build(true, 40, launchedAtWindowStart), false},
		// Its start-up is in view and no step ran: still starting (a
		// rendezvous waiting for its peers).
		{"a job waiting on a peer at the end", build(false, 1, launchedAtWindowStart), true},
	} {
		r := Analyze(c.b.tl, nil)
		if r.Progress.Idle != nil || r.Progress.Stalled() {
			t.Errorf("%s: a short quiet tail is neither idle nor stalled: %+v", c.what, r.Progress)
		}
		none(t, r.Findings, "job-idle")
		if got := r.Progress.Starting != nil; got != c.starting {
			t.Errorf("%s: starting %v, want %v", c.what, got, c.starting)
		}
	}
	// A tail under a second: 3.2 s of start-up in a 4 s window.
	b := build(true, 1, launchedAtWindowStart)
	for i := 25; i < 33; i++ {
		for j := range b.tl.Ticks[i].Threads {
			s := &b.tl.Ticks[i].Threads[j]
			s.State, s.Slices, s.RunNS = 'D', uint64(i)*3, uint64(i)*1e5
			s.Blocked = &timeline.Blocked{Syscall: "read", On: "/usr/lib/python3.11/x.py"}
		}
	}
	r = Analyze(b.tl, nil)
	if r.Progress.Idle != nil {
		t.Errorf("a 0.8 s tail is too short to judge: %+v", r.Progress.Idle)
	}
	// What the window holds is the start-up: inconclusive, saying so and
	// that the quiet at its end is too short to call the job idle.
	if st := r.Progress.Starting; st == nil || !st.QuietIdle || st.Quiet != 3300*int64(time.Millisecond) {
		t.Errorf("a start-up filling the window: starting %+v", st)
	}
	f = one(t, r.Findings, "job-starting")
	for _, want := range []string{"the job is still starting: pid 10 (python3) started 0.0 s into the window and its GPU ran no step in the 4.0 s window",
		"waited for requests or a timer only since 3.3 s into the window (0.7 s), too short a quiet to call it idle"} {
		if !strings.Contains(f.Claim, want) {
			t.Errorf("claim %q does not say %q", f.Claim, want)
		}
	}
	if f.Severity != finding.Info || f.Supports != finding.Inconclusive || !strings.Contains(f.Decision, "gpufeed diagnose --pid 10 once it runs its steps") {
		t.Errorf("%+v", f)
	}
	if v := Verdict(r); v == nil || v.Class != finding.Inconclusive || len(v.Because) != 1 || v.Because[0] != "job-starting" || v.Confidence != 0 || v.Missing == "" {
		t.Errorf("verdict %+v", v)
	}
	// Launched by gpufeed, which took 3 s to start sampling it: still its
	// start-up.
	lateWindow := build(true, 1, launchedAtWindowStart-300)
	lateWindow.tl.Meta.Target.Launched = true
	if r := Analyze(lateWindow.tl, nil); r.Progress.Idle == nil || r.Progress.Starting != nil || !strings.Contains(r.Progress.Since, "the end of its start-up") {
		t.Errorf("a launched command is in its start-up at the window's start: %+v (since %q)", r.Progress.Idle, r.Progress.Since)
	}
	// A 1.0 s start-up: the quiet tail is most of the window, judged by the
	// usual rule, and named the same way.
	startupTicks = 10
	r = Analyze(build(true, 1, launchedAtWindowStart).tl, nil)
	if r.Progress.Idle == nil || r.Progress.Idle.StartUp != 0 || !strings.Contains(one(t, r.Findings, "job-idle").Claim, "(since 1.0 s into the window, the end of its start-up)") {
		t.Errorf("a long tail after a start-up in view: %+v (since %q)", r.Progress.Idle, r.Progress.Since)
	}
	// The same job attached long after its start: what came before the
	// quiet is its last sign of progress, not a start-up.
	r = Analyze(build(true, 1, launchedAtWindowStart-360000).tl, nil)
	if r.Progress.Idle == nil || !strings.Contains(one(t, r.Findings, "job-idle").Claim, "(since 1.0 s into the window, its last sign of progress)") {
		t.Errorf("a long tail after work: %+v (since %q)", r.Progress.Idle, r.Progress.Since)
	}
}

// TestStartingOrWorking: a job gpufeed launched whose GPU stays under
// 5 % is still starting when its GPU did nothing but a warm-up burst (its
// CPU busy with imports or a launcher's scripts); one whose small kernels
// complete throughout the window is working (too little work per launch),
// and one whose GPU ran above 5 % ran steps. Neither is stalled or idle.
func TestStartingOrWorking(t *testing.T) {
	build := func(util float64, completes func(i int) uint64) *tlb {
		b := newTL(51, 100*time.Millisecond)
		b.tl.Meta.UptimeNS = 100000e9
		b.tl.Meta.Target = timeline.Target{PID: 10, StartTime: 100000*100 - 10, Launched: true}
		b.proc(10, 1, "python3", []string{"python3", "train.py"}, nil)
		b.thread(10, 10, "python3", b.busy(0.9, 0.05))
		b.gpuProcs(0, func(int) float64 { return util }, map[int]func(int) (float64, *uint64){10: func(i int) (float64, *uint64) {
			return util, u64(completes(i))
		}})
		return b
	}
	for _, c := range []struct {
		what      string
		util      float64
		completes func(i int) uint64
		starting  bool
	}{
		{"imports, the GPU untouched", 0, func(int) uint64 { return 0 }, true},
		{"a warm-up burst at 4 s", 0.5, func(i int) uint64 { return uint64(min(max(i-40, 0), 5)) }, true},
		{"small kernels throughout", 2.4, func(i int) uint64 { return uint64(i) * 60 }, false},
		{"warm-up, then steps from 2 s on", 0.5, func(i int) uint64 {
			if i < 20 {
				return 1
			}
			return uint64(i)
		}, false},
		{"steps above 5 %", 30, func(i int) uint64 { return uint64(i) * 60 }, false},
	} {
		r := Analyze(build(c.util, c.completes).tl, nil)
		if r.Progress.Stalled() || r.Progress.Idle != nil {
			t.Errorf("%s: a busy job is neither stalled nor idle: %+v", c.what, r.Progress)
		}
		if got := r.Progress.Starting != nil; got != c.starting {
			t.Errorf("%s: starting %v, want %v (%+v)", c.what, got, c.starting, r.Progress.Starting)
		}
		if c.starting {
			one(t, r.Findings, "job-starting")
		} else {
			none(t, r.Findings, "job-starting")
			if v := Verdict(r); v != nil {
				t.Errorf("%s: a working job gets the classifier's verdict, not %+v", c.what, v)
			}
		}
	}
	// Held before its execve while gpufeed got ready (3 s after its
	// fork): it started at the window's start, not before it.
	held := build(0, func(int) uint64 { return 0 })
	held.tl.Meta.Target.StartTime, held.tl.Meta.Target.Held = 100000*100-300, true
	if f := one(t, Analyze(held.tl, nil).Findings, "job-starting"); !strings.Contains(f.Claim, "started 0.0 s into the window (gpufeed started it)") {
		t.Errorf("a held command starts with the window: %s", f.Claim)
	}
	held.tl.Meta.Target.Held = false
	if f := one(t, Analyze(held.tl, nil).Findings, "job-starting"); !strings.Contains(f.Claim, "started 3.0 s before the window (gpufeed started it)") {
		t.Errorf("an unheld command started at its fork: %s", f.Claim)
	}
	// The same start-up attached an hour after the job started is no
	// start-up: the classifier judges it.
	b := build(0, func(int) uint64 { return 0 })
	b.tl.Meta.Target = timeline.Target{PID: 10, StartTime: 100000*100 - 360000}
	if r := Analyze(b.tl, nil); r.Progress.Starting != nil {
		t.Errorf("a job an hour old is not starting: %+v", r.Progress.Starting)
	}
}

// TestReapingIsNoProgress: a launcher woken to reap a rank that died, a few
// readings after the rank's last sample (a loaded host), is not progress.
func TestReapingIsNoProgress(t *testing.T) {
	tl := oomJob(t)
	for i := range tl.Ticks {
		for j := range tl.Ticks[i].Threads {
			s := &tl.Ticks[i].Threads[j]
			if s.TID == 100 && i >= 32 { // rank 2's last sample is tick 29
				s.Slices = 3
			}
		}
	}
	r := Analyze(tl, nil)
	if !r.Progress.Stalled() || r.Progress.Wakeups != 0 {
		t.Errorf("the launcher's reaping counted as progress: %+v", r.Progress)
	}
	if !strings.HasPrefix(r.Progress.Since, "since rank 2 (pid 203)") || r.Progress.From != tl.Ticks[30].T {
		t.Errorf("the tail starts at the first reading without the dead rank: %q from %d", r.Progress.Since, r.Progress.From)
	}
}

// TestTimerPollLoopsCPUIsNotProgress: gloo ranks deadlocked, as measured on
// a real three-rank job: every main thread in a futex that never returns,
// and in each rank a device loop woken about 100 times a second out of its
// 10 ms epoll_wait, each wake-up costing ~40 µs of CPU: together 1.2 % of a
// core, over the 1 % bar, yet no sign of progress. A thread that does real
// work on each timer wake-up (5 ms) is progress.
func TestTimerPollLoopsCPUIsNotProgress(t *testing.T) {
	poll := &timeline.Blocked{Syscall: "epoll_wait", On: "anon_inode:[eventpoll]", Timed: true}
	b := newTL(31, 100*time.Millisecond)
	for r := range 3 {
		pid := 10 + 10*r
		b.proc(pid, 1, "python3", nil, map[string]string{"RANK": strconv.Itoa(r)})
		b.thread(pid, pid, "python3", idle("futex", "futex 0x7f00", "futex_do_wait"))
		b.thread(pid, pid+1, "python3", waking(poll, 10, 4e5)) // 10 wake-ups, 0.4 ms per 100 ms
	}
	p := MeasureProgress(b.tl)
	if !p.Stalled() || p.CPUCores <= 0.01 {
		t.Fatalf("three poll loops at 0.4 %% of a core each, everything else blocked: want stalled (and their CPU over 1 %%); %+v", p.Measure)
	}
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", idle("futex", "futex 0x7f00", "futex_do_wait"))
	b.thread(10, 11, "python3", waking(poll, 10, 5e7)) // 5 ms of work per wake-up
	if p := MeasureProgress(b.tl); p.Stalled() {
		t.Errorf("a thread doing 5 ms of work on each timer wake-up is progress: %+v", p.Measure)
	}
}

// TestHalfReadPollWaitIsStillTimed: the hung three-rank job of
// TestTimerPollLoopsCPUIsNotProgress as recorded before the sampler dropped
// half readings: once in the window, one rank's poll loop was read as
// "do_epoll_wait" with no call (it woke between the reads), and the 10
// wake-ups of each interval after it counted as work arriving; the window
// was not judged stalled. The same wait channel without a call, the call
// visible elsewhere, is the timed wait it was: stalled, wherever the half
// reading falls (the first reading included). A half reading at another
// wait channel is not assumed to be it: progress.
func TestHalfReadPollWaitIsStillTimed(t *testing.T) {
	poll := &timeline.Blocked{Syscall: "epoll_wait", On: "anon_inode:[eventpoll]", Wchan: "do_epoll_wait", Timed: true}
	job := func(half *timeline.Blocked, at int) *timeline.Timeline {
		b := newTL(31, 100*time.Millisecond)
		for r := range 3 {
			pid := 10 + 10*r
			b.proc(pid, 1, "python3", nil, map[string]string{"RANK": strconv.Itoa(r)})
			b.thread(pid, pid, "python3", idle("futex", "futex 0x7f00", "futex_do_wait"))
			loop := waking(poll, 10, 4e5)
			if r == 1 {
				b.thread(pid, pid+1, "python3", func(i int) timeline.ThreadSample {
					s := loop(i)
					if i == at {
						s.Blocked = half
					}
					return s
				})
				continue
			}
			b.thread(pid, pid+1, "python3", loop)
		}
		return b.tl
	}
	for _, at := range []int{0, 1, 15, 29, 30} {
		tl := job(&timeline.Blocked{Wchan: "do_epoll_wait"}, at)
		v := newView(tl)
		whole, _ := scan(v, v.t0)
		if p := MeasureProgress(tl); !p.Stalled() || whole.Wakeups != 0 || p.From != v.t0 {
			t.Errorf("half reading at %d: want stalled over the whole window, with no untimed wake-up in it; %+v", at, whole)
		}
		// the last reading half: the thread still waits in its timed
		// epoll_wait, not somewhere unknown (which would make the stall
		// unseen)
		r := Analyze(tl, nil)
		if r.Unseen {
			t.Errorf("half reading at %d: the stall read as unseen; waits %+v", at, r.Progress.Waits)
		}
		for _, w := range r.Progress.Waits {
			if w.TID == 21 && (w.Kind != WaitTimer || w.Wait == nil || w.Wait.Syscall != "epoll_wait") {
				t.Errorf("half reading at %d: the poll loop's wait %+v (kind %v), want its timed epoll_wait", at, w.Wait, w.Kind)
			}
		}
	}
	p := MeasureProgress(job(&timeline.Blocked{Wchan: "futex_do_wait"}, 15))
	if p.Stalled() || p.WokenCount == 0 {
		t.Errorf("a reading at another wait channel, with no call: its wake-ups count as work; %+v", p.Measure)
	}
	denied := &timeline.Blocked{Wchan: "do_epoll_wait", NotVisible: "syscall needs CAP_SYS_PTRACE"}
	if p := MeasureProgress(job(denied, 15)); p.Stalled() {
		t.Errorf("a reading whose call was denied is not known to be the timed wait; %+v", p.Measure)
	}
}

// TestReapedRankCPUIsNoProgress: the launcher reaps the rank that died and
// the rank's CPU folds into its cutime at once: one reading, a member's
// death, not a stream of children: still stalled, no job-forks.
func TestReapedRankCPUIsNoProgress(t *testing.T) {
	tl := oomJob(t)
	for i := range tl.Ticks {
		for j := range tl.Ticks[i].Procs {
			if ps := &tl.Ticks[i].Procs[j]; ps.PID == 100 {
				v := uint64(0)
				if i >= 33 {
					v = 290 // rank 2's 2.9 s of CPU, reaped a few readings after its last sample
				}
				ps.ChildCPUTicks = &v
			}
		}
	}
	r := Analyze(tl, nil)
	if !r.Progress.Stalled() || r.Progress.Reaping {
		t.Errorf("a dead rank's reaped CPU counted as progress: %+v", r.Progress)
	}
	none(t, r.Findings, "job-forks")
}

// TestForkStormIsProgress: a parent woken by its own timer (a sleep between
// forks) whose children live less than a reading: it shows no CPU and no
// wake-up of its own, but its reaped children's CPU grows a tick every
// other reading (as measured on a C loop forking 500 children a second)
// and a few of its children were seen starting and ending. Not idle, not
// stalled; job-forks says so.
func TestForkStormIsProgress(t *testing.T) {
	livetest.Need(t)
	b := newTL(61, 100*time.Millisecond)
	b.proc(10, 1, "storm", []string{"./storm", "500"}, nil)
	b.thread(10, 10, "storm", idle("clock_nanosleep", "", "hrtimer_nanosleep"))
	b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
		return timeline.ProcSample{Threads: 1, RSSPages: 100, ChildCPUTicks: u64(uint64(i / 2))}, true
	})
	for k, at := range []int{7, 19, 33, 48} { // children seen in one reading each
		pid := 100 + k
		c := b.proc(pid, 10, "storm", []string{"./storm", "500"}, nil)
		c.FirstSeen, c.LastSeen, c.Exited = b.tl.Ticks[at].T, b.tl.Ticks[at].T, true
		b.thread(pid, pid, "storm", func(i int) timeline.ThreadSample {
			if i != at {
				return timeline.ThreadSample{}
			}
			return timeline.ThreadSample{State: 'R', RunNS: 1e4}
		})
	}
	for i := range b.tl.Ticks {
		b.tl.Ticks[i].Host = &timeline.HostSample{Forks: 1000 + uint64(i)*50}
	}
	r := Analyze(b.tl, nil)
	if r.Progress.Stalled() || r.Progress.Idle != nil || !r.Progress.Reaping {
		t.Errorf("a fork storm judged stalled or idle: %+v", r.Progress)
	}
	none(t, r.Findings, "job-stalled")
	none(t, r.Findings, "job-idle")
	f := one(t, r.Findings, "job-forks")
	if !strings.Contains(f.Claim, "pid 10 (storm) keeps starting processes that end at once") || !strings.Contains(f.Claim, "up to 500 a second (all of the host's forks)") {
		t.Errorf("claim %q", f.Claim)
	}
}

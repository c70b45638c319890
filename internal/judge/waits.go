package judge

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// WaitKind is what a sleeping thread waits for, as far as the rules care.
type WaitKind int

const (
	// WaitUnknown: asleep, but where was not read or not visible.
	WaitUnknown WaitKind = iota
	// WaitDevice: blocked reading from a device channel (a synchronisation,
	// a blocking copy, a full launch queue): the GPU holds it.
	WaitDevice
	// WaitSubmit: blocked writing to a device channel: the submission path
	// itself is backed up (the driver, or the simulated device's server,
	// not taking work as fast as it comes). Part of the cost of submitting.
	WaitSubmit
	// WaitDisk: uninterruptible sleep (D), or a read of a regular file.
	WaitDisk
	// WaitInput: blocked on a pipe, a socket that is not the device, a futex
	// (another thread), poll/select/epoll, a child: waiting for something
	// another thread or process produces.
	WaitInput
	// WaitTimer: sleeping by choice (nanosleep, pause): nothing to do.
	WaitTimer
	numWaitKinds
)

func (k WaitKind) String() string {
	switch k {
	case WaitDevice:
		return "the device"
	case WaitSubmit:
		return "submitting to the device"
	case WaitDisk:
		return "storage"
	case WaitInput:
		return "input from other threads or processes"
	case WaitTimer:
		return "a timer (sleeping by choice)"
	}
	return "somewhere not read"
}

// timerCalls put a thread to sleep for a time, waiting for nothing.
var timerCalls = map[string]bool{
	"nanosleep": true, "clock_nanosleep": true, "pause": true, "rt_sigsuspend": true,
	"rt_sigtimedwait": true, "sched_yield": true,
}

// submitCalls write to a descriptor: on a device channel, they submit work.
var submitCalls = map[string]bool{
	"write": true, "writev": true, "pwrite64": true, "sendto": true, "sendmsg": true, "sendmmsg": true,
}

// fileReads read a descriptor; on a regular file that is storage.
var fileReads = map[string]bool{
	"read": true, "readv": true, "pread64": true, "preadv": true, "preadv2": true,
	"io_uring_enter": true, "io_getevents": true, "io_pgetevents": true,
}

// wchanKinds classify a wait by the kernel function it sleeps in, for when
// the system call was not read. Socket reads (unix_stream_read_generic,
// sk_wait_data) are not here: without the descriptor, a socket to the
// device cannot be told from any other.
var wchanKinds = []struct {
	prefix string
	kind   WaitKind
}{
	{"hrtimer_nanosleep", WaitTimer}, {"do_nanosleep", WaitTimer}, {"futex", WaitInput},
	{"pipe_read", WaitInput}, {"pipe_wait", WaitInput},
	{"do_epoll_wait", WaitInput}, {"ep_poll", WaitInput}, {"do_sys_poll", WaitInput},
	{"do_select", WaitInput}, {"do_wait", WaitInput},
	{"io_schedule", WaitDisk}, {"folio_wait", WaitDisk}, {"__iomap_dio_rw", WaitDisk},
	{"blk_", WaitDisk},
}

// classifyWait says what a thread in state state, last seen blocked as b,
// waits for. channels are its process's device channels; channelsRead is
// false when they were not read, so a socket cannot be told from the device.
func classifyWait(state byte, b *timeline.Blocked, channels map[string]bool, channelsRead bool) WaitKind {
	if state == 'D' {
		return WaitDisk
	}
	if b == nil {
		return WaitUnknown
	}
	if b.On != "" {
		if channels[b.On] || gpu.IsNVIDIANode(b.On) {
			if submitCalls[b.Syscall] {
				return WaitSubmit
			}
			return WaitDevice
		}
		if strings.HasPrefix(b.On, "socket:") && !channelsRead {
			return WaitUnknown
		}
	}
	if b.Syscall != "" {
		switch {
		case timerCalls[b.Syscall]:
			return WaitTimer
		case fileReads[b.Syscall] && strings.HasPrefix(b.On, "/") && !strings.HasPrefix(b.On, "/dev/"):
			return WaitDisk
		}
		return WaitInput
	}
	if w := b.Wchan; w != "" && w != "0" {
		for _, k := range wchanKinds {
			if strings.HasPrefix(w, k.prefix) {
				return k.kind
			}
		}
	}
	return WaitUnknown
}

// WaitProfile is what one thread did over the window, from its samples: the
// state at each tick (fast tier) and, when asleep, where (slow tier).
type WaitProfile struct {
	// Ticks is the number of samples; Running, Sleeping, Disk count those in
	// R, S (or I), D.
	Ticks, Running, Sleeping, Disk int
	// Asleep counts the slow-tier readings (about once a second) of where it
	// slept, by kind (a reading in D counts as WaitDisk).
	Asleep [numWaitKinds]int
	// Top lists the most frequent waits in words ("recvfrom on socket:[42]"), with counts.
	Top []WaitCount
}

// WaitCount is one kind of wait and how often it was read.
type WaitCount struct {
	What string
	Kind WaitKind
	N    int
}

// Readings is the number of slow-tier readings of where it slept.
func (w WaitProfile) Readings() int {
	n := 0
	for _, c := range w.Asleep {
		n += c
	}
	return n
}

// Share is the share (0..1) of known sleep readings of kind k, ignoring
// unknown ones; NaN when none is known.
func (w WaitProfile) Share(k WaitKind) float64 {
	known := w.Readings() - w.Asleep[WaitUnknown]
	if known == 0 {
		return math.NaN()
	}
	return float64(w.Asleep[k]) / float64(known)
}

// channelSet returns a process's device channels and whether they were read.
func channelSet(p *derive.Proc) (map[string]bool, bool) {
	if p == nil || p.Info == nil || p.Info.DeviceChannels == nil {
		return nil, false
	}
	m := map[string]bool{}
	for _, c := range p.Info.DeviceChannels.Channels {
		m[c] = true
	}
	return m, p.Info.DeviceChannels.NotVisible == ""
}

// profileWaits reads a thread's states and blocked readings.
func profileWaits(th *derive.Thread, p *derive.Proc, nTicks int) WaitProfile {
	var w WaitProfile
	channels, read := channelSet(p)
	counts := map[string]*WaitCount{}
	for i := 0; i < nTicks; i++ {
		s := th.Sample(i)
		if s == nil {
			continue
		}
		w.Ticks++
		switch s.State {
		case 'R':
			w.Running++
		case 'D':
			w.Disk++
		case 'S', 'I':
			w.Sleeping++
		}
		if s.State != 'S' && s.State != 'D' {
			continue
		}
		if s.Blocked == nil && (s.Switches == nil || s.State == 'S') {
			// The slow tier did not read where it waits on this tick: not
			// a slow tick, or its first sight of the thread (it waits one
			// slow period to tell an active thread from an idle one). A
			// reading not taken is no reading of a wait somewhere unknown:
			// counted so, it left a fixed part of a short window's sleep
			// unexplained (one of four readings over 3 s, one of ten over
			// 10 s). In D the state itself says storage.
			continue
		}
		k := classifyWait(s.State, s.Blocked, channels, read)
		w.Asleep[k]++
		what := describeWait(s.State, s.Blocked, channels)
		if c := counts[what]; c != nil {
			c.N++
		} else {
			counts[what] = &WaitCount{What: what, Kind: k, N: 1}
		}
	}
	for _, c := range counts {
		w.Top = append(w.Top, *c)
	}
	sort.Slice(w.Top, func(i, j int) bool {
		if w.Top[i].N != w.Top[j].N {
			return w.Top[i].N > w.Top[j].N
		}
		return w.Top[i].What < w.Top[j].What
	})
	return w
}

// describeWait says a wait in words: "recvfrom on the device (socket:[42])".
func describeWait(state byte, b *timeline.Blocked, channels map[string]bool) string {
	prefix := ""
	if state == 'D' {
		prefix = "uninterruptible (D) "
	}
	if b == nil {
		return strings.TrimSpace(prefix + "sleep")
	}
	on := b.On
	if on != "" && (channels[on] || gpu.IsNVIDIANode(on)) {
		on = "the device (" + on + ")"
	}
	switch {
	case b.Syscall != "" && on != "":
		return prefix + b.Syscall + " on " + on
	case b.Syscall != "":
		return prefix + b.Syscall
	case b.Wchan != "" && b.Wchan != "0":
		return prefix + "in " + b.Wchan
	case b.NotVisible != "":
		return prefix + "not visible (" + b.NotVisible + ")"
	}
	return strings.TrimSpace(prefix + "sleep")
}

// topWaits formats the most frequent waits: "recvfrom on the device (socket:[42]) 7 of 9".
func (w WaitProfile) topWaits(max int) string {
	total := w.Readings()
	var parts []string
	for i, c := range w.Top {
		if i == max {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d", c.What, c.N, total))
	}
	return strings.Join(parts, "; ")
}

package frozen

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// tlb builds synthetic timelines for unit tests.
type tlb struct {
	tl       *timeline.Timeline
	interval time.Duration
}

var t0 = time.Date(2026, 7, 13, 14, 22, 0, 0, time.UTC)

func newTL(n int, interval time.Duration) *tlb {
	tl := &timeline.Timeline{
		Meta:    timeline.Meta{Started: t0, ClockTick: 100, PageSize: 4096, NumCPU: 8, Interval: timeline.Duration(interval)},
		Procs:   map[timeline.ProcKey]*timeline.ProcInfo{},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{},
	}
	for i := range n {
		tl.Ticks = append(tl.Ticks, timeline.Tick{T: int64(i) * int64(interval)})
	}
	return &tlb{tl: tl, interval: interval}
}

func (b *tlb) secs(i int) float64 { return float64(i) * b.interval.Seconds() }

func (b *tlb) proc(pid, ppid int, comm string, cmdline []string, env map[string]string) *timeline.ProcInfo {
	p := &timeline.ProcInfo{Key: timeline.ProcKey{PID: pid, StartTime: uint64(pid)}, PPID: ppid, Comm: comm, Cmdline: cmdline, Env: env,
		LastSeen: b.tl.Ticks[len(b.tl.Ticks)-1].T}
	b.tl.Procs[p.Key] = p
	return p
}

func (b *tlb) thread(pid, tid int, comm string, f func(i int) timeline.ThreadSample) {
	b.tl.Threads[timeline.ThreadKey{TID: tid, StartTime: uint64(tid)}] = &timeline.ThreadInfo{Key: timeline.ThreadKey{TID: tid, StartTime: uint64(tid)}, PID: pid, Comm: comm}
	for i := range b.tl.Ticks {
		s := f(i)
		if s.State == 0 {
			continue // not sampled at this tick
		}
		s.PID, s.TID = pid, tid
		b.tl.Ticks[i].Threads = append(b.tl.Ticks[i].Threads, s)
	}
}

func (b *tlb) procSamples(pid int, f func(i int) (timeline.ProcSample, bool)) {
	for i := range b.tl.Ticks {
		s, ok := f(i)
		if !ok {
			continue
		}
		s.PID = pid
		b.tl.Ticks[i].Procs = append(b.tl.Ticks[i].Procs, s)
	}
}

// idle is a sleeping thread blocked where given, gaining no CPU.
func idle(syscall, on, wchan string) func(int) timeline.ThreadSample {
	return func(int) timeline.ThreadSample {
		return timeline.ThreadSample{State: 'S', RunNS: 5e6, Blocked: &timeline.Blocked{Syscall: syscall, On: on, Wchan: wchan}}
	}
}

// busy is a thread gaining cores of CPU (and waiting wait cores in the run queue).
func (b *tlb) busy(cores, wait float64) func(int) timeline.ThreadSample {
	return func(i int) timeline.ThreadSample {
		return timeline.ThreadSample{State: 'R', RunNS: uint64(b.secs(i) * cores * 1e9), WaitNS: uint64(b.secs(i) * wait * 1e9)}
	}
}

// quietProc gives a process constant I/O counters.
func (b *tlb) quietProc(pid int) {
	b.procSamples(pid, func(int) (timeline.ProcSample, bool) {
		return timeline.ProcSample{Threads: 1, RSSPages: 1000, IO: &timeline.IO{RChar: 5000, WChar: 700}}, true
	})
}

func (b *tlb) gpuUtil(index int, util func(i int) float64) {
	for i := range b.tl.Ticks {
		u := util(i)
		b.tl.Ticks[i].GPUs = append(b.tl.Ticks[i].GPUs, gpu.Sample{Index: index, UtilPercent: &u})
	}
}

func u64(v uint64) *uint64 { return &v }
func intp(v int) *int      { return &v }

// ncclMapped is what a rank of an NCCL job maps of the collective libraries.
func ncclMapped() *timeline.Collectives {
	return &timeline.Collectives{Mapped: []string{"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2"}}
}

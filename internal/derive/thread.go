package derive

import (
	"math"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Thread is one thread's derived series.
type Thread struct {
	Key  timeline.ThreadKey
	PID  int
	Info *timeline.ThreadInfo
	Comm string
	Role string

	// CPUPct is the share of each interval the thread ran on a CPU, in percent
	// of one core (schedstat run time over wall time).
	CPUPct Series
	// WaitPct is the share of each interval it was runnable but waiting for a
	// CPU (schedstat run-queue wait over wall time), in percent.
	WaitPct Series
	// VolPerSec and InvolPerSec are context switches per second (status, slow
	// tier): each interval carries the rate over the slow window holding it.
	VolPerSec   Series
	InvolPerSec Series

	// UserShare is user time over user+system time across the window (stat
	// utime/stime, in clock ticks of 10 ms), percent; NaN when no CPU time
	// was accounted.
	UserShare float64
	// UserSec and SysSec are the user and system CPU seconds over the window.
	UserSec, SysSec float64

	CPU   Stats // of CPUPct
	Wait  Stats // of WaitPct
	Vol   float64
	Invol float64 // window rates per second (first to last slow reading); NaN when not read

	// idx[i] is the thread's index in Ticks[i].Threads, -1 when absent.
	idx []int32
	tl  *timeline.Timeline
}

// Sample returns the thread's raw sample at tick i, nil when it was not sampled then.
func (t *Thread) Sample(i int) *timeline.ThreadSample {
	if i < 0 || i >= len(t.idx) || t.idx[i] < 0 {
		return nil
	}
	return &t.tl.Ticks[i].Threads[t.idx[i]]
}

// Present counts the ticks at which the thread was sampled.
func (t *Thread) Present() int {
	n := 0
	for _, x := range t.idx {
		if x >= 0 {
			n++
		}
	}
	return n
}

// Last returns the thread's last sample and its tick index (nil, -1 when never sampled).
func (t *Thread) Last() (*timeline.ThreadSample, int) {
	for i := len(t.idx) - 1; i >= 0; i-- {
		if t.idx[i] >= 0 {
			return t.Sample(i), i
		}
	}
	return nil, -1
}

// LastBlocked returns the most recent blocked reading and its tick index (nil, -1 when none).
func (t *Thread) LastBlocked() (*timeline.Blocked, int) {
	for i := len(t.idx) - 1; i >= 0; i-- {
		if s := t.Sample(i); s != nil && s.Blocked != nil {
			return s.Blocked, i
		}
	}
	return nil, -1
}

func (a *View) buildThreads() {
	tl := a.Timeline
	var res keyResolver[timeline.ThreadKey]
	for k, info := range tl.Threads {
		res.add(k.TID, k, info.FirstSeen, info.LastSeen)
		th := &Thread{Key: k, PID: info.PID, Info: info, Comm: info.Comm, Role: info.Role, tl: tl}
		th.idx = make([]int32, len(tl.Ticks))
		for i := range th.idx {
			th.idx[i] = -1
		}
		a.threadByKey[k] = th
		a.Threads = append(a.Threads, th)
	}
	for i, tk := range tl.Ticks {
		for j, ts := range tk.Threads {
			k, ok := res.at(ts.TID, tk.T)
			if !ok {
				// A sample without a thread record (a truncated recording): keep it under a bare key.
				k = timeline.ThreadKey{TID: ts.TID}
				info := &timeline.ThreadInfo{Key: k, PID: ts.PID, FirstSeen: tk.T, LastSeen: tk.T}
				res.add(ts.TID, k, math.MinInt64, math.MaxInt64)
				th := &Thread{Key: k, PID: ts.PID, Info: info, tl: tl, idx: make([]int32, len(tl.Ticks))}
				for x := range th.idx {
					th.idx[x] = -1
				}
				a.threadByKey[k] = th
				a.Threads = append(a.Threads, th)
			}
			a.threadByKey[k].idx[i] = int32(j)
		}
	}
	sortThreads(a.Threads)
	n := len(a.Intervals)
	hz := float64(tl.Meta.ClockTick)
	if hz <= 0 {
		hz = 100
	}
	for _, th := range a.Threads {
		th.CPUPct, th.WaitPct = nanSeries(n), nanSeries(n)
		var first, last *timeline.ThreadSample
		var swIdx []int
		var vol, invol []float64
		for i := range tl.Ticks {
			s := th.Sample(i)
			if s == nil {
				continue
			}
			if first == nil {
				first = s
			}
			last = s
			if s.Switches != nil {
				swIdx = append(swIdx, i)
				vol = append(vol, float64(s.Switches.Voluntary))
				invol = append(invol, float64(s.Switches.Involuntary))
			}
			if i+1 < len(tl.Ticks) {
				if nx := th.Sample(i + 1); nx != nil {
					dt := float64(a.TickT[i+1] - a.TickT[i])
					if dt > 0 && nx.RunNS >= s.RunNS && nx.WaitNS >= s.WaitNS {
						th.CPUPct[i] = math.Min(100, float64(nx.RunNS-s.RunNS)/dt*100)
						th.WaitPct[i] = math.Min(100, float64(nx.WaitNS-s.WaitNS)/dt*100)
					}
				}
			}
		}
		th.VolPerSec = rateSeries(n, a.TickT, swIdx, vol, 1)
		th.InvolPerSec = rateSeries(n, a.TickT, swIdx, invol, 1)
		th.Vol, th.Invol = math.NaN(), math.NaN()
		if k := len(swIdx); k >= 2 {
			dt := float64(a.TickT[swIdx[k-1]]-a.TickT[swIdx[0]]) / 1e9
			if dt > 0 {
				th.Vol = (vol[k-1] - vol[0]) / dt
				th.Invol = (invol[k-1] - invol[0]) / dt
			}
		}
		th.UserShare = math.NaN()
		if first != nil && last != nil && last.UTime >= first.UTime && last.STime >= first.STime {
			du, ds := float64(last.UTime-first.UTime), float64(last.STime-first.STime)
			th.UserSec, th.SysSec = du/hz, ds/hz
			if du+ds > 0 {
				th.UserShare = du / (du + ds) * 100
			}
		}
		th.CPU = th.CPUPct.Stats()
		th.Wait = th.WaitPct.Stats()
	}
}

package derive

import (
	"math"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

const ms = int64(time.Millisecond)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// synthetic builds 11 ticks 100 ms apart with known counters:
//   - thread 10 runs 50 ms and waits 20 ms per interval; utime +3, stime +1 per tick;
//     10 voluntary and 2 involuntary switches per second, read on the slow tier (every 5 ticks);
//   - TID 11 is reused: one thread 0..400 ms, another 600..1000 ms;
//   - the process's fds grow by 1 per 100 ms; rchar 1 MB/s in 4 KiB reads;
//   - cpu0 is 75 % busy, cpu1 idle; PSI cpu some 10 %; disk 100 reads/s of 4 ms each;
//   - GPU0 reports 10 %, 20 %, ... on ticks 1..10.
func synthetic() *timeline.Timeline {
	pk := timeline.ProcKey{PID: 10, StartTime: 1}
	t10 := timeline.ThreadKey{TID: 10, StartTime: 1}
	t11a := timeline.ThreadKey{TID: 11, StartTime: 2}
	t11b := timeline.ThreadKey{TID: 11, StartTime: 70}
	tl := &timeline.Timeline{
		Meta:  timeline.Meta{NumCPU: 2, ClockTick: 100, PageSize: 4096, Interval: timeline.Duration(100 * time.Millisecond)},
		Procs: map[timeline.ProcKey]*timeline.ProcInfo{pk: {Key: pk, Comm: "python3", FirstSeen: 0, LastSeen: 1000 * ms}},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{
			t10:  {Key: t10, PID: 10, Comm: "python3", FirstSeen: 0, LastSeen: 1000 * ms},
			t11a: {Key: t11a, PID: 10, Comm: "first", FirstSeen: 0, LastSeen: 400 * ms, Exited: true},
			t11b: {Key: t11b, PID: 10, Comm: "second", FirstSeen: 600 * ms, LastSeen: 1000 * ms},
		},
	}
	tl.Meta.Target = timeline.Target{PID: 10, StartTime: 1}
	for i := 0; i <= 10; i++ {
		tk := timeline.Tick{T: int64(i) * 100 * ms}
		th := timeline.ThreadSample{TID: 10, PID: 10, State: 'R', UTime: uint64(3 * i), STime: uint64(i),
			RunNS: uint64(i) * 50 * uint64(ms), WaitNS: uint64(i) * 20 * uint64(ms)}
		ps := timeline.ProcSample{PID: 10, Threads: 2, RSSPages: 100}
		fds := 10 + i
		ps.FDs = &fds
		if i%5 == 0 {
			th.Switches = &timeline.Switches{Voluntary: uint64(i), Involuntary: uint64(i / 5)}
			ps.IO = &timeline.IO{RChar: uint64(i) * 100_000, SyscR: uint64(i) * 100_000 / 4096, ReadBytes: 0}
		}
		tk.Threads = append(tk.Threads, th)
		if i <= 4 {
			tk.Threads = append(tk.Threads, timeline.ThreadSample{TID: 11, PID: 10, State: 'S', RunNS: 7})
		}
		if i >= 6 {
			tk.Threads = append(tk.Threads, timeline.ThreadSample{TID: 11, PID: 10, State: 'R', RunNS: uint64(i-6) * 100 * uint64(ms)})
		}
		tk.Procs = append(tk.Procs, ps)
		tk.Host = &timeline.HostSample{
			CPUs:         []timeline.CPUTimes{{CPU: 0, User: uint64(6 * i), System: uint64(3 * i), Idle: uint64(3 * i)}, {CPU: 1, Idle: uint64(12 * i)}},
			ProcsRunning: 3, Ctxt: uint64(i) * 100,
		}
		if i%5 == 0 {
			tk.Host.PSI = &timeline.PSI{CPUSomeUS: uint64(i) * 10_000}
			tk.Host.Disks = []timeline.DiskStat{{Name: "vda", Reads: uint64(i) * 10, SectorsRead: uint64(i) * 80, ReadMS: uint64(i) * 40, IOTicksMS: uint64(i) * 50}}
		}
		if i > 0 {
			u := float64(i) * 10
			tk.GPUs = []gpu.Sample{{Index: 0, UtilPercent: &u}}
		}
		tl.Ticks = append(tl.Ticks, tk)
	}
	return tl
}

func TestThreadSeries(t *testing.T) {
	a := New(synthetic())
	if len(a.Intervals) != 10 || a.WindowNS != 1000*ms {
		t.Fatalf("intervals %d window %d", len(a.Intervals), a.WindowNS)
	}
	th := a.Thread(timeline.ThreadKey{TID: 10, StartTime: 1})
	for i, v := range th.CPUPct {
		if !near(v, 50, 1e-9) || !near(th.WaitPct[i], 20, 1e-9) {
			t.Fatalf("interval %d: CPU %v wait %v, want 50 and 20", i, v, th.WaitPct[i])
		}
	}
	if th.CPU.P50 != 50 || th.CPU.N != 10 || th.Wait.Max != 20 {
		t.Errorf("stats %+v %+v", th.CPU, th.Wait)
	}
	if !near(th.UserShare, 75, 1e-9) || !near(th.UserSec, 0.3, 1e-9) || !near(th.SysSec, 0.1, 1e-9) {
		t.Errorf("user share %v user %v sys %v", th.UserShare, th.UserSec, th.SysSec)
	}
	if !near(th.Vol, 10, 1e-9) || !near(th.Invol, 2, 1e-9) || !near(th.VolPerSec[3], 10, 1e-9) {
		t.Errorf("switch rates vol %v invol %v series %v", th.Vol, th.Invol, th.VolPerSec)
	}
}

func TestReusedTIDsAreSeparateThreads(t *testing.T) {
	a := New(synthetic())
	first := a.Thread(timeline.ThreadKey{TID: 11, StartTime: 2})
	second := a.Thread(timeline.ThreadKey{TID: 11, StartTime: 70})
	if first.Present() != 5 || second.Present() != 5 {
		t.Fatalf("present: first %d second %d", first.Present(), second.Present())
	}
	if first.CPU.Max != 0 || !near(second.CPU.P50, 100, 1e-9) {
		t.Errorf("first CPU %+v, second CPU %+v", first.CPU, second.CPU)
	}
	// The gap between them (ticks 4..6) is unmeasured, not zero.
	if !math.IsNaN(first.CPUPct[4]) || !math.IsNaN(second.CPUPct[5]) {
		t.Errorf("gap intervals must be NaN: %v %v", first.CPUPct, second.CPUPct)
	}
	p := a.Proc(timeline.ProcKey{PID: 10, StartTime: 1})
	if len(p.Threads) != 3 {
		t.Errorf("process threads %d", len(p.Threads))
	}
	// Process CPU = 50 % (tid 10) + 100 % (second tid 11) where both ran.
	if !near(p.CPUPct[8], 150, 1e-9) || !near(p.CPUPct[0], 50, 1e-9) {
		t.Errorf("process CPU %v", p.CPUPct)
	}
}

func TestProcSeries(t *testing.T) {
	a := New(synthetic())
	p := a.Target()
	if !near(p.FDGrowth, 10, 1e-6) {
		t.Errorf("fd growth %v/s, want 10", p.FDGrowth)
	}
	if !near(p.RCharPerSec, 1_000_000, 1e-6) || !near(p.MeanReadBytes, 4096, 50) {
		t.Errorf("read rate %v mean read %v", p.RCharPerSec, p.MeanReadBytes)
	}
	if v, _ := p.RSSBytes.Last(); v != 100*4096 {
		t.Errorf("rss %v", v)
	}
	if !math.IsNaN(p.PSSGrowth) {
		t.Errorf("PSS never read: growth must be NaN, got %v", p.PSSGrowth)
	}
}

func TestHostSeries(t *testing.T) {
	a := New(synthetic())
	h := a.Host
	if !near(h.CPUs[0].BusyPct[0], 75, 1e-9) || !near(h.CPUs[1].BusyPct[0], 0, 1e-9) || !near(h.BusyPct[0], 37.5, 1e-9) {
		t.Errorf("busy cpu0 %v cpu1 %v all %v", h.CPUs[0].BusyPct[0], h.CPUs[1].BusyPct[0], h.BusyPct[0])
	}
	if h.Busiest[0] != 0 || !near(h.CPUs[0].UserPct[2], 50, 1e-9) {
		t.Errorf("busiest %v user %v", h.Busiest, h.CPUs[0].UserPct[2])
	}
	if !near(h.RunQueuePerCPU[3], 1.5, 1e-9) || !near(h.CtxtPerSec[0], 1000, 1e-6) {
		t.Errorf("run queue/cpu %v ctxt %v", h.RunQueuePerCPU[3], h.CtxtPerSec[0])
	}
	if !near(h.PSI.CPUSome[7], 10, 1e-9) {
		t.Errorf("psi %v", h.PSI.CPUSome)
	}
	d := h.Disks[0]
	if !near(d.Reads, 100, 1e-9) || !near(d.ReadKB, 400, 1e-9) || !near(d.Await, 4, 1e-9) || !near(d.Util, 50, 1e-9) {
		t.Errorf("disk %+v", d)
	}
}

func TestGPUAlignedOnIntervals(t *testing.T) {
	a := New(synthetic())
	g := a.GPUs[0]
	// The sample at tick i+1 covers interval i.
	for i, v := range g.UtilPct {
		if !near(v, float64(i+1)*10, 1e-9) {
			t.Fatalf("interval %d: util %v", i, v)
		}
	}
	if g.Util.P10 != 10 || g.Util.P50 != 50 || g.Util.P90 != 90 {
		t.Errorf("util stats %+v", g.Util)
	}
}

func TestSeriesHelpers(t *testing.T) {
	nan := math.NaN()
	s := Series{1, nan, 3, 2, nan, 4}
	st := s.Stats()
	if st.N != 4 || st.P50 != 2 || st.Max != 4 || st.Min != 1 || st.Mean != 2.5 {
		t.Errorf("%+v", st)
	}
	if s.FractionAbove(2) != 0.5 || s.FractionBelow(2) != 0.25 || s.Measured() != 4 {
		t.Errorf("fractions %v %v", s.FractionAbove(2), s.FractionBelow(2))
	}
	if e := (Series{nan}).Stats(); e.N != 0 || !math.IsNaN(e.P50) {
		t.Errorf("empty %+v", e)
	}
	sum := Series{1, nan, nan}.Add(Series{1, 2, nan})
	if sum[0] != 2 || sum[1] != 2 || !math.IsNaN(sum[2]) {
		t.Errorf("add %v", sum)
	}
}

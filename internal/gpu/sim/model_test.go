package sim

import (
	"math"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
)

// The model is driven here in virtual time: every call takes "now", so the
// arithmetic is checked exactly, without sleeping.

const (
	us = int64(time.Microsecond)
	ms = int64(time.Millisecond)
	// t0 is an arbitrary virtual start, a multiple of the 20 ms point window.
	t0 = 1000 * ms
)

func testDevice(t *testing.T, opt Options) *device {
	t.Helper()
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		t.Fatal(err)
	}
	return newDevice(0, opt, t0)
}

// feed submits a kernel as a client would at time ts, honouring a full stream
// (the submit happens when the stream has room). It returns the op's end.
func feed(d *device, pid int, sid uint32, o op, ts int64) (start, end int64, sub int64) {
	sub = ts
	if room := d.roomAt(pid, sid, ts); room != 0 {
		sub = room
	}
	start, end = d.submit(pid, sid, o, d.submitTime(sub, sub))
	return start, end, sub
}

func kernel(dur int64) op { return op{kind: opKernel, dur: dur} }

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestStreamFedFasterThanItDrainsIsFullyBusy(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	// A 100 us kernel every 50 us for 200 ms: the queue grows, the device never idles.
	for ts := t0; ts < t0+200*ms; ts += 50 * us {
		feed(d, 42, 0, kernel(100*us), ts)
	}
	s := d.sample(1, t0+200*ms)
	if s.UtilPercent == nil || *s.UtilPercent != 100 {
		t.Fatalf("utilisation %v, want exactly 100", s.UtilPercent)
	}
	if len(s.Points) != 10 {
		t.Fatalf("%d points over 200 ms, want 10", len(s.Points))
	}
	for _, p := range s.Points {
		if p.Percent != 100 {
			t.Errorf("point at %v: %g %%, want 100", p.At, p.Percent)
		}
	}
	if len(s.Processes) != 1 || s.Processes[0].PID != 42 || *s.Processes[0].SMUtilPercent != 100 {
		t.Errorf("processes %+v, want pid 42 at 100 %%", s.Processes)
	}
	// A fully busy device is one span, however many kernels ran.
	if n := len(d.kernels.s); n != 1 {
		t.Errorf("%d spans for a fully busy device, want 1", n)
	}
}

func TestOneTinyKernelPerMillisecondIsOnePercent(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	for ts := t0; ts < t0+time.Second.Nanoseconds(); ts += ms {
		feed(d, 42, 0, kernel(10*us), ts)
	}
	s := d.sample(1, t0+int64(time.Second))
	if !near(*s.UtilPercent, 1, 1e-9) {
		t.Fatalf("utilisation %g %%, want 1", *s.UtilPercent)
	}
	if len(s.Points) != 50 {
		t.Fatalf("%d points over 1 s, want 50", len(s.Points))
	}
	for _, p := range s.Points {
		if !near(p.Percent, 1, 1e-9) {
			t.Errorf("point %g %%, want 1", p.Percent)
		}
	}
	// Idle most of the time: the clock has sagged well below the maximum
	// and the GPU-idle clock event reason is set.
	if *s.SMClockMHz >= d.opt.MaxSMClockMHz/2 {
		t.Errorf("SM clock %d MHz at 1 %% utilisation, want below half of %d", *s.SMClockMHz, d.opt.MaxSMClockMHz)
	}
	if *s.ClockEventReasons&clocksEventReasonGPUIdle == 0 {
		t.Errorf("clock event reasons %#x: want GPU idle set", *s.ClockEventReasons)
	}
}

func TestStreamOrderAndSyncTarget(t *testing.T) {
	d := testDevice(t, Options{})
	// Three kernels submitted at once run back to back.
	s1, e1, _ := feed(d, 7, 0, kernel(5*ms), t0)
	s2, e2, _ := feed(d, 7, 0, kernel(5*ms), t0+us)
	s3, e3, _ := feed(d, 7, 0, kernel(5*ms), t0+2*us)
	if s1 != t0 || s2 != e1 || s3 != e2 || e3 != t0+15*ms {
		t.Fatalf("starts/ends %d-%d %d-%d %d-%d: want back to back from %d", s1, e1, s2, e2, s3, e3, t0)
	}
	// A kernel submitted after the stream drained starts when submitted.
	s4, _, _ := feed(d, 7, 0, kernel(ms), t0+40*ms)
	if s4 != t0+40*ms {
		t.Errorf("kernel on a drained stream starts at %d, want its submission %d", s4, t0+40*ms)
	}
	// Another stream runs concurrently; device sync waits for the later one.
	_, e5, _ := feed(d, 7, 3, kernel(100*ms), t0+10*ms)
	if got := d.syncTarget(7, 0, false); got != t0+41*ms {
		t.Errorf("stream 0 sync target %d, want %d", got, t0+41*ms)
	}
	if got := d.syncTarget(7, 0, true); got != e5 {
		t.Errorf("device sync target %d, want stream 3's end %d", got, e5)
	}
	// Another process's streams are its own.
	if got := d.syncTarget(8, 0, true); got != 0 {
		t.Errorf("a process without work: sync target %d, want 0", got)
	}
}

func TestFullStreamBlocksUntilTheOldestEnds(t *testing.T) {
	d := testDevice(t, Options{})
	for i := range DefaultMaxPending {
		feed(d, 7, 0, kernel(ms), t0+int64(i))
	}
	// 1024 pending: the 1025th waits until the first (t0 .. t0+1ms) ends.
	if room := d.roomAt(7, 0, t0+2000); room != t0+ms {
		t.Fatalf("room at %d, want %d (the first kernel's end)", room, t0+ms)
	}
	// Once it ended there is room again.
	if room := d.roomAt(7, 0, t0+ms); room != 0 {
		t.Fatalf("room at %d after the first kernel ended, want 0 (room now)", room)
	}
	// Another stream is unaffected.
	if room := d.roomAt(7, 1, t0+2000); room != 0 {
		t.Fatalf("stream 1 room %d, want 0", room)
	}
}

func TestCopiesMoveBytesOverTheLinkNotUtilisation(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	bw := d.bw[wire.CopyH2D]
	if !near(bw, 31.5076923e9*PCIeEfficiency, 1e3) {
		t.Fatalf("Gen4 x16 pinned bandwidth %g, want %g", bw, 31.5076923e9*PCIeEfficiency)
	}
	const gib = 1 << 30
	_, e1, _ := feed(d, 7, 0, op{kind: opCopy, bytes: gib, dir: wire.CopyH2D, pinned: true}, t0)
	wantDur := int64(math.Ceil(gib / bw * 1e9))
	if e1-t0 != wantDur {
		t.Fatalf("pinned 1 GiB copy takes %d ns, want %d", e1-t0, wantDur)
	}
	// The same copy from pageable memory on another stream: half the
	// bandwidth, and it waits for the h2d copy engine.
	s2, e2, _ := feed(d, 7, 1, op{kind: opCopy, bytes: gib, dir: wire.CopyH2D}, t0)
	if s2 != e1 {
		t.Errorf("second h2d copy starts at %d, want after the first (%d): one engine per direction", s2, e1)
	}
	if got, want := e2-s2, int64(math.Ceil(gib/(bw*DefaultPageableFactor)*1e9)); got != want {
		t.Errorf("pageable copy takes %d ns, want %d", got, want)
	}
	// A d2h copy uses the other engine and runs at the same time.
	s3, _, _ := feed(d, 7, 2, op{kind: opCopy, bytes: gib / 4, dir: wire.CopyD2H, pinned: true}, t0)
	if s3 != t0 {
		t.Errorf("d2h copy starts at %d, want %d (its own engine)", s3, t0)
	}
	now := e1
	s := d.sample(1, now)
	if *s.UtilPercent != 0 {
		t.Errorf("utilisation %g %% with only copies running, want 0 (NVML counts kernels)", *s.UtilPercent)
	}
	secs := float64(now-t0) / 1e9
	if !near(*s.PCIeRxBytesPerSec, gib/secs, 1) {
		t.Errorf("PCIe RX %g B/s, want %g (1 GiB over the window)", *s.PCIeRxBytesPerSec, gib/secs)
	}
	if !near(*s.PCIeTxBytesPerSec, gib/4/secs, 1) {
		t.Errorf("PCIe TX %g B/s, want %g", *s.PCIeTxBytesPerSec, gib/4/secs)
	}
	if *s.PCIeRxBytesPerSec > bw*1.000001 {
		t.Errorf("PCIe RX %g above the link's %g", *s.PCIeRxBytesPerSec, bw)
	}
}

func TestConcurrentStreamsCountOnceAndPerProcess(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	// pid 1: 0-60 ms; pid 2: 40-80 ms; union 0-80 ms of a 100 ms window.
	feed(d, 1, 0, kernel(60*ms), t0)
	feed(d, 2, 0, kernel(40*ms), t0+40*ms)
	s := d.sample(1, t0+100*ms)
	if !near(*s.UtilPercent, 80, 1e-9) {
		t.Errorf("utilisation %g, want 80 (overlap counted once)", *s.UtilPercent)
	}
	got := map[int]float64{}
	for _, p := range s.Processes {
		got[p.PID] = *p.SMUtilPercent
	}
	if !near(got[1], 60, 1e-9) || !near(got[2], 40, 1e-9) {
		t.Errorf("per-process utilisation %v, want 1:60 2:40", got)
	}
}

func TestClockRisesUnderLoadAndPowerFollows(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	idle := d.sample(1, t0+500*ms)
	if *idle.SMClockMHz != d.opt.IdleSMClockMHz {
		t.Errorf("idle SM clock %d, want %d", *idle.SMClockMHz, d.opt.IdleSMClockMHz)
	}
	if !near(*idle.PowerW, d.opt.IdlePowerW, 1e-9) {
		t.Errorf("idle power %g W, want %g", *idle.PowerW, d.opt.IdlePowerW)
	}
	feed(d, 1, 0, kernel(time.Second.Nanoseconds()), t0+500*ms)
	busy := d.sample(1, t0+1000*ms)
	if *busy.SMClockMHz < d.opt.MaxSMClockMHz-5 {
		t.Errorf("SM clock %d MHz after 500 ms of work, want ~%d", *busy.SMClockMHz, d.opt.MaxSMClockMHz)
	}
	if *busy.ClockEventReasons != 0 {
		t.Errorf("clock event reasons %#x while busy, want none", *busy.ClockEventReasons)
	}
	if *busy.PowerW < d.opt.ActivePowerW*0.9 {
		t.Errorf("power %g W when fully busy, want near %g", *busy.PowerW, d.opt.ActivePowerW)
	}
	// After the kernel, the clock sags toward idle over ClockFallTau.
	after := d.sample(1, t0+1500*ms+int64(d.opt.ClockFallTau))
	mid := float64(d.opt.IdleSMClockMHz) + float64(d.opt.MaxSMClockMHz-d.opt.IdleSMClockMHz)/math.E
	if !near(float64(*after.SMClockMHz), mid, 2) {
		t.Errorf("SM clock one time constant after the work: %d MHz, want %.0f", *after.SMClockMHz, mid)
	}
}

func TestOperationsNeverRewriteAReportedWindow(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	d.sample(1, t0+100*ms)
	// A submission stamped before the last report (it sat in the socket) is
	// moved to the report's end, so the report stays true.
	start, _, _ := feed(d, 1, 0, kernel(ms), t0+50*ms)
	if start != t0+100*ms {
		t.Errorf("late submission starts at %d, want the horizon %d", start, t0+100*ms)
	}
}

func TestHistoryIsPrunedBehindObservers(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	now := t0
	for range 20 {
		for k := range 1000 {
			feed(d, 1, 0, kernel(10*us), now+int64(k)*100*us)
		}
		now += 100 * ms
		s := d.sample(1, now)
		if !near(*s.UtilPercent, 10, 1e-9) {
			t.Fatalf("utilisation %g, want 10", *s.UtilPercent)
		}
	}
	// 20 000 kernels ran; only about the last window's remain.
	if n := len(d.kernels.s); n > 2000 {
		t.Errorf("%d spans kept, want at most about one window's worth", n)
	}
}

// TestCompletedOperationsCount: each process's count of completed operations
// is the number that ended by the sample's instant, whatever the pruning of
// ended operations did in between; a kernel still running is not counted.
func TestCompletedOperationsCount(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	d.attach(42)
	d.attach(7)
	// pid 42: ten 1 ms kernels back to back from t0 (ending t0+1 ms ... t0+10 ms)
	// on stream 0 and two copies on stream 1; pid 7: one 1 s kernel.
	for i := 0; i < 10; i++ {
		feed(d, 42, 0, kernel(ms), t0)
	}
	feed(d, 42, 1, op{kind: opCopy, bytes: 1 << 20, dir: wire.CopyH2D, pinned: true}, t0)
	feed(d, 42, 1, op{kind: opCopy, bytes: 1 << 20, dir: wire.CopyH2D, pinned: true}, t0)
	feed(d, 7, 0, kernel(1000*ms), t0)
	completed := func(s []gpu.Process, pid int) uint64 {
		for _, p := range s {
			if p.PID == pid && p.CompletedOps != nil {
				return *p.CompletedOps
			}
		}
		t.Fatalf("pid %d: no completed count in %+v", pid, s)
		return 0
	}
	s := d.sample(1, t0+5*ms+us)
	if got := completed(s.Processes, 42); got != 5+2 {
		t.Errorf("at 5 ms: %d completed, want 7 (five kernels, the two 42 us copies)", got)
	}
	if got := completed(s.Processes, 7); got != 0 {
		t.Errorf("a kernel still running is not completed: %d", got)
	}
	d.prune(t0 + 8*ms) // drops ended operations; counts must not move back
	s = d.sample(1, t0+20*ms)
	if got := completed(s.Processes, 42); got != 12 {
		t.Errorf("at 20 ms: %d completed, want 12", got)
	}
	s = d.sample(1, t0+1001*ms)
	if got := completed(s.Processes, 7); got != 1 {
		t.Errorf("the long kernel ended: %d completed, want 1", got)
	}
}

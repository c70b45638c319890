package sim

import (
	"math"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
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

// sched places operations as the driver library does (start = max(the call,
// the stream's last end[, the engine free]); the library's arithmetic is
// tested in real time through it, in driver_test.go) and records them, so
// that the model's reports are checked against a schedule known exactly.
type sched struct {
	t      *testing.T
	d      *device
	last   map[[2]int]int64
	engine [2]int64
}

func newSched(t *testing.T, d *device) *sched {
	return &sched{t: t, d: d, last: map[[2]int]int64{}}
}

func (s *sched) put(pid, stream int, kind uint8, dur int64, bytes uint64, ts int64) (start, end int64) {
	s.t.Helper()
	start = max(ts, s.last[[2]int{pid, stream}])
	if kind == wire.KindH2D || kind == wire.KindD2H {
		start = max(start, s.engine[kind-1])
		s.engine[kind-1] = start + dur
	}
	end = start + dur
	s.last[[2]int{pid, stream}] = end
	r := wire.Record{Start: start, End: end, Bytes: bytes, Stream: uint32(stream), Kind: kind, Count: 1}
	if err := s.d.record(pid, 1, r, ts); err != nil {
		s.t.Fatalf("record %+v: %v", r, err)
	}
	return start, end
}

func (s *sched) kernel(pid, stream int, dur, ts int64) (start, end int64) {
	return s.put(pid, stream, wire.KindKernel, dur, 0, ts)
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestStreamFedFasterThanItDrainsIsFullyBusy(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	sc := newSched(t, d)
	// A 100 us kernel every 50 us for 200 ms: the queue grows, the device never idles.
	for ts := t0; ts < t0+200*ms; ts += 50 * us {
		sc.kernel(42, 0, 100*us, ts)
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
	sc := newSched(t, d)
	for ts := t0; ts < t0+time.Second.Nanoseconds(); ts += ms {
		sc.kernel(42, 0, 10*us, ts)
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

// A record that raced with a sample, or a stream whose records overlap,
// stays serial: a stream's operation never starts before its previous one
// ended.
func TestRecordsStaySerialOnTheirStream(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	rec := func(stream uint32, start, end int64) {
		t.Helper()
		if err := d.record(7, 1, wire.Record{Start: start, End: end, Stream: stream, Count: 1}, start); err != nil {
			t.Fatal(err)
		}
	}
	rec(0, t0, t0+5*ms)
	rec(0, t0+ms, t0+6*ms) // overlaps the previous: moved after it
	rec(1, t0+ms, t0+6*ms) // another stream: concurrent
	s := d.sample(1, t0+20*ms)
	if !near(*s.UtilPercent, 50, 1e-9) {
		t.Errorf("utilisation %g %%, want 50 (0-10 ms busy of 20)", *s.UtilPercent)
	}
}

// Records come from a client's memory: what no library writes is refused.
func TestRecordsAreChecked(t *testing.T) {
	d := testDevice(t, Options{})
	for _, r := range []wire.Record{
		{Start: t0, End: t0 + ms, Kind: 9, Count: 1},
		{Start: t0, End: t0 + ms},
		{Start: t0 + ms, End: t0, Count: 1},
		{Start: t0, End: t0 + 2*int64(MaxOpDuration), Count: 1},
		{Start: -5, End: 0, Count: 1},
		{Start: math.MaxInt64 - 10, End: math.MaxInt64, Count: 1},
		{Start: t0, End: t0 + ms, Kind: wire.KindKernel, Bytes: 5, Count: 1},
		{Start: t0, End: t0 + ms, Kind: wire.KindH2D, Bytes: MaxCopyBytes + 1, Count: 1},
	} {
		if err := d.record(1, 1, r, t0); err == nil {
			t.Errorf("record %+v accepted", r)
		}
	}
	// Streams per process are bounded.
	for i := range MaxStreamsPerProcess {
		if err := d.record(2, 1, wire.Record{Start: t0, End: t0 + 1, Stream: uint32(i), Count: 1}, t0); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if err := d.record(2, 1, wire.Record{Start: t0, End: t0 + 1, Stream: MaxStreamsPerProcess, Count: 1}, t0); err == nil {
		t.Error("a stream beyond the limit was accepted")
	}
	// So is what one stream may hold unfinished.
	var err error
	for i := 0; err == nil && i < 10*DefaultMaxPending; i++ {
		err = d.record(3, 1, wire.Record{Start: t0, End: t0 + ms, Count: 1}, t0)
	}
	if err == nil {
		t.Error("a stream took ten times the queue depth of unfinished operations")
	}
}

func TestCopiesMoveBytesOverTheLinkNotUtilisation(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	bw := d.opt.pinnedBandwidth()[0]
	if !near(bw, 31.5076923e9*PCIeEfficiency, 1e3) {
		t.Fatalf("Gen4 x16 pinned bandwidth %g, want %g", bw, 31.5076923e9*PCIeEfficiency)
	}
	sc := newSched(t, d)
	const gib = 1 << 30
	dur := int64(math.Ceil(gib / bw * 1e9))
	_, e1 := sc.put(7, 0, wire.KindH2D, dur, gib, t0)
	// A d2h copy on its own engine runs at the same time.
	sc.put(7, 2, wire.KindD2H, dur/4, gib/4, t0)
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
	sc := newSched(t, d)
	// pid 1: 0-60 ms; pid 2: 40-80 ms; union 0-80 ms of a 100 ms window.
	sc.kernel(1, 0, 60*ms, t0)
	sc.kernel(2, 0, 40*ms, t0+40*ms)
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
	newSched(t, d).kernel(1, 0, time.Second.Nanoseconds(), t0+500*ms)
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
	// A record of an operation placed before the last report (the library
	// wrote it while the observer sampled) is moved to the report's end, so
	// the report stays true.
	if err := d.record(1, 1, wire.Record{Start: t0 + 50*ms, End: t0 + 51*ms, Count: 1}, t0+100*ms); err != nil {
		t.Fatal(err)
	}
	s := d.sample(1, t0+102*ms)
	if !near(*s.UtilPercent, 50, 1e-9) {
		t.Errorf("utilisation %g %% after a late record, want 50 (moved to 100-101 ms)", *s.UtilPercent)
	}
}

func TestHistoryIsPrunedBehindObservers(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	sc := newSched(t, d)
	now := t0
	for range 20 {
		for k := range 1000 {
			sc.kernel(1, 0, 10*us, now+int64(k)*100*us)
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
	sc := newSched(t, d)
	for i := 0; i < 10; i++ {
		sc.kernel(42, 0, ms, t0)
	}
	sc.put(42, 1, wire.KindH2D, 42*us, 1<<20, t0)
	sc.put(42, 1, wire.KindH2D, 42*us, 1<<20, t0)
	sc.kernel(7, 0, 1000*ms, t0)
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

// A graph's run of kernels is one record that counts as its kernels.
func TestGraphRecordCountsItsKernels(t *testing.T) {
	d := testDevice(t, Options{})
	d.addObserver(1, t0)
	d.attach(5)
	if err := d.record(5, 1, wire.Record{Start: t0, End: t0 + 10*ms, Count: 40}, t0); err != nil {
		t.Fatal(err)
	}
	s := d.sample(1, t0+20*ms)
	if !near(*s.UtilPercent, 50, 1e-9) || *s.Processes[0].CompletedOps != 40 {
		t.Fatalf("utilisation %g, completed %d: want 50 %% and 40", *s.UtilPercent, *s.Processes[0].CompletedOps)
	}
}

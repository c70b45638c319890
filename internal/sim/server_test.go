package sim_test

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simclient"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
)

// startDevice serves a simulated device for the test's duration.
func startDevice(t testing.TB, opt sim.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("socket %s still exists after the server stopped (err %v)", path, err)
		}
	})
	return path
}

func dial(t *testing.T, path string) *simclient.Client {
	t.Helper()
	c, err := simclient.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func observe(t *testing.T, path string) *sim.Source {
	t.Helper()
	s, err := sim.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialSync(t *testing.T, path, mode string) *simclient.Client {
	t.Helper()
	c, err := simclient.DialOptions(path, simclient.Options{Sync: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSynchronizeReturnsNoEarlierThanTheLastEnd(t *testing.T) {
	livetest.Need(t)
	for _, mode := range []string{"spin", "yield", "block"} {
		t.Run(mode, func(t *testing.T) {
			c := dialSync(t, startDevice(t, sim.Options{}), mode)
			if got := c.Sync(); got != mode {
				t.Fatalf("context waits by %s, want %s", got, mode)
			}
			before := wire.Now()
			for range 5 {
				if err := c.Launch(8*time.Millisecond, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Synchronize(0); err != nil {
				t.Fatal(err)
			}
			// The stream was idle: the last kernel ends no earlier than 40 ms
			// after the first launch, which came after "before".
			if got := time.Duration(wire.Now() - before); got < 40*time.Millisecond {
				t.Fatalf("synchronize returned %v after the first launch, want >= 40ms", got)
			}
			// Device-wide: the longest stream decides.
			before = wire.Now()
			c.Launch(30*time.Millisecond, 5)
			c.Launch(5*time.Millisecond, 0)
			if err := c.SynchronizeDevice(); err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(wire.Now() - before); got < 30*time.Millisecond {
				t.Fatalf("device synchronize returned after %v, want >= 30ms (stream 5)", got)
			}
			// Synchronising an idle stream returns at once (no kernel to wait for).
			if err := c.Synchronize(99); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPageableCopyBlocksPinnedDoesNot(t *testing.T) {
	livetest.Need(t)
	// The staging copy's CPU is read per OS thread (threadCPUOf): the
	// goroutine must stay on one, or the two readings are of different
	// threads (under -race one copy read -184 ms).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := dialSync(t, startDevice(t, sim.Options{LinkGen: 3, LinkWidth: 16}), "block")
	info := c.Info()
	const n = 256 << 20
	pinnedDur := time.Duration(n / info.Bandwidth[0] * 1e9)
	pageableDur := time.Duration(n / (info.Bandwidth[0] * info.PageableFactor) * 1e9)
	c.Memcpy(n, simclient.H2D, false, 0) // first use: the host buffer is made
	c.Memcpy(n, simclient.H2D, true, 0)
	c.SynchronizeDevice()

	cpu0 := threadCPUOf(t)
	before := wire.Now()
	if err := c.Memcpy(n, simclient.H2D, false, 0); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(wire.Now() - before); got < pageableDur {
		t.Fatalf("pageable 256 MiB copy returned after %v, want >= %v (blocks until done)", got, pageableDur)
	}
	// Staging costs the thread CPU even in blocking mode: it copies the bytes.
	if used := threadCPUOf(t) - cpu0; used < time.Millisecond {
		t.Errorf("a pageable copy cost the thread %v of CPU: the staging copy was not made", used)
	}
	// A pinned copy is asynchronous: it returns long before it ends, and
	// synchronising waits for it.
	before = wire.Now()
	if err := c.Memcpy(n, simclient.H2D, true, 0); err != nil {
		t.Fatal(err)
	}
	returned := time.Duration(wire.Now() - before)
	if err := c.Synchronize(0); err != nil {
		t.Fatal(err)
	}
	synced := time.Duration(wire.Now() - before)
	if synced < pinnedDur {
		t.Fatalf("synchronize after a pinned copy returned after %v, want >= %v", synced, pinnedDur)
	}
	if returned >= pinnedDur/4 {
		t.Errorf("pinned copy call took %v, against the copy's %v: it must not block", returned, pinnedDur)
	}
}

// threadCPUOf is the calling OS thread's CPU time: the caller locks its
// goroutine to its thread (runtime.LockOSThread) between two readings.
func threadCPUOf(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestFullStreamBlocksTheSubmitter(t *testing.T) {
	const k = 10 * time.Millisecond
	// With blocking waits a launch that waited for room would sleep, a
	// voluntary context switch of this thread; preemption on a loaded host
	// is involuntary and slows the loop without making it wait.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	nvcsw := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
			t.Fatal(err)
		}
		return ru.Nvcsw
	}
	// A garbage collection's stop-the-world parks this thread too, a
	// voluntary switch: the race lane failed here once (1 in 19 ms), and a
	// goroutine forcing collections beside the loop made 173. None runs
	// during it.
	//
	// A sleep can still come from outside the launches: a page fault that
	// waits for another thread's change to the memory map (the device's
	// server and the Go runtime share this process) is a voluntary switch
	// too. That failed once in make check ("slept 1 times"), passing five
	// times alone after. A launch that waits for room waits on every try;
	// such a sleep does not: the measure is taken again, once, on a fresh
	// device.
	var path string
	var c *simclient.Client
	var before int64
	for try := 1; ; try++ {
		path = startDevice(t, sim.Options{})
		c = dialSync(t, path, "block")
		gc := debug.SetGCPercent(-1)
		var sw int64
		before, sw = wire.Now(), nvcsw()
		for range sim.DefaultMaxPending {
			if err := c.Launch(k, 0); err != nil {
				t.Fatal(err)
			}
		}
		n := nvcsw() - sw
		debug.SetGCPercent(gc)
		if n == 0 {
			break
		}
		if try == 2 {
			t.Fatalf("1024 launches into an empty stream slept %d times (in %v), on each of two devices: they must not wait", n, time.Duration(wire.Now()-before))
		}
		t.Logf("1024 launches into an empty stream slept %d times (in %v): measured again on a fresh device", n, time.Duration(wire.Now()-before))
	}
	// The stream holds 1024 pending kernels: each further launch waits for
	// one to end. The 6th extra launch returns no earlier than the 6th end.
	for range 6 {
		if err := c.Launch(k, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := time.Duration(wire.Now() - before); got < 6*k {
		t.Fatalf("6 launches into a full stream returned after %v, want >= %v", got, 6*k)
	}
	// A second client of the same process shares the primary context, and
	// so the stream: its launch waits too.
	c2 := dialSync(t, path, "block")
	if err := c2.Launch(k, 0); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(wire.Now() - before); got < 7*k {
		t.Fatalf("launch into the full stream from a second client returned after %v since the start, want >= %v", got, 7*k)
	}
	// Another stream is not full.
	before = wire.Now()
	if err := c.Launch(k, 3); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(wire.Now() - before); got > k/2 {
		t.Errorf("a launch on another stream waited %v", got)
	}
}

func TestUtilisationThroughTheSource(t *testing.T) {
	livetest.Need(t)
	path := startDevice(t, sim.Options{})
	src := observe(t, path)
	c := dial(t, path)
	if n := len(src.Devices()); n != 1 || !src.Devices()[0].Simulated {
		t.Fatalf("devices %+v, want one simulated", src.Devices())
	}
	// Fed faster than it drains: 1 ms kernels, 4 per 2 ms of wall time, on
	// top of a 100 ms backlog so that a descheduled test cannot let it drain.
	for range 100 {
		c.Launch(time.Millisecond, 0)
	}
	if _, err := src.Sample(); err != nil { // start a fresh window
		t.Fatal(err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		for range 4 {
			c.Launch(time.Millisecond, 0)
		}
		time.Sleep(2 * time.Millisecond)
	}
	s := sample1(t, src)
	if *s.UtilPercent < 97 {
		t.Errorf("stream fed faster than it drains: utilisation %.2f %%, want ~100", *s.UtilPercent)
	}
	if len(s.Processes) != 1 || s.Processes[0].PID != os.Getpid() {
		t.Errorf("processes %+v, want this test's pid %d", s.Processes, os.Getpid())
	}
	if err := c.SynchronizeDevice(); err != nil {
		t.Fatal(err)
	}
	sample1(t, src) // the drain goes in its own window

	// One 10 us kernel every millisecond, on an absolute schedule: ~1 %.
	start := time.Now()
	launched := 0
	for i := range 400 {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Millisecond)))
		c.Launch(10*time.Microsecond, 0)
		launched++
	}
	s = sample1(t, src)
	window := time.Since(start).Seconds()
	model := 100 * float64(launched) * 10e-6 / window
	if d := *s.UtilPercent - model; d > 0.15 || d < -0.15 {
		t.Errorf("utilisation %.3f %%, the model says %.3f %% (%d kernels of 10 us in %.3f s)", *s.UtilPercent, model, launched, window)
	}
	if *s.UtilPercent > 1.2 || *s.UtilPercent < 0.5 {
		t.Errorf("one 10 us kernel per ms: utilisation %.3f %%, want ~1", *s.UtilPercent)
	}
	if len(s.Points) == 0 {
		t.Error("no fine-grained points")
	}
}

func sample1(t *testing.T, src gpu.Source) gpu.Sample {
	t.Helper()
	ss, err := src.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%d samples, want 1", len(ss))
	}
	if ss[0].Lost != "" {
		t.Fatalf("device lost: %s", ss[0].Lost)
	}
	return ss[0]
}

// TestBusyDeviceCostsNoCPU: a device with queued work must not spin: the
// server reads rings only when asked, and a blocking synchronise sleeps.
func TestBusyDeviceCostsNoCPU(t *testing.T) {
	livetest.Need(t)
	path := startDevice(t, sim.Options{})
	c := dialSync(t, path, "block")
	cpu0 := processCPU(t)
	c.Launch(400*time.Millisecond, 0)
	c.Launch(400*time.Millisecond, 1)
	if err := c.SynchronizeDevice(); err != nil {
		t.Fatal(err)
	}
	if used := processCPU(t) - cpu0; used > 40*time.Millisecond {
		t.Errorf("the process used %v of CPU while the device was busy for 400 ms: the model must not spin", used)
	}
}

func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestSourceReportsLossWhenTheServerStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, sim.Options{Devices: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background()) }()
	src := observe(t, path)
	if n := len(src.Devices()); n != 2 {
		t.Fatalf("%d devices, want 2", n)
	}
	if _, err := src.Sample(); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	ss, err := src.Sample()
	if err != nil {
		t.Fatalf("Sample after the server stopped: %v (want devices marked lost, no error)", err)
	}
	if len(ss) != 2 || ss[0].Lost == "" || ss[1].Lost == "" {
		t.Fatalf("samples %+v, want both devices lost", ss)
	}
}

func TestRefusedRequestsSayWhy(t *testing.T) {
	path := startDevice(t, sim.Options{})
	if _, err := simclient.DialDevice(path, 3); err == nil || !strings.Contains(err.Error(), "no simulated device 3") {
		t.Fatalf("dialling device 3 of a one-device server: %v", err)
	}
	c := dial(t, path)
	// The library checks what it can itself: a kernel of two hours.
	if err := c.Launch(2*sim.MaxOpDuration, 0); err == nil || !strings.Contains(err.Error(), "at most an hour") {
		t.Fatalf("a two-hour kernel: %v", err)
	}
	if _, err := simclient.DialOptions(path, simclient.Options{Sync: "sometimes"}); err == nil {
		t.Fatal("sync mode \"sometimes\" accepted")
	}
	if _, err := simclient.Dial(filepath.Join(t.TempDir(), "nobody.sock")); err == nil || !strings.Contains(err.Error(), "nobody.sock") {
		t.Fatalf("a socket nobody serves: %v", err)
	}
	t.Setenv(simclient.EnvSync, "nap")
	if _, err := simclient.Dial(path); err == nil || !strings.Contains(err.Error(), simclient.EnvSync) {
		t.Fatalf("GPUFEED_SIMDEV_SYNC=nap: %v", err)
	}
}

func TestListenRefusesALiveSocketAndReplacesAStaleOne(t *testing.T) {
	path := startDevice(t, sim.Options{})
	if _, err := sim.Listen(path, sim.Options{}); err == nil {
		t.Fatal("a second server on a live socket started")
	}
	// A socket file left behind by a crashed server is replaced.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	srv, err := sim.Listen(stale, sim.Options{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	srv.Close()
	// A regular file is not ours to remove.
	regular := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Listen(regular, sim.Options{}); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
}

// Options the model cannot run with are refused, not replaced: zero means
// the default, a negative or NaN value is a mistake (a NaN pageable factor
// made every pageable copy last forever).
func TestListenRefusesImpossibleOptions(t *testing.T) {
	for _, o := range []sim.Options{
		{PageableFactor: math.NaN()}, {PageableFactor: math.Inf(1)}, {PageableFactor: -1},
		{Devices: -5}, {Devices: sim.MaxDevices + 1},
		{MaxPending: -1},
		{PointWindow: -time.Millisecond}, {PointWindow: time.Nanosecond},
		{D2DBandwidth: math.NaN()},
		{LaunchCost: -time.Microsecond}, {LaunchCost: time.Second},
		{RingCapacity: 10}, {RingCapacity: -1},
	} {
		path := filepath.Join(t.TempDir(), "gpu.sock")
		if srv, err := sim.Listen(path, o); err == nil {
			srv.Close()
			t.Errorf("Listen accepted %+v", o)
		}
	}
	srv, err := sim.Listen(filepath.Join(t.TempDir(), "gpu.sock"), sim.Options{})
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	srv.Close()
}

package cudadrv_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/cudadrv"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// TestGoDrivesTheDriverAPI drives the simulated driver from Go the way a
// drill would drive libcuda.so.1 through this binding: load the PTX kernel
// with cuModuleLoadData, launch it with its duration as the first
// parameter between two events on a stream of a blocking-sync context,
// and read the elapsed time back, while the device reports the kernel's
// utilisation to an observer.
func TestGoDrivesTheDriverAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	lp, err := simcuda.Path()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := cudadrv.Open(lp)
	if err != nil {
		t.Fatal(err)
	}
	if !lib.Simulated() {
		t.Fatalf("%s is not the simulated driver", lp)
	}
	if err := lib.Init(); err != nil && !cudadrv.IsCode(err, cudadrv.ErrorNoDevice) { // GPUFEED_SIMDEV unset: no default device
		t.Fatal(err)
	}
	dev, err := lib.SimDeviceGet(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lib.CtxCreate(cudadrv.SchedBlockingSync, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.CtxDestroy(c)
	info, err := lib.SimCtxInfo(c)
	if err != nil || info.SchedResolved != cudadrv.SchedBlockingSync {
		t.Fatalf("context info %+v (%v): want blocking synchronisation", info, err)
	}
	if name, err := lib.DeviceName(dev); err != nil || name != "gpufeed simulated GPU 0" {
		t.Errorf("cuDeviceGetName: %q (%v)", name, err)
	}
	if v, err := lib.DriverVersion(); err != nil || v < 12000 {
		t.Errorf("cuDriverGetVersion: %d (%v)", v, err)
	}
	if _, err := lib.PCIBusID(dev); !cudadrv.IsCode(err, 801) || !strings.Contains(err.Error(), "no PCI bus") {
		t.Errorf("cuDeviceGetPCIBusId of a simulated device: %v, want CUDA_ERROR_NOT_SUPPORTED saying why", err)
	}
	// Page-locked memory from cuMemAllocHost: an asynchronous copy from it
	// returns at once, as from cuMemHostAlloc's.
	hp, err := lib.MemAllocHost(c, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := lib.MemAlloc(c, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := lib.MemcpyHtoD(c, dp, hp, 8<<20, nil, true); err != nil {
		t.Fatal(err)
	}
	if call := time.Since(t0); call > 100*time.Microsecond {
		t.Logf("async copy from cuMemAllocHost memory took %v to return (a loaded machine?)", call)
	}
	if err := lib.CtxSynchronize(c); err != nil {
		t.Fatal(err)
	}
	lib.MemFree(c, dp)
	if err := lib.MemFreeHost(hp); err != nil {
		t.Errorf("cuMemFreeHost of cuMemAllocHost memory: %v", err)
	}
	mod, err := lib.ModuleLoadData(c, simcuda.KernelPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := lib.ModuleGetFunction(mod, simcuda.KernelName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := lib.StreamCreate(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := lib.EventCreate(c, 0)
	b, _ := lib.EventCreate(c, 0)
	obs, err := sim.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.Sample()

	const kernel = 30 * time.Millisecond
	start := time.Now()
	for _, step := range []error{lib.EventRecord(c, a, s), lib.Launch(c, fn, s, uint64(kernel)), lib.EventRecord(c, b, s)} {
		if step != nil {
			t.Fatal(step)
		}
	}
	took := time.Since(start)
	if took > kernel/2 {
		t.Errorf("queueing a kernel took %v: a launch must not wait for it", took)
	}
	if err := lib.EventSynchronize(c, b); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < kernel {
		t.Errorf("cuEventSynchronize returned after %v, before the %v kernel ended", waited, kernel)
	}
	ms, err := lib.EventElapsed(a, b)
	// The device was idle: the first event completes as it arrives and
	// the kernel starts when its launch arrives, so the elapsed time is
	// the kernel's plus the host's time between the two calls (on a
	// loaded host, tens of microseconds), as on a GPU.
	if hi := 30 + float64(took)/1e6 + 0.01; err != nil || float64(ms) < 30-0.01 || float64(ms) > hi {
		t.Errorf("cuEventElapsedTime %v ms (%v), want the kernel's 30 ms plus at most the %v the host took to queue it", ms, err, took)
	}
	ss, err := obs.Sample()
	if err != nil || len(ss) != 1 || ss[0].UtilPercent == nil || *ss[0].UtilPercent <= 0 {
		t.Fatalf("sample %+v (%v): want the kernel's utilisation", ss, err)
	}
}

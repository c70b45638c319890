package nvml

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// The tests run the source against go-nvml's fake DGX H100 (pkg/nvml/mock),
// with the calls the fake leaves out filled in per device: a healthy GPU, one
// that does not support some readings, one that falls off the bus.

// clock is the fake time both NVML's sample timestamps and the source read.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeGPU is the state behind one mock device.
type fakeGPU struct {
	clk *clock
	// util is NVML's buffer of utilisation samples: (µs timestamp, percent).
	util [][2]uint64
	// procUtil is the per-process buffer: (µs timestamp, pid, sm%).
	procUtil [][3]uint64
	lost     bool
	calls    map[string]int
	mu       sync.Mutex
}

func (f *fakeGPU) call(name string) nv.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
	if f.lost {
		return nv.ERROR_GPU_IS_LOST
	}
	return nv.SUCCESS
}

func (f *fakeGPU) addUtil(at time.Time, pct uint32) {
	f.util = append(f.util, [2]uint64{uint64(at.UnixMicro()), uint64(pct)})
}

func u32(v uint32) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return b
}

// healthy fills in every call the source makes with plausible H100 values.
func healthy(d *server.Device, f *fakeGPU) {
	d.GetPciInfoFunc = func() (nv.PciInfo, nv.Return) {
		var p nv.PciInfo
		for i, c := range "00000000:81:00.0" {
			p.BusId[i] = int8(c)
		}
		return p, f.call("GetPciInfo")
	}
	d.GetMemoryInfoFunc = func() (nv.Memory, nv.Return) {
		return nv.Memory{Total: 80 << 30, Used: 20 << 30, Free: 60 << 30}, f.call("GetMemoryInfo")
	}
	d.GetSamplesFunc = func(t nv.SamplingType, last uint64) (nv.ValueType, []nv.Sample, nv.Return) {
		if ret := f.call("GetSamples"); ret != nv.SUCCESS {
			return 0, nil, ret
		}
		if t != nv.GPU_UTILIZATION_SAMPLES {
			return 0, nil, nv.ERROR_INVALID_ARGUMENT
		}
		var out []nv.Sample
		for _, u := range f.util {
			if u[0] > last {
				out = append(out, nv.Sample{TimeStamp: u[0], SampleValue: u32(uint32(u[1]))})
			}
		}
		if len(out) == 0 {
			return 0, nil, nv.ERROR_NOT_FOUND
		}
		return nv.VALUE_TYPE_UNSIGNED_INT, out, nv.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nv.Utilization, nv.Return) {
		return nv.Utilization{Gpu: 55, Memory: 20}, f.call("GetUtilizationRates")
	}
	d.GetClockInfoFunc = func(ct nv.ClockType) (uint32, nv.Return) {
		if ct == nv.CLOCK_SM {
			return 1755, f.call("GetClockInfo")
		}
		return 2619, f.call("GetClockInfo")
	}
	d.GetMaxClockInfoFunc = func(ct nv.ClockType) (uint32, nv.Return) {
		if ct == nv.CLOCK_SM {
			return 1980, f.call("GetMaxClockInfo")
		}
		return 2619, f.call("GetMaxClockInfo")
	}
	d.GetApplicationsClockFunc = func(ct nv.ClockType) (uint32, nv.Return) {
		if ct == nv.CLOCK_SM {
			return 1755, f.call("GetApplicationsClock")
		}
		return 2619, f.call("GetApplicationsClock")
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nv.Return) {
		return 0x4, f.call("GetCurrentClocksEventReasons") // SW power cap
	}
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nv.Return) {
		return 0x4, f.call("GetCurrentClocksThrottleReasons")
	}
	d.GetPowerUsageFunc = func() (uint32, nv.Return) { return 350500, f.call("GetPowerUsage") }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nv.Return) { return 700000, f.call("GetEnforcedPowerLimit") }
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, nv.Return) {
		return 700000, f.call("GetPowerManagementDefaultLimit")
	}
	d.GetTemperatureFunc = func(nv.TemperatureSensors) (uint32, nv.Return) { return 61, f.call("GetTemperature") }
	d.GetPcieThroughputFunc = func(c nv.PcieUtilCounter) (uint32, nv.Return) {
		if c == nv.PCIE_UTIL_TX_BYTES {
			return 1000, f.call("GetPcieThroughput")
		}
		return 2000, f.call("GetPcieThroughput")
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, nv.Return) { return 4, f.call("GetCurrPcieLinkGeneration") }
	d.GetCurrPcieLinkWidthFunc = func() (int, nv.Return) { return 16, f.call("GetCurrPcieLinkWidth") }
	d.GetMaxPcieLinkGenerationFunc = func() (int, nv.Return) { return 5, f.call("GetMaxPcieLinkGeneration") }
	d.GetMaxPcieLinkWidthFunc = func() (int, nv.Return) { return 16, f.call("GetMaxPcieLinkWidth") }
	d.GetPcieReplayCounterFunc = func() (int, nv.Return) { return 3, f.call("GetPcieReplayCounter") }
	d.GetComputeRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) {
		return []nv.ProcessInfo{
			{Pid: 4242, UsedGpuMemory: 1 << 30},
			{Pid: 23, UsedGpuMemory: math.MaxUint64}, // memory not available
			{Pid: 9999, UsedGpuMemory: 1 << 20},
		}, f.call("GetComputeRunningProcesses")
	}
	d.GetProcessUtilizationFunc = func(last uint64) ([]nv.ProcessUtilizationSample, nv.Return) {
		if ret := f.call("GetProcessUtilization"); ret != nv.SUCCESS {
			return nil, ret
		}
		var out []nv.ProcessUtilizationSample
		for _, u := range f.procUtil {
			if u[0] > last {
				out = append(out, nv.ProcessUtilizationSample{TimeStamp: u[0], Pid: uint32(u[1]), SmUtil: uint32(u[2]), MemUtil: 10})
			}
		}
		if len(out) == 0 {
			return nil, nv.ERROR_NOT_FOUND
		}
		return out, nv.SUCCESS
	}
	d.GetPersistenceModeFunc = func() (nv.EnableState, nv.Return) {
		return nv.FEATURE_ENABLED, f.call("GetPersistenceMode")
	}
	d.GetNumaNodeIdFunc = func() (int, nv.Return) { return 1, f.call("GetNumaNodeId") }
	d.GetEccModeFunc = func() (nv.EnableState, nv.EnableState, nv.Return) {
		return nv.FEATURE_ENABLED, nv.FEATURE_ENABLED, f.call("GetEccMode")
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nv.Return) {
		return 0, 1, true, false, f.call("GetRemappedRows")
	}
	d.GetRetiredPagesFunc = func(c nv.PageRetirementCause) ([]uint64, nv.Return) {
		return nil, f.call("GetRetiredPages")
	}
}

// gpmFake implements the library-level GPM calls: each GpmSampleGet records
// the device's "counter" at that moment; the metrics are fixed values.
func gpmFake(s *server.Server, supported map[nv.Device]bool) {
	s.GpmQueryDeviceSupportFunc = func(d nv.Device) (nv.GpmSupport, nv.Return) {
		if supported[d] {
			return nv.GpmSupport{IsSupportedDevice: 1}, nv.SUCCESS
		}
		return nv.GpmSupport{}, nv.ERROR_NOT_SUPPORTED
	}
	s.GpmSampleAllocFunc = func() (nv.GpmSample, nv.Return) { return &mock.GpmSample{}, nv.SUCCESS }
	s.GpmSampleFreeFunc = func(nv.GpmSample) nv.Return { return nv.SUCCESS }
	s.GpmSampleGetFunc = func(nv.Device, nv.GpmSample) nv.Return { return nv.SUCCESS }
	s.GpmMetricsGetFunc = func(mg *nv.GpmMetricsGetType) nv.Return {
		if mg.Sample1 == mg.Sample2 || mg.Sample1 == nil {
			return nv.ERROR_INVALID_ARGUMENT
		}
		for i := range int(mg.NumMetrics) {
			m := &mg.Metrics[i]
			switch nv.GpmMetricId(m.MetricId) {
			case nv.GPM_METRIC_SM_UTIL:
				m.Value = 81.5
			case nv.GPM_METRIC_SM_OCCUPANCY:
				m.Value = 40
			case nv.GPM_METRIC_ANY_TENSOR_UTIL:
				m.Value = 0 // a real zero: read, and zero
			case nv.GPM_METRIC_DRAM_BW_UTIL:
				m.Value = 55
			case nv.GPM_METRIC_PCIE_TX_PER_SEC:
				m.Value = 100
			case nv.GPM_METRIC_PCIE_RX_PER_SEC:
				m.NvmlReturn = uint32(nv.ERROR_NOT_SUPPORTED)
			}
		}
		return nv.SUCCESS
	}
}

type rig struct {
	srv  *server.Server
	clk  *clock
	gpus []*fakeGPU
}

// newRig builds a fake host with n H100s, all healthy and GPM-capable.
func newRig(t *testing.T, n int) *rig {
	t.Helper()
	srv := dgxh100.New()
	srv.Devices = srv.Devices[:n]
	clk := &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	r := &rig{srv: srv, clk: clk}
	sup := map[nv.Device]bool{}
	for _, d := range srv.Devices {
		f := &fakeGPU{clk: clk, calls: map[string]int{}}
		healthy(d.(*server.Device), f)
		r.gpus = append(r.gpus, f)
		sup[d] = true
	}
	gpmFake(srv, sup)
	return r
}

func (r *rig) open(t *testing.T) *Source {
	t.Helper()
	s, err := Open(Options{Lib: r.srv, ProcRoot: "testdata/proc", Now: r.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sampleAll(t *testing.T, s *Source) []gpu.Sample {
	t.Helper()
	ss, err := s.Sample()
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return ss
}

func TestHealthyDevice(t *testing.T) {
	r := newRig(t, 1)
	f := r.gpus[0]
	// NVML's buffer already holds a sample from before gpufeed started.
	f.addUtil(r.clk.now().Add(-time.Second), 99)
	s := r.open(t)

	if s.Name() != "NVML 550.54.15" {
		t.Errorf("Name %q", s.Name())
	}
	info := s.Devices()[0]
	if info.Name != "NVIDIA H100 80GB HBM3" || !strings.HasPrefix(info.UUID, "GPU-") || info.BusID != "0000:81:00.0" {
		t.Errorf("identity: %q %q %q", info.Name, info.UUID, info.BusID)
	}
	if *info.MaxSMClockMHz != 1980 || *info.AppSMClockMHz != 1755 || *info.PowerLimitW != 700 ||
		*info.DefaultPowerLimitW != 700 || *info.LinkGenMax != 5 || *info.LinkWidthMax != 16 ||
		!*info.PersistenceMode || *info.NUMANode != 1 || !*info.ECCEnabled || !*info.RemappedRowsPending ||
		*info.RemappedRowsFailed || *info.RetiredPages != 0 || !info.GPMSupported || *info.MemTotalBytes != 80<<30 {
		t.Errorf("static facts: %+v", info)
	}
	if len(info.Unsupported) != 0 || len(info.Errors) != 0 {
		t.Errorf("unsupported %v errors %v on a healthy device", info.Unsupported, info.Errors)
	}

	// 100 ms later: five 20 ms utilisation samples, bursty.
	for i, pct := range []uint32{100, 0, 100, 0, 50} {
		f.addUtil(r.clk.now().Add(time.Duration(i+1)*20*time.Millisecond), pct)
	}
	f.procUtil = append(f.procUtil, [3]uint64{uint64(r.clk.now().Add(50 * time.Millisecond).UnixMicro()), 4242, 60})
	r.clk.advance(100 * time.Millisecond)
	s1 := sampleAll(t, s)[0]
	if len(s1.Points) != 5 {
		t.Fatalf("%d points, want 5 (the pre-start sample excluded)", len(s1.Points))
	}
	if *s1.UtilPercent != 50 {
		t.Errorf("utilisation %g, want the points' mean 50", *s1.UtilPercent)
	}
	if *s1.MemUtilPercent != 20 || *s1.SMClockMHz != 1755 || *s1.MemClockMHz != 2619 || *s1.ClockEventReasons != 0x4 ||
		*s1.PowerW != 350.5 || *s1.TempC != 61 || *s1.MemUsedBytes != 20<<30 || *s1.PCIeTxBytesPerSec != 1000*1024 ||
		*s1.PCIeRxBytesPerSec != 2000*1024 || *s1.LinkGen != 4 || *s1.LinkWidth != 16 || *s1.ReplayCounter != 3 {
		t.Errorf("sample: %+v", s1)
	}
	if s1.GPM != nil {
		t.Errorf("GPM on the first sample %+v, want nil (needs two GPM samples)", s1.GPM)
	}
	// Processes: 4242 is in the proc root (container PID 17); 23 is the
	// inner PID of 5000; 9999 is nowhere (a host PID seen from a container).
	want := map[int]gpu.Process{}
	for _, p := range s1.Processes {
		want[p.PID] = p
	}
	if p := want[4242]; p.NSPID != 17 || *p.UsedMemBytes != 1<<30 || *p.SMUtilPercent != 60 || p.NotVisible != "" {
		t.Errorf("process 4242: %+v", p)
	}
	if p := want[5000]; p.NSPID != 23 || p.UsedMemBytes != nil || p.NotVisible != "" {
		t.Errorf("process 23 (inner) -> 5000: %+v", p)
	}
	if p := want[9999]; !strings.Contains(p.NotVisible, "not found under testdata/proc") {
		t.Errorf("process 9999: %+v, want not visible", p)
	}

	// The next sample sees only newer points, and GPM metrics.
	f.addUtil(r.clk.now().Add(20*time.Millisecond), 10)
	r.clk.advance(50 * time.Millisecond)
	s2 := sampleAll(t, s)[0]
	if len(s2.Points) != 1 || s2.Points[0].Percent != 10 || *s2.UtilPercent != 10 {
		t.Errorf("second sample points %+v util %v, want one point of 10", s2.Points, *s2.UtilPercent)
	}
	g := s2.GPM
	if g == nil || *g.SMActivityPct != 81.5 || *g.SMOccupancyPct != 40 || g.TensorActivityPct == nil ||
		*g.TensorActivityPct != 0 || *g.DRAMActivityPct != 55 || *g.PCIeTxBytesPerSec != 100<<20 || g.PCIeRxBytesPerSec != nil {
		t.Fatalf("GPM %+v", g)
	}
	if !slices.Contains(s2.Unsupported, "gpm.pcie_rx_bytes_per_sec") {
		t.Errorf("unsupported %v: want the GPM metric NVML refused named", s2.Unsupported)
	}
	// No new utilisation sample: NVML answers NOT_FOUND, which is not an error.
	r.clk.advance(10 * time.Millisecond)
	s3 := sampleAll(t, s)[0]
	if len(s3.Points) != 0 || *s3.UtilPercent != 55 || len(s3.Errors) != 0 {
		t.Errorf("without new points: %d points, util %v (want the rate, 55), errors %v", len(s3.Points), *s3.UtilPercent, s3.Errors)
	}
}

func TestUnsupportedReadingsAreNamedNotZero(t *testing.T) {
	r := newRig(t, 2)
	d := r.srv.Devices[1].(*server.Device)
	f := r.gpus[1]
	notSupported := func(name string) nv.Return {
		f.mu.Lock()
		f.calls[name]++
		f.mu.Unlock()
		return nv.ERROR_NOT_SUPPORTED
	}
	d.GetSamplesFunc = func(nv.SamplingType, uint64) (nv.ValueType, []nv.Sample, nv.Return) {
		return 0, nil, notSupported("GetSamples")
	}
	d.GetTemperatureFunc = func(nv.TemperatureSensors) (uint32, nv.Return) { return 0, notSupported("GetTemperature") }
	d.GetPcieThroughputFunc = func(nv.PcieUtilCounter) (uint32, nv.Return) { return 0, notSupported("GetPcieThroughput") }
	d.GetProcessUtilizationFunc = func(uint64) ([]nv.ProcessUtilizationSample, nv.Return) {
		return nil, notSupported("GetProcessUtilization")
	}
	d.GetEccModeFunc = func() (nv.EnableState, nv.EnableState, nv.Return) { return 0, 0, notSupported("GetEccMode") }
	d.GetPowerUsageFunc = func() (uint32, nv.Return) { return 0, nv.ERROR_NO_PERMISSION }
	r.srv.GpmQueryDeviceSupportFunc = func(dev nv.Device) (nv.GpmSupport, nv.Return) {
		if dev == r.srv.Devices[1] {
			return nv.GpmSupport{IsSupportedDevice: 0}, nv.SUCCESS // answered: not this device
		}
		return nv.GpmSupport{IsSupportedDevice: 1}, nv.SUCCESS
	}
	s := r.open(t)
	info := s.Devices()[1]
	if info.ECCEnabled != nil || !slices.Contains(info.Unsupported, "ecc_enabled") || info.GPMSupported || !slices.Contains(info.Unsupported, "gpm") {
		t.Errorf("static facts: ecc %v gpm %v unsupported %v", info.ECCEnabled, info.GPMSupported, info.Unsupported)
	}
	for range 3 {
		r.clk.advance(100 * time.Millisecond)
		ss := sampleAll(t, s)
		if ss[0].TempC == nil || *ss[0].TempC != 61 {
			t.Errorf("device 0 unaffected: temp %v", ss[0].TempC)
		}
		x := ss[1]
		if x.TempC != nil || x.PCIeTxBytesPerSec != nil || x.PCIeRxBytesPerSec != nil || x.Points != nil || x.PowerW != nil || x.GPM != nil {
			t.Fatalf("unsupported readings filled in: %+v", x)
		}
		for _, name := range []string{"points", "temp_c", "pcie_tx_bytes_per_sec", "pcie_rx_bytes_per_sec", "process_utilization", "gpm"} {
			if !slices.Contains(x.Unsupported, name) {
				t.Errorf("unsupported %v: %s missing", x.Unsupported, name)
			}
		}
		if x.Errors["power_w"] != "ERROR_NO_PERMISSION" || slices.Contains(x.Unsupported, "power_w") {
			t.Errorf("power: errors %v, unsupported %v: want ERROR_NO_PERMISSION as an error, not unsupported", x.Errors, x.Unsupported)
		}
		// GetUtilizationRates still gives the GPU utilisation.
		if x.UtilPercent == nil || *x.UtilPercent != 55 {
			t.Errorf("utilisation %v, want 55 from the rates", x.UtilPercent)
		}
		// Processes still listed, without utilisation.
		if len(x.Processes) != 3 || x.Processes[0].SMUtilPercent != nil {
			t.Errorf("processes %+v", x.Processes)
		}
	}
	// A reading the device refused is not asked for again.
	if n := f.calls["GetTemperature"]; n != 1 {
		t.Errorf("GetTemperature called %d times, want once", n)
	}
}

func TestDeviceFallsOffTheBus(t *testing.T) {
	r := newRig(t, 2)
	s := r.open(t)
	r.clk.advance(100 * time.Millisecond)
	if ss := sampleAll(t, s); ss[0].Lost != "" || ss[1].Lost != "" {
		t.Fatalf("lost before the fault: %q %q", ss[0].Lost, ss[1].Lost)
	}
	f := r.gpus[0]
	f.mu.Lock()
	f.lost = true
	f.mu.Unlock()
	for i := range 3 {
		r.clk.advance(100 * time.Millisecond)
		ss, err := s.Sample()
		if err != nil {
			t.Fatalf("sample %d after the loss: %v (the run must go on)", i, err)
		}
		if !strings.Contains(ss[0].Lost, "GPU is lost") || ss[0].Index != 0 {
			t.Fatalf("device 0 after the loss: %+v", ss[0])
		}
		if ss[0].SMClockMHz != nil {
			t.Errorf("readings after the loss: %+v", ss[0])
		}
		if ss[1].Lost != "" || ss[1].SMClockMHz == nil {
			t.Errorf("device 1 must be unaffected: %+v", ss[1])
		}
	}
	// Once lost, the device is not asked anything more: the first failed
	// call is the last one.
	f.mu.Lock()
	f.calls = map[string]int{}
	f.mu.Unlock()
	r.clk.advance(100 * time.Millisecond)
	sampleAll(t, s)
	if len(f.calls) != 0 {
		t.Errorf("a lost device was still called: %v", f.calls)
	}
}

func TestOldDriverWithoutNewerFunctions(t *testing.T) {
	r := newRig(t, 1)
	newer := map[string]bool{
		"nvmlDeviceGetCurrentClocksEventReasons": true,
		"nvmlDeviceGetNumaNodeId":                true,
		"nvmlGpmQueryDeviceSupport":              true,
	}
	r.srv.LookupSymbolFunc = func(name string) error {
		if newer[name] {
			return errors.New("undefined symbol: " + name)
		}
		return nil
	}
	s := r.open(t)
	info := s.Devices()[0]
	if info.NUMANode != nil || !slices.Contains(info.Unsupported, "numa_node") || info.GPMSupported {
		t.Errorf("old driver static facts: numa %v gpm %v unsupported %v", info.NUMANode, info.GPMSupported, info.Unsupported)
	}
	r.clk.advance(100 * time.Millisecond)
	x := sampleAll(t, s)[0]
	f := r.gpus[0]
	if x.ClockEventReasons == nil || f.calls["GetCurrentClocksThrottleReasons"] != 1 || f.calls["GetCurrentClocksEventReasons"] != 0 {
		t.Errorf("clock event reasons %v via %v: want the throttle-reasons call on an old driver", x.ClockEventReasons, f.calls)
	}
	if f.calls["GetNumaNodeId"] != 0 {
		t.Error("a function the driver lacks was called")
	}
}

func TestNoDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nv.Return { return nv.ERROR_LIBRARY_NOT_FOUND }}
	_, err := Open(Options{Lib: lib})
	if !errors.Is(err, ErrNoDriver) || err.Error() != "no NVIDIA driver: libnvidia-ml.so.1 not found" {
		t.Fatalf("Open without a driver: %v", err)
	}
	lib.InitFunc = func() nv.Return { return nv.ERROR_DRIVER_NOT_LOADED }
	if _, err := Open(Options{Lib: lib}); err == nil || !strings.Contains(err.Error(), "ERROR_DRIVER_NOT_LOADED") {
		t.Fatalf("Open with the kernel module not loaded: %v", err)
	}
}

// TestSystemLibrary opens the real libnvidia-ml.so.1: on hosts without a
// driver (CI, this project's machines) that must be the one-line error.
func TestSystemLibrary(t *testing.T) {
	s, err := Open(Options{})
	if err == nil {
		defer s.Close()
		t.Logf("a driver is present: %s, %d devices", s.Name(), len(s.Devices()))
		if _, err := s.Sample(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if errors.Is(err, ErrNoDriver) {
		if err.Error() != "no NVIDIA driver: libnvidia-ml.so.1 not found" {
			t.Fatalf("message %q", err)
		}
		return
	}
	t.Skipf("NVML present but unusable here: %v", err)
}

func TestParseNSpid(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"Name:\tx\nNSpid:\t4242\t17\n", []int{4242, 17}, true},
		{"NSpid:\t1\n", []int{1}, true},
		{"Name:\tx\n", nil, false},
		{"NSpid:\t12\tabc\n", nil, false},
		{"NSpid:\n", nil, false},
	} {
		got, ok := parseNSpid([]byte(c.in))
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("parseNSpid(%q) = %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseNSpid(f *testing.F) {
	f.Add([]byte("Name:\tpython3\nNSpid:\t4242\t17\n"))
	f.Add([]byte("NSpid:\t-1\n"))
	f.Add([]byte("NSpid:\t99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, ok := parseNSpid(b)
		if ok {
			for _, p := range pids {
				if p <= 0 {
					t.Fatalf("non-positive PID %d accepted from %q", p, b)
				}
			}
		}
	})
}

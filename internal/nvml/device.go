package nvml

import (
	"encoding/binary"
	"math"
	"sort"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// device is one GPU and what the source remembers between its samples.
type device struct {
	index int
	src   *Source
	h     nv.Device

	// lost is set once the device stopped answering; it stays lost.
	lost string
	// unsupported remembers the readings the device said it does not
	// support, so they are not asked for again.
	unsupported map[string]bool
	// since is the start of the next window: NVML keeps a buffer of past
	// samples, and the first window must not reach back before Open.
	since time.Time
	// lastUtilTS and lastProcTS are the newest NVML sample timestamps seen
	// (microseconds), passed back so each call returns only newer samples.
	lastUtilTS, lastProcTS uint64

	gpm gpmState
}

// sample reads the device once.
func (d *device) sample() gpu.Sample {
	now := d.src.now()
	s := gpu.Sample{Index: d.index, At: now}
	if d.lost != "" || d.h == nil {
		s.Lost = d.lost
		return s
	}
	r := &reading{d: d}
	h := d.h
	f64 := func(v float64) *float64 { return &v }

	// GPU utilisation at NVML's finest resolution: every sample since the
	// last one seen, so bursts show, not only averages.
	if r.want("points") {
		vt, samples, ret := h.GetSamples(nv.GPU_UTILIZATION_SAMPLES, d.lastUtilTS)
		switch {
		case ret == nv.ERROR_NOT_FOUND: // no new sample since the last call
		case r.ok("points", ret):
			s.Points = d.points(vt, samples)
		}
	}
	if len(s.Points) > 0 {
		var sum float64
		for _, p := range s.Points {
			sum += p.Percent
		}
		s.UtilPercent = f64(sum / float64(len(s.Points)))
	}
	// nvmlDeviceGetUtilizationRates: memory utilisation, and GPU utilisation
	// when the device gave no fine-grained samples.
	if r.want("mem_util_percent") {
		u, ret := h.GetUtilizationRates()
		if r.ok("mem_util_percent", ret) {
			if s.UtilPercent == nil {
				s.UtilPercent = f64(float64(u.Gpu))
			}
			s.MemUtilPercent = f64(float64(u.Memory))
		}
	}
	if s.UtilPercent == nil && d.unsupported["points"] && d.unsupported["mem_util_percent"] {
		r.unsupported = append(r.unsupported, "util_percent")
	}
	if r.want("sm_clock_mhz") {
		if v, ret := h.GetClockInfo(nv.CLOCK_SM); r.ok("sm_clock_mhz", ret) {
			s.SMClockMHz = &v
		}
	}
	if r.want("mem_clock_mhz") {
		if v, ret := h.GetClockInfo(nv.CLOCK_MEM); r.ok("mem_clock_mhz", ret) {
			s.MemClockMHz = &v
		}
	}
	if r.want("clock_event_reasons") {
		get := h.GetCurrentClocksThrottleReasons // drivers before 535
		if d.src.hasSymbol("nvmlDeviceGetCurrentClocksEventReasons") {
			get = h.GetCurrentClocksEventReasons
		}
		if v, ret := get(); r.ok("clock_event_reasons", ret) {
			s.ClockEventReasons = &v
		}
	}
	if r.want("power_w") {
		if v, ret := h.GetPowerUsage(); r.ok("power_w", ret) {
			s.PowerW = milliwatts(v)
		}
	}
	if r.want("temp_c") {
		if v, ret := h.GetTemperature(nv.TEMPERATURE_GPU); r.ok("temp_c", ret) {
			s.TempC = f64(float64(v))
		}
	}
	if r.want("mem_used_bytes") {
		if v, ret := h.GetMemoryInfo(); r.ok("mem_used_bytes", ret) {
			s.MemUsedBytes = &v.Used
		}
	}
	// NVML's PCIe throughput is in KB/s (1 KB = 1024 bytes) over a 20 ms window.
	if r.want("pcie_tx_bytes_per_sec") {
		if v, ret := h.GetPcieThroughput(nv.PCIE_UTIL_TX_BYTES); r.ok("pcie_tx_bytes_per_sec", ret) {
			s.PCIeTxBytesPerSec = f64(float64(v) * 1024)
		}
	}
	if r.want("pcie_rx_bytes_per_sec") {
		if v, ret := h.GetPcieThroughput(nv.PCIE_UTIL_RX_BYTES); r.ok("pcie_rx_bytes_per_sec", ret) {
			s.PCIeRxBytesPerSec = f64(float64(v) * 1024)
		}
	}
	if r.want("link_gen") {
		if v, ret := h.GetCurrPcieLinkGeneration(); r.ok("link_gen", ret) {
			s.LinkGen = &v
		}
	}
	if r.want("link_width") {
		if v, ret := h.GetCurrPcieLinkWidth(); r.ok("link_width", ret) {
			s.LinkWidth = &v
		}
	}
	if r.want("replay_counter") {
		if v, ret := h.GetPcieReplayCounter(); r.ok("replay_counter", ret) {
			n := uint64(max(v, 0))
			s.ReplayCounter = &n
		}
	}
	s.Processes = d.processes(r)
	s.GPM = d.gpm.read(r, h)

	d.since = now
	s.Unsupported, s.Errors = r.unsupported, r.errors
	if d.lost != "" {
		// Lost during this read: what was read before the loss is kept.
		s.Lost = d.lost
	}
	return s
}

// points decodes NVML utilisation samples newer than the window's start.
func (d *device) points(vt nv.ValueType, samples []nv.Sample) []gpu.UtilPoint {
	from := uint64(d.since.UnixMicro())
	pts := make([]gpu.UtilPoint, 0, len(samples))
	for _, x := range samples {
		d.lastUtilTS = max(d.lastUtilTS, x.TimeStamp)
		if x.TimeStamp <= from {
			continue // from NVML's buffer, before this window
		}
		v, ok := sampleValue(vt, x.SampleValue)
		if !ok {
			continue
		}
		pts = append(pts, gpu.UtilPoint{At: time.UnixMicro(int64(x.TimeStamp)), Percent: v})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
	return pts
}

// sampleValue decodes an nvmlValue_t union by its type.
func sampleValue(vt nv.ValueType, b [8]byte) (float64, bool) {
	le := binary.LittleEndian
	switch vt {
	case nv.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(le.Uint64(b[:])), true
	case nv.VALUE_TYPE_UNSIGNED_INT:
		return float64(le.Uint32(b[:])), true
	case nv.VALUE_TYPE_UNSIGNED_LONG, nv.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(le.Uint64(b[:])), true
	case nv.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(le.Uint64(b[:]))), true
	case nv.VALUE_TYPE_SIGNED_INT:
		return float64(int32(le.Uint32(b[:]))), true
	case nv.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(le.Uint16(b[:])), true
	}
	return 0, false
}

// processes lists the running compute processes with their memory and, from
// the per-process utilisation samples of the window, their SM and memory
// utilisation; PIDs are mapped into the proc root's view.
func (d *device) processes(r *reading) []gpu.Process {
	h := d.h
	byPID := map[uint32]*gpu.Process{}
	var order []uint32
	get := func(pid uint32) *gpu.Process {
		p := byPID[pid]
		if p == nil {
			p = &gpu.Process{PID: int(pid)}
			byPID[pid] = p
			order = append(order, pid)
		}
		return p
	}
	if r.want("processes") {
		if procs, ret := h.GetComputeRunningProcesses(); r.ok("processes", ret) {
			for _, pi := range procs {
				p := get(pi.Pid)
				// NVML_VALUE_NOT_AVAILABLE (all ones) when the driver cannot
				// say, e.g. without permission: not read, not zero.
				if pi.UsedGpuMemory != math.MaxUint64 {
					m := pi.UsedGpuMemory
					p.UsedMemBytes = &m
				}
			}
		}
	}
	if r.want("process_utilization") {
		samples, ret := h.GetProcessUtilization(d.lastProcTS)
		switch {
		case ret == nv.ERROR_NOT_FOUND: // no new sample
		case r.ok("process_utilization", ret):
			from := uint64(d.since.UnixMicro())
			type acc struct {
				sm, mem float64
				n       int
			}
			sums := map[uint32]*acc{}
			for _, x := range samples {
				d.lastProcTS = max(d.lastProcTS, x.TimeStamp)
				if x.TimeStamp <= from {
					continue
				}
				a := sums[x.Pid]
				if a == nil {
					a = &acc{}
					sums[x.Pid] = a
				}
				a.sm += float64(x.SmUtil)
				a.mem += float64(x.MemUtil)
				a.n++
			}
			for pid, a := range sums {
				p := get(pid)
				sm, mem := a.sm/float64(a.n), a.mem/float64(a.n)
				p.SMUtilPercent, p.MemUtilPct = &sm, &mem
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	out := make([]gpu.Process, 0, len(order))
	for _, pid := range order {
		p := byPID[pid]
		p.PID, p.NSPID, p.NotVisible = d.src.pids.resolve(int(pid))
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

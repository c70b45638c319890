package nvml

import (
	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// GPM (GPU performance monitoring, Hopper and later) metrics are computed by
// NVML from two samples of the device's counters: each gpufeed sample takes
// a GPM sample and asks for the metrics between it and the previous one.

// gpmMetrics are the metrics read, in request order.
var gpmMetrics = []struct {
	id    nv.GpmMetricId
	field string
	set   func(g *gpu.GPM, v float64)
}{
	{nv.GPM_METRIC_SM_UTIL, "gpm.sm_activity_percent", func(g *gpu.GPM, v float64) { g.SMActivityPct = &v }},
	{nv.GPM_METRIC_SM_OCCUPANCY, "gpm.sm_occupancy_percent", func(g *gpu.GPM, v float64) { g.SMOccupancyPct = &v }},
	{nv.GPM_METRIC_ANY_TENSOR_UTIL, "gpm.tensor_activity_percent", func(g *gpu.GPM, v float64) { g.TensorActivityPct = &v }},
	{nv.GPM_METRIC_DRAM_BW_UTIL, "gpm.dram_activity_percent", func(g *gpu.GPM, v float64) { g.DRAMActivityPct = &v }},
	// NVML reports PCIe GPM metrics in MiB/s.
	{nv.GPM_METRIC_PCIE_TX_PER_SEC, "gpm.pcie_tx_bytes_per_sec", func(g *gpu.GPM, v float64) { v *= 1 << 20; g.PCIeTxBytesPerSec = &v }},
	{nv.GPM_METRIC_PCIE_RX_PER_SEC, "gpm.pcie_rx_bytes_per_sec", func(g *gpu.GPM, v float64) { v *= 1 << 20; g.PCIeRxBytesPerSec = &v }},
}

// gpmState holds a device's two GPM sample buffers.
type gpmState struct {
	lib       nv.Interface
	supported bool
	prev, cur nv.GpmSample
	havePrev  bool
}

// init checks GPM support (at Open) and allocates the sample buffers.
func (g *gpmState) init(r *reading) {
	d := r.d
	if !d.src.hasSymbol("nvmlGpmQueryDeviceSupport") || !d.src.hasSymbol("nvmlGpmMetricsGet") {
		r.unsupportedNow("gpm")
		return
	}
	if !r.want("gpm") {
		return
	}
	sup, ret := d.src.lib.GpmQueryDeviceSupport(d.h)
	if !r.ok("gpm", ret) {
		return
	}
	if sup.IsSupportedDevice == 0 {
		r.unsupportedNow("gpm")
		return
	}
	g.lib = d.src.lib
	var ret1, ret2 nv.Return
	g.prev, ret1 = g.lib.GpmSampleAlloc()
	g.cur, ret2 = g.lib.GpmSampleAlloc()
	if !r.ok("gpm", ret1) || !r.ok("gpm", ret2) {
		g.free()
		return
	}
	g.supported = true
}

// read takes a GPM sample and returns the metrics since the previous one
// (nil on the first call, or when GPM is unsupported).
func (g *gpmState) read(r *reading, h nv.Device) *gpu.GPM {
	if !g.supported {
		if r.d.unsupported["gpm"] {
			r.unsupported = append(r.unsupported, "gpm")
		}
		return nil
	}
	if !r.want("gpm") {
		return nil
	}
	if ret := g.lib.GpmSampleGet(h, g.cur); !r.ok("gpm", ret) {
		return nil
	}
	if !g.havePrev {
		g.prev, g.cur = g.cur, g.prev
		g.havePrev = true
		return nil
	}
	mg := nv.GpmMetricsGetType{
		Version:    nv.GPM_METRICS_GET_VERSION,
		NumMetrics: uint32(len(gpmMetrics)),
		Sample1:    g.prev,
		Sample2:    g.cur,
	}
	for i, m := range gpmMetrics {
		mg.Metrics[i].MetricId = uint32(m.id)
	}
	ret := g.lib.GpmMetricsGet(&mg)
	g.prev, g.cur = g.cur, g.prev
	if !r.ok("gpm", ret) {
		return nil
	}
	out := &gpu.GPM{}
	for i, m := range gpmMetrics {
		res := mg.Metrics[i]
		if !r.want(m.field) {
			continue
		}
		if r.ok(m.field, nv.Return(res.NvmlReturn)) {
			m.set(out, res.Value)
		}
	}
	return out
}

func (g *gpmState) free() {
	if g.prev != nil {
		g.lib.GpmSampleFree(g.prev)
		g.prev = nil
	}
	if g.cur != nil {
		g.lib.GpmSampleFree(g.cur)
		g.cur = nil
	}
	g.supported = false
}

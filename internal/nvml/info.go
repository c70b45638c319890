package nvml

import (
	"strings"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// info reads a device's static facts once, at Open.
func (d *device) info(driver string) gpu.DeviceInfo {
	h := d.h
	r := &reading{d: d}
	in := gpu.DeviceInfo{Index: d.index, Driver: driver}
	if r.want("uuid") {
		if v, ret := h.GetUUID(); r.ok("uuid", ret) {
			in.UUID = v
		}
	}
	if r.want("name") {
		if v, ret := h.GetName(); r.ok("name", ret) {
			in.Name = v
		}
	}
	if r.want("bus_id") {
		if v, ret := h.GetPciInfo(); r.ok("bus_id", ret) {
			in.BusID = busID(v)
		}
	}
	if r.want("mem_total_bytes") {
		if v, ret := h.GetMemoryInfo(); r.ok("mem_total_bytes", ret) {
			in.MemTotalBytes = &v.Total
		}
	}
	clock := func(field string, get func(nv.ClockType) (uint32, nv.Return), ct nv.ClockType) *uint32 {
		if !r.want(field) {
			return nil
		}
		v, ret := get(ct)
		if !r.ok(field, ret) {
			return nil
		}
		return &v
	}
	in.MaxSMClockMHz = clock("max_sm_clock_mhz", h.GetMaxClockInfo, nv.CLOCK_SM)
	in.MaxMemClockMHz = clock("max_mem_clock_mhz", h.GetMaxClockInfo, nv.CLOCK_MEM)
	in.AppSMClockMHz = clock("app_sm_clock_mhz", h.GetApplicationsClock, nv.CLOCK_SM)
	in.AppMemClockMHz = clock("app_mem_clock_mhz", h.GetApplicationsClock, nv.CLOCK_MEM)
	if r.want("power_limit_w") {
		if v, ret := h.GetEnforcedPowerLimit(); r.ok("power_limit_w", ret) {
			in.PowerLimitW = milliwatts(v)
		}
	}
	if r.want("default_power_limit_w") {
		if v, ret := h.GetPowerManagementDefaultLimit(); r.ok("default_power_limit_w", ret) {
			in.DefaultPowerLimitW = milliwatts(v)
		}
	}
	if r.want("link_gen_max") {
		if v, ret := h.GetMaxPcieLinkGeneration(); r.ok("link_gen_max", ret) {
			in.LinkGenMax = &v
		}
	}
	if r.want("link_width_max") {
		if v, ret := h.GetMaxPcieLinkWidth(); r.ok("link_width_max", ret) {
			in.LinkWidthMax = &v
		}
	}
	if r.want("persistence_mode") {
		if v, ret := h.GetPersistenceMode(); r.ok("persistence_mode", ret) {
			on := v == nv.FEATURE_ENABLED
			in.PersistenceMode = &on
		}
	}
	if !d.src.hasSymbol("nvmlDeviceGetNumaNodeId") {
		r.unsupportedNow("numa_node")
	} else if r.want("numa_node") {
		if v, ret := h.GetNumaNodeId(); r.ok("numa_node", ret) {
			in.NUMANode = &v
		}
	}
	if r.want("ecc_enabled") {
		if cur, _, ret := h.GetEccMode(); r.ok("ecc_enabled", ret) {
			on := cur == nv.FEATURE_ENABLED
			in.ECCEnabled = &on
		}
	}
	if !d.src.hasSymbol("nvmlDeviceGetRemappedRows") {
		r.unsupportedNow("remapped_rows")
	} else if r.want("remapped_rows") {
		if _, _, pending, failed, ret := h.GetRemappedRows(); r.ok("remapped_rows", ret) {
			in.RemappedRowsPending, in.RemappedRowsFailed = &pending, &failed
		}
	}
	if r.want("retired_pages") {
		single, ret1 := h.GetRetiredPages(nv.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
		if r.ok("retired_pages", ret1) {
			double, ret2 := h.GetRetiredPages(nv.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
			if r.ok("retired_pages", ret2) {
				n := len(single) + len(double)
				in.RetiredPages = &n
			}
		}
	}
	d.gpm.init(r)
	in.GPMSupported = d.gpm.supported
	in.Unsupported, in.Errors = r.unsupported, r.errors
	if d.lost != "" {
		if in.Errors == nil {
			in.Errors = map[string]string{}
		}
		in.Errors["device"] = d.lost
	}
	return in
}

// busID returns the PCI address in sysfs form ("0000:81:00.0"): NVML writes
// an 8-digit domain ("00000000:81:00.0") and upper-case hex.
func busID(p nv.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	s := strings.ToLower(b.String())
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) == 8 && strings.HasPrefix(dom, "0000") {
		s = dom[4:] + ":" + rest
	}
	return s
}

func milliwatts(mw uint32) *float64 {
	w := float64(mw) / 1000
	return &w
}

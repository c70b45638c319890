package nvml

import (
	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// reading collects, for one device and one read (its static facts or one
// sample), which readings were unsupported, which failed, and whether the
// device was lost. want/ok bracket every NVML call:
//
//	if r.want("power_w") {
//		mw, ret := h.GetPowerUsage()
//		if r.ok("power_w", ret) { ... }
//	}
type reading struct {
	d           *device
	unsupported []string
	errors      map[string]string
}

// want says whether to make the call for field: not once the device is lost,
// and not again once the device said it does not support it (the field is
// still named unsupported in this reading).
func (r *reading) want(field string) bool {
	if r.d.lost != "" {
		return false
	}
	if r.d.unsupported[field] {
		r.unsupported = append(r.unsupported, field)
		return false
	}
	return true
}

// ok files the outcome of the call for field and says whether it succeeded.
func (r *reading) ok(field string, ret nv.Return) bool {
	switch ret {
	case nv.SUCCESS:
		return true
	case nv.ERROR_NOT_SUPPORTED, nv.ERROR_FUNCTION_NOT_FOUND:
		r.d.unsupported[field] = true
		r.unsupported = append(r.unsupported, field)
	case nv.ERROR_GPU_IS_LOST:
		r.d.lost = "GPU is lost (fell off the bus): " + field + " returned ERROR_GPU_IS_LOST"
	default:
		if r.errors == nil {
			r.errors = map[string]string{}
		}
		r.errors[field] = errText(ret)
	}
	return false
}

// unsupportedNow names field unsupported without a call (the driver lacks
// the function).
func (r *reading) unsupportedNow(field string) {
	r.d.unsupported[field] = true
	r.unsupported = append(r.unsupported, field)
}

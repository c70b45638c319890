package gpu

import "strings"

// NVML's clock event (formerly throttle) reason bits, as nvml.h names them
// (nvmlClocksEventReason*, nvmlClocksThrottleReason* before driver 535).
const (
	ClockEventGPUIdle       uint64 = 0x1
	ClockEventAppClocks     uint64 = 0x2
	ClockEventSWPowerCap    uint64 = 0x4
	ClockEventHWSlowdown    uint64 = 0x8
	ClockEventSyncBoost     uint64 = 0x10
	ClockEventSWThermal     uint64 = 0x20
	ClockEventHWThermal     uint64 = 0x40
	ClockEventHWPowerBrake  uint64 = 0x80
	ClockEventDisplayClocks uint64 = 0x100
	// ClockEventsHardware are the reasons the hardware imposes.
	ClockEventsHardware = ClockEventHWSlowdown | ClockEventHWThermal | ClockEventHWPowerBrake
)

// clockEventNames are the names nvidia-smi -q prints under "Clocks Event
// Reasons", so a report reads against it.
var clockEventNames = []struct {
	bit  uint64
	name string
}{
	{ClockEventGPUIdle, "GPU idle"}, {ClockEventAppClocks, "applications clocks setting"}, {ClockEventSWPowerCap, "SW power cap"},
	{ClockEventHWSlowdown, "HW slowdown"}, {ClockEventSyncBoost, "sync boost"}, {ClockEventSWThermal, "SW thermal slowdown"},
	{ClockEventHWThermal, "HW thermal slowdown"}, {ClockEventHWPowerBrake, "HW power brake slowdown"}, {ClockEventDisplayClocks, "display clock setting"},
}

// ClockEventNames names the reasons set in mask, in NVML's bit order; a bit
// NVML does not document is named by its value.
func ClockEventNames(mask uint64) []string {
	var out []string
	known := uint64(0)
	for _, r := range clockEventNames {
		known |= r.bit
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	for bit := uint64(1); bit != 0; bit <<= 1 {
		if mask&bit != 0 && known&bit == 0 {
			out = append(out, "reason "+hex(bit))
		}
	}
	return out
}

// DescribeClockEvents is ClockEventNames joined by commas, "none" for none.
func DescribeClockEvents(mask uint64) string {
	names := ClockEventNames(mask)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func hex(v uint64) string {
	const digits = "0123456789abcdef"
	var b []byte
	for v > 0 {
		b = append([]byte{digits[v&0xf]}, b...)
		v >>= 4
	}
	return "0x" + string(b)
}

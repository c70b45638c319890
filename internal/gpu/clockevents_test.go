package gpu

import "testing"

func TestDescribeClockEvents(t *testing.T) {
	for mask, want := range map[uint64]string{
		0:   "none",
		0x1: "GPU idle",
		ClockEventSWPowerCap | ClockEventHWSlowdown: "SW power cap, HW slowdown",
		0x10:        "sync boost",
		0x200 | 0x4: "SW power cap, reason 0x200",
	} {
		if got := DescribeClockEvents(mask); got != want {
			t.Errorf("%#x: %q, want %q", mask, got, want)
		}
	}
}

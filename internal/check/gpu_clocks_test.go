package check

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// TestClocksNotThrottledAtLowLoad: an H100 whose max boost is 1980 MHz read
// at 1721 MHz in one instant at 100 % was "throttled" although it was 5.7 %
// busy over the job's window, and although nothing held its clock down
// (H100 and A100 rarely hold their maximum boost). The clock is judged over
// the busy samples only, against the application clock, and is throttled
// only with a slowdown reason from the driver.
func TestClocksNotThrottledAtLowLoad(t *testing.T) {
	h100 := gpu.DeviceInfo{Index: 0, BusID: "0000:03:00.0", MaxSMClockMHz: ptr(uint32(1980))}
	at := func(util float64, clk uint32, reasons uint64, points int) gpu.Sample {
		s := gpu.Sample{Index: 0, UtilPercent: ptr(util), SMClockMHz: ptr(clk), ClockEventReasons: ptr(reasons)}
		for range points {
			s.Points = append(s.Points, gpu.UtilPoint{Percent: util})
		}
		return s
	}
	// The job's window: 19 idle samples and one busy instant (5 % mean).
	var window []gpu.Sample
	for range 19 {
		window = append(window, at(0, 345, gpu.ClockEventGPUIdle, 1))
	}
	window = append(window, at(100, 1721, 0, 1))
	proc := tree(t, map[string]string{"proc/uptime": "100000.0 1.0", "proc/interrupts": "CPU0\n"}, nil)
	run := func(o Options) Outcome {
		o.ProcRoot, o.SysRoot = filepath.Join(proc, "proc"), filepath.Join(proc, "sys")
		rs := Run(context.Background(), o)
		r, ok := find(rs, "gpu-clocks", "")
		if !ok {
			t.Fatal("no gpu-clocks outcome")
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		opts     Options
		want     Status
		contains string
	}{
		{"busy instant in an idle window", Options{GPU: &fakeSource{devs: []gpu.DeviceInfo{h100}, samples: [][]gpu.Sample{{at(100, 1721, 0, 1)}}},
			GPUWindow: map[int][]gpu.Sample{0: window}}, OK, "busy 5%"},
		{"one instant", Options{GPU: &fakeSource{devs: []gpu.DeviceInfo{h100}, samples: [][]gpu.Sample{{at(100, 1400, gpu.ClockEventSWPowerCap, 0)}}}},
			OK, "not one instant"},
		{"below max boost, no slowdown reason", Options{Window: 10 * time.Millisecond,
			GPU: &fakeSource{devs: []gpu.DeviceInfo{h100}, samples: [][]gpu.Sample{{at(100, 1721, 0, 5)}, {at(98, 1700, 0, 5)}}}},
			OK, "not throttling"},
		{"held down by the power cap", Options{Window: 10 * time.Millisecond,
			GPU: &fakeSource{devs: []gpu.DeviceInfo{h100}, samples: [][]gpu.Sample{{at(100, 1400, gpu.ClockEventSWPowerCap, 5)}, {at(99, 1380, gpu.ClockEventSWPowerCap, 5)}}}},
			Warn, "SW power cap"},
	} {
		r := run(tc.opts)
		if r.Status != tc.want || !strings.Contains(r.Claim, tc.contains) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, r.Status, r.Claim, tc.want, tc.contains)
		}
	}
}

package diagnose

import (
	"os"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// oneReading is a GPU source whose every reading is the same instant.
type oneReading struct{ s gpu.Sample }

func (o oneReading) Name() string { return "one reading" }
func (o oneReading) Devices() []gpu.DeviceInfo {
	maxClk := uint32(1980)
	return []gpu.DeviceInfo{{Index: 0, Name: "test GPU", MaxSMClockMHz: &maxClk}}
}
func (o oneReading) Sample() ([]gpu.Sample, error) { return []gpu.Sample{o.s}, nil }
func (o oneReading) Close() error                  { return nil }

// TestChecksJudgeClocksOverTheWindow: the checks diagnose runs after its
// window judge the GPU's clock over the window's samples. A GPU 5 % busy
// over the window, read at 100 % and 1721 of 1980 MHz (power-capped) in
// the one reading after it, is not "throttled".
func TestChecksJudgeClocksOverTheWindow(t *testing.T) {
	busy, idle, clk, low := 100.0, 0.0, uint32(1721), uint32(345)
	capped, idleReason := gpu.ClockEventSWPowerCap, gpu.ClockEventGPUIdle
	instant := gpu.Sample{Index: 0, UtilPercent: &busy, SMClockMHz: &clk, ClockEventReasons: &capped,
		Points: []gpu.UtilPoint{{Percent: 100}, {Percent: 100}, {Percent: 100}}}
	tl := &timeline.Timeline{}
	tl.Meta.Target.PID = os.Getpid()
	for i := range 20 {
		s := gpu.Sample{Index: 0, UtilPercent: &idle, SMClockMHz: &low, ClockEventReasons: &idleReason}
		if i == 19 {
			s = instant
		}
		tl.Ticks = append(tl.Ticks, timeline.Tick{T: int64(i) * 1e8, GPUs: []gpu.Sample{s}})
	}
	fs, err := procfs.NewFS("/proc", "")
	if err != nil {
		t.Fatal(err)
	}
	readChannelsAndChecks(t.Context(), tl, fs, oneReading{instant})
	if tl.Meta.Checks == nil {
		t.Fatal("no checks recorded")
	}
	for _, f := range tl.Meta.Checks.Findings {
		if f.ID == "gpu-clocks" || strings.Contains(f.Claim, "throttled") {
			t.Errorf("%s at 5 %% busy over the window: %s", f.ID, f.Claim)
		}
	}
}

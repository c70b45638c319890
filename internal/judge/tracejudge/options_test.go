package tracejudge

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
)

// The defaults the derivation runs with are HTA's and Nsight's own (the
// values tracestats' comparison with HTA uses).
func TestDefaultOptionsAreHTAs(t *testing.T) {
	want := tracestats.Options{ConsecutiveKernelDelay: 30e3, RuntimeCutoff: 50e3, LaunchDelayCutoff: 100e3,
		GapThreshold: 500e6, LowUsePct: 50, LowUseChunks: 30, SmallKernelBlocksPerSM: 1}
	if got := (Options{}).derivation(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if got := (Options{Derive: tracestats.Options{IncludeLastStep: true, GapThreshold: 1, SmallKernelBlocksPerSM: 0.5}}).derivation(); !got.IncludeLastStep || got.GapThreshold != 1 ||
		got.SmallKernelBlocksPerSM != 0.5 || got.LowUseChunks != 30 {
		t.Errorf("options given are kept: %+v", got)
	}
}

package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// dutyCycleWorkload keeps the simulated GPU busy a known share of the time:
// a 6 ms kernel, a synchronise, 14 ms of sleep, for 3 s. It writes the busy
// share it achieved (kernel time over its own elapsed time, which the
// sleeps' jitter lowers below the nominal 30 %) to the file named by argv[2].
const dutyCycleWorkload = `
import json, sys, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
busy, t0 = 0.0, time.monotonic()
while time.monotonic() - t0 < 3.0:
    dev.launch(6000)
    dev.synchronize()
    busy += 0.006
    time.sleep(0.014)
elapsed = time.monotonic() - t0
with open(sys.argv[2], "w") as f:
    json.dump({"duty_pct": 100 * busy / elapsed, "busy_s": busy}, f)
`

// TestDiagnoseMeasuresTheSimulatedDutyCycle drives the simulated device from
// a real Python process and checks that gpufeed diagnose, finding the device
// through the target's GPUFEED_SIMDEV, measures the utilisation the workload
// produced, within a few percent.
func TestDiagnoseMeasuresTheSimulatedDutyCycle(t *testing.T) {
	livetest.Need(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the Python client cannot be exercised")
	}
	pydir, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "gpu.sock")
	// The driver library copied for this test: diagnose's driver probes
	// (--profile auto, as root) trap every process mapping the file they
	// sit on, and the cached one is other packages' tests' too.
	lib, err := simcuda.Path()
	if err != nil {
		t.Fatal(err)
	}
	so, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, simcuda.LibName)
	if err := os.WriteFile(own, so, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := sim.Listen(sock, sim.Options{Library: func() (string, error) { return own, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); srv.Close(); <-served })

	duty := filepath.Join(dir, "duty.json")
	t.Setenv("GPUFEED_SIMDEV", sock)
	out, stderr, code := run(t, "diagnose", "--duration", "10s", "-o", "json", "--", python, "-c", dutyCycleWorkload, pydir, duty)
	if code != 0 {
		t.Fatalf("diagnose: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Window struct {
			DurationNS int64 `json:"duration_ns"`
		} `json:"window"`
		GPUs []struct {
			UtilMean *float64 `json:"util_mean_percent"`
			UtilN    int      `json:"util_samples"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	b, err := os.ReadFile(duty)
	if err != nil {
		t.Fatalf("the workload wrote no duty cycle: %v\n%s", err, stderr)
	}
	var got struct {
		DutyPct float64 `json:"duty_pct"`
		BusyS   float64 `json:"busy_s"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 || rep.GPUs[0].UtilMean == nil || rep.GPUs[0].UtilN < 20 {
		t.Fatalf("diagnose saw no GPU utilisation: %s", out)
	}
	measured := *rep.GPUs[0].UtilMean
	window := float64(rep.Window.DurationNS) / 1e9
	busy := measured / 100 * window
	t.Logf("workload busy %.1f %% of its 3 s loop (%.2f s); diagnose measured %.1f %% over %d intervals of a %.2f s window (%.2f s)",
		got.DutyPct, got.BusyS, measured, rep.GPUs[0].UtilN, window, busy)
	// The window also holds the interpreter's start (no GPU work), longer on
	// a crowded host: the device's busy time is compared, not the shares
	// (4 % of the 3 s loop).
	if window <= 0 || math.Abs(busy-got.BusyS) > 0.12 {
		t.Errorf("diagnose measured the GPU busy %.2f s (%.1f %% of %.2f s), the workload kept it busy %.2f s",
			busy, measured, window, got.BusyS)
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simclient"
)

func TestSimdevServesUntilCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.sock")
	root := newRootCmd()
	var stderr strings.Builder
	root.SetErr(&stderr)
	root.SetArgs([]string{"simdev", "--socket", path, "--devices", "2", "--link", "gen5x8", "--launch-cost", "20us"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	var src *sim.Source
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if src, err = sim.Dial(path); err == nil {
			break
		}
	}
	if err != nil {
		cancel()
		t.Fatalf("simdev never answered: %v", err)
	}
	defer src.Close()
	devs := src.Devices()
	if len(devs) != 2 || *devs[0].LinkGenMax != 5 || *devs[0].LinkWidthMax != 8 {
		t.Fatalf("devices %+v, want 2 on Gen5 x8", devs)
	}
	c, err := simclient.DialDevice(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Info().LaunchCostNS; got != 20000 && os.Getenv("GPUFEED_SIMDEV_LAUNCH_US") == "" {
		t.Errorf("launch cost %d ns, want the 20 us of --launch-cost", got)
	}
	c.Launch(5*time.Millisecond, 0)
	if err := c.SynchronizeDevice(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ss, err := src.Sample()
	if err != nil || len(ss) != 2 || *ss[1].UtilPercent <= 0 || *ss[0].UtilPercent != 0 {
		t.Fatalf("samples %+v (err %v): want work on device 1 only", ss, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("simdev exited with %v", err)
	}
	if !strings.Contains(stderr.String(), "GPUFEED_SIMDEV="+path) {
		t.Errorf("stderr %q does not say how to point workloads at the device", stderr.String())
	}
}

func TestSimdevRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"simdev"},
		{"simdev", "--socket", filepath.Join(t.TempDir(), "s"), "--link", "gen9x16"},
		{"simdev", "--socket", filepath.Join(t.TempDir(), "s"), "--pageable-factor", "3"},
	} {
		root := newRootCmd()
		root.SetArgs(args)
		root.SetErr(&strings.Builder{})
		if err := root.Execute(); err == nil {
			t.Errorf("gpufeed %s succeeded, want an error", strings.Join(args, " "))
		}
	}
}

// Values the model cannot run with are refused with the flag they came
// from, never replaced by a default: a NaN pageable factor made every
// pageable copy last forever.
func TestSimdevRejectsImpossibleValues(t *testing.T) {
	for _, tc := range []struct {
		flag, value, say string
	}{
		{"--pageable-factor", "NaN", "--pageable-factor"},
		{"--pageable-factor", "+Inf", "--pageable-factor"},
		{"--pageable-factor", "-1", "--pageable-factor"},
		{"--pageable-factor", "0", "--pageable-factor"},
		// A factor so small that a 4 KB pageable copy never returned, and
		// numbers in hex (0x1p-1 is 0.5; pflag took 0x2 devices).
		{"--pageable-factor", "1e-300", "want a ratio from 0.01 to 1"},
		{"--pageable-factor", "0.005", "want a ratio from 0.01 to 1"},
		{"--pageable-factor", "0x1p-1", "--pageable-factor wants a decimal number (0.5, 1e-2; not a hex float such as 0x1p-1)"},
		{"--pageable-factor", "-0X1P-1", "not a hex float"},
		{"--devices", "0x2", "--devices wants a decimal integer"},
		{"--max-pending", "0x10", "--max-pending wants a decimal integer"},
		{"--point-window", "0x1p-4", "--point-window wants a duration"},
		{"--devices", "-5", "--devices"},
		{"--devices", "0", "--devices"},
		{"--devices", "65", "--devices"},
		{"--max-pending", "0", "--max-pending"},
		{"--max-pending", "-3", "--max-pending"},
		{"--max-pending", "100000000", "--max-pending"},
		{"--point-window", "0s", "--point-window"},
		{"--point-window", "-20ms", "--point-window"},
		{"--point-window", "1ns", "--point-window"},
		{"--launch-cost", "0s", "--launch-cost"},
		{"--launch-cost", "-1us", "--launch-cost"},
		{"--launch-cost", "2s", "--launch-cost"},
	} {
		root := newRootCmd()
		root.SetArgs([]string{"simdev", "--socket", filepath.Join(t.TempDir(), "s"), tc.flag, tc.value})
		root.SetErr(&strings.Builder{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := root.ExecuteContext(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("simdev %s %s: %v; want an error naming %s", tc.flag, tc.value, err, tc.say)
		}
	}
}

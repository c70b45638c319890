package gpusource

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/nvml"
	"github.com/gpufeed/gpufeed/internal/sim"
)

func startSim(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

func noDriver(nvml.Options) (gpu.Source, error) { return nil, nvml.ErrNoDriver }

func noEnv(string) string { return "" }

func TestAutoPrefersTheTargetsSimulatedDevice(t *testing.T) {
	path := startSim(t)
	src, note, err := OpenWith("auto", map[string]string{"GPUFEED_SIMDEV": path}, Options{OpenNVML: noDriver, Getenv: noEnv})
	if err != nil || src == nil {
		t.Fatalf("auto with GPUFEED_SIMDEV: %v %v", src, err)
	}
	defer src.Close()
	if note != "simulated device at "+path {
		t.Errorf("note %q", note)
	}
	if _, err := src.Sample(); err != nil {
		t.Fatal(err)
	}
}

func TestAutoFallsBackToOwnEnvironment(t *testing.T) {
	path := startSim(t)
	env := func(k string) string {
		if k == "GPUFEED_SIMDEV" {
			return path
		}
		return ""
	}
	src, _, err := OpenWith("", nil, Options{OpenNVML: noDriver, Getenv: env})
	if err != nil || src == nil {
		t.Fatalf("auto with gpufeed's own GPUFEED_SIMDEV: %v %v", src, err)
	}
	src.Close()
}

func TestAutoWithoutDriverIsANoteNotAnError(t *testing.T) {
	src, note, err := OpenWith("auto", nil, Options{OpenNVML: noDriver, Getenv: noEnv})
	if err != nil || src != nil {
		t.Fatalf("auto without a driver: %v %v, want no source and no error", src, err)
	}
	if note != "no NVIDIA driver: libnvidia-ml.so.1 not found" {
		t.Errorf("note %q", note)
	}
	// A simulated device named but not served: said, not fatal.
	src, note, err = OpenWith("auto", map[string]string{"GPUFEED_SIMDEV": "/nonexistent/gpu.sock"}, Options{OpenNVML: noDriver, Getenv: noEnv})
	if err != nil || src != nil || !strings.Contains(note, "GPUFEED_SIMDEV=/nonexistent/gpu.sock in the target's environment") {
		t.Errorf("unreachable simulated device: %v %q %v", src, note, err)
	}
}

func TestExplicitSpecs(t *testing.T) {
	path := startSim(t)
	src, note, err := OpenWith("none", map[string]string{"GPUFEED_SIMDEV": path}, Options{OpenNVML: noDriver})
	if src != nil || err != nil || !strings.Contains(note, "none") {
		t.Errorf("none: %v %q %v", src, note, err)
	}
	src, _, err = OpenWith("sim:"+path, nil, Options{OpenNVML: noDriver})
	if err != nil {
		t.Fatalf("sim:PATH: %v", err)
	}
	src.Close()
	if _, _, err := OpenWith("sim:/nonexistent/gpu.sock", nil, Options{}); err == nil {
		t.Error("sim: with nobody listening: no error")
	}
	if _, _, err := OpenWith("sim:", nil, Options{}); err == nil {
		t.Error("sim: without a path: no error")
	}
	if _, _, err := OpenWith("nvml", nil, Options{OpenNVML: noDriver}); !errors.Is(err, nvml.ErrNoDriver) {
		t.Errorf("nvml without a driver: %v, want ErrNoDriver (asked for explicitly)", err)
	}
	if _, _, err := OpenWith("cuda", nil, Options{}); err == nil || !strings.Contains(err.Error(), "want auto, none, nvml or sim:PATH") {
		t.Errorf("unknown spec: %v", err)
	}
}

// TestOpenOnThisHost runs the real path: on a host without a driver, auto
// gives the one-line note.
func TestOpenOnThisHost(t *testing.T) {
	t.Setenv("GPUFEED_SIMDEV", "")
	src, note, err := Open("auto", nil)
	if err != nil {
		t.Fatal(err)
	}
	if src != nil {
		t.Logf("a GPU source is present here: %s", note)
		src.Close()
		return
	}
	if note == "" {
		t.Error("no source and no note")
	}
}

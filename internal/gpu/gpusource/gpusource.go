// Package gpusource chooses the GPU source for a run from diagnose's
// --device flag and the target's environment: the simulated device, NVML, or
// none. Not finding a GPU is not an error: every host measurement still works.
package gpusource

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/nvml"
	"github.com/gpufeed/gpufeed/internal/sim"
)

// EnvSimdev names the variable that points a workload at a simulated device.
const EnvSimdev = "GPUFEED_SIMDEV"

// Options configure OpenWith.
type Options struct {
	// ProcRoot is where /proc is read (NVML's PIDs are mapped through it).
	ProcRoot string
	// Getenv reads gpufeed's own environment (default os.Getenv).
	Getenv func(string) string
	// OpenNVML opens NVML (default nvml.Open); tests replace it.
	OpenNVML func(nvml.Options) (gpu.Source, error)
}

// Open chooses and opens the GPU source for spec:
//
//	auto      the simulated device named by GPUFEED_SIMDEV in the target's
//	          environment (else in gpufeed's own), otherwise NVML
//	none      no GPU source
//	nvml      NVML; an error if it cannot be loaded
//	sim:PATH  the simulated device at PATH; an error if it does not answer
//
// When no source is used, src is nil and note says why, in one line (with
// no driver: "no NVIDIA driver: libnvidia-ml.so.1 not found"); the run goes
// on. When a source is used, note is its name. targetEnv holds the target's
// allowlisted environment variables (nil when not visible).
func Open(spec string, targetEnv map[string]string) (src gpu.Source, note string, err error) {
	return OpenWith(spec, targetEnv, Options{})
}

// CheckSpec says whether spec is a --device value Open can take, without
// opening anything: commands refuse a bad one as a usage error before
// their window starts.
func CheckSpec(spec string) error {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "sim:":
		return errors.New("--device sim:PATH: the socket path is missing")
	case spec == "none", spec == "nvml", spec == "auto", spec == "", strings.HasPrefix(spec, "sim:"):
		return nil
	}
	return fmt.Errorf("--device %q: want auto, none, nvml or sim:PATH", spec)
}

// OpenWith is Open with options.
func OpenWith(spec string, targetEnv map[string]string, opt Options) (gpu.Source, string, error) {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.OpenNVML == nil {
		opt.OpenNVML = func(o nvml.Options) (gpu.Source, error) {
			s, err := nvml.Open(o)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return s, nil
		}
	}
	spec = strings.TrimSpace(spec)
	if err := CheckSpec(spec); err != nil {
		return nil, "", err
	}
	switch {
	case spec == "none":
		return nil, "GPU not sampled (--device none)", nil
	case strings.HasPrefix(spec, "sim:"):
		s, err := sim.Dial(strings.TrimPrefix(spec, "sim:"))
		if err != nil {
			return nil, "", err
		}
		return s, s.Name(), nil
	case spec == "nvml":
		s, err := opt.OpenNVML(nvml.Options{ProcRoot: opt.ProcRoot})
		if err != nil {
			return nil, "", err
		}
		return s, s.Name(), nil
	case spec == "auto" || spec == "":
		return openAuto(targetEnv, opt)
	}
	return nil, "", CheckSpec(spec) // not reached: CheckSpec refused it
}

func openAuto(targetEnv map[string]string, opt Options) (gpu.Source, string, error) {
	path, from := targetEnv[EnvSimdev], "the target's environment"
	if path == "" {
		path, from = opt.Getenv(EnvSimdev), "gpufeed's environment"
	}
	if path != "" {
		s, err := sim.Dial(path)
		if err != nil {
			return nil, fmt.Sprintf("%s=%s in %s, but: %v", EnvSimdev, path, from, err), nil
		}
		return s, s.Name(), nil
	}
	s, err := opt.OpenNVML(nvml.Options{ProcRoot: opt.ProcRoot})
	if err != nil {
		// No driver, a driver/library mismatch, no permission: a host
		// without a usable GPU, said in one line.
		return nil, err.Error(), nil
	}
	if len(s.Devices()) == 0 {
		name := s.Name()
		s.Close()
		return nil, name + ": no GPU devices", nil
	}
	return s, s.Name(), nil
}

// Package nvml is the gpu.Source of real NVIDIA GPUs, through NVML
// (github.com/NVIDIA/go-nvml). The library is loaded when Open runs, not when
// the binary starts, so gpufeed builds and runs on hosts without a driver:
// Open then returns ErrNoDriver and every host-side measurement still works.
//
// A reading the device does not support is named in Unsupported and left nil
// (never zero); a device that falls off the bus (GPU_IS_LOST) is reported
// Lost and the run goes on. docs/NVML.md lists every reading and its call.
package nvml

import (
	"errors"
	"fmt"
	"sync"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// ErrNoDriver is returned by Open when libnvidia-ml.so.1 cannot be loaded.
var ErrNoDriver = errors.New("no NVIDIA driver: libnvidia-ml.so.1 not found")

// Options configure Open.
type Options struct {
	// Lib is the NVML implementation; nil loads the system's libnvidia-ml.so.1.
	// Tests pass go-nvml's mock.
	Lib nv.Interface
	// ProcRoot is where /proc is read to map NVML's PIDs (default "/proc").
	ProcRoot string
	// Now is the clock (default time.Now); tests fix it.
	Now func() time.Time
}

// Source reads every NVIDIA GPU through NVML.
type Source struct {
	lib   nv.Interface
	name  string
	devs  []*device
	infos []gpu.DeviceInfo
	pids  *pidMapper
	now   func() time.Time

	mu     sync.Mutex
	closed bool
}

var _ gpu.Source = (*Source)(nil)

// Open loads NVML and reads every device's static facts.
func Open(opt Options) (*Source, error) {
	lib := opt.Lib
	if lib == nil {
		lib = nv.New()
	}
	if opt.ProcRoot == "" {
		opt.ProcRoot = "/proc"
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	switch ret := lib.Init(); ret {
	case nv.SUCCESS:
	case nv.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoDriver
	default:
		return nil, fmt.Errorf("NVML init: %s", errText(ret))
	}
	s := &Source{lib: lib, pids: newPIDMapper(opt.ProcRoot), now: opt.Now}
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nv.SUCCESS {
		driver = "driver version unknown (" + errText(ret) + ")"
	}
	s.name = "NVML " + driver
	n, ret := lib.DeviceGetCount()
	if ret != nv.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML device count: %s", errText(ret))
	}
	opened := opt.Now()
	for i := range n {
		d := &device{index: i, src: s, unsupported: map[string]bool{}, since: opened}
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nv.SUCCESS {
			// The device exists but cannot be opened (lost, or no permission):
			// keep it, so its index and the reason show in every sample.
			d.lost = fmt.Sprintf("cannot open device %d: %s", i, errText(ret))
			s.devs = append(s.devs, d)
			s.infos = append(s.infos, gpu.DeviceInfo{Index: i, Driver: driver, Errors: map[string]string{"handle": errText(ret)}})
			continue
		}
		d.h = h
		s.devs = append(s.devs, d)
		s.infos = append(s.infos, d.info(driver))
	}
	return s, nil
}

// Name says what this source is: "NVML 550.54.15".
func (s *Source) Name() string { return s.name }

// Devices returns the devices' static facts, read at Open.
func (s *Source) Devices() []gpu.DeviceInfo { return s.infos }

// Sample reads every device once. A lost device yields a Sample with Lost set.
func (s *Source) Sample() ([]gpu.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("NVML source is closed")
	}
	out := make([]gpu.Sample, 0, len(s.devs))
	for _, d := range s.devs {
		out = append(out, d.sample())
	}
	return out, nil
}

// Close frees GPM buffers and shuts NVML down.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, d := range s.devs {
		d.gpm.free()
	}
	if ret := s.lib.Shutdown(); ret != nv.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", errText(ret))
	}
	return nil
}

// hasSymbol says whether the loaded driver exports an NVML function. Calling
// one the driver lacks would crash, so functions newer than the oldest
// supported drivers are checked first.
func (s *Source) hasSymbol(name string) bool {
	return s.lib.Extensions().LookupSymbol(name) == nil
}

// errText is NVML's name for a return code, stable whether or not the
// library is loaded ("ERROR_NOT_SUPPORTED").
func errText(r nv.Return) string {
	if name, ok := returnNames[r]; ok {
		return name
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}

var returnNames = map[nv.Return]string{
	nv.ERROR_UNINITIALIZED:           "ERROR_UNINITIALIZED",
	nv.ERROR_INVALID_ARGUMENT:        "ERROR_INVALID_ARGUMENT",
	nv.ERROR_NOT_SUPPORTED:           "ERROR_NOT_SUPPORTED",
	nv.ERROR_NO_PERMISSION:           "ERROR_NO_PERMISSION",
	nv.ERROR_ALREADY_INITIALIZED:     "ERROR_ALREADY_INITIALIZED",
	nv.ERROR_NOT_FOUND:               "ERROR_NOT_FOUND",
	nv.ERROR_INSUFFICIENT_SIZE:       "ERROR_INSUFFICIENT_SIZE",
	nv.ERROR_INSUFFICIENT_POWER:      "ERROR_INSUFFICIENT_POWER",
	nv.ERROR_DRIVER_NOT_LOADED:       "ERROR_DRIVER_NOT_LOADED",
	nv.ERROR_TIMEOUT:                 "ERROR_TIMEOUT",
	nv.ERROR_IRQ_ISSUE:               "ERROR_IRQ_ISSUE",
	nv.ERROR_LIBRARY_NOT_FOUND:       "ERROR_LIBRARY_NOT_FOUND",
	nv.ERROR_FUNCTION_NOT_FOUND:      "ERROR_FUNCTION_NOT_FOUND",
	nv.ERROR_CORRUPTED_INFOROM:       "ERROR_CORRUPTED_INFOROM",
	nv.ERROR_GPU_IS_LOST:             "ERROR_GPU_IS_LOST",
	nv.ERROR_RESET_REQUIRED:          "ERROR_RESET_REQUIRED",
	nv.ERROR_OPERATING_SYSTEM:        "ERROR_OPERATING_SYSTEM",
	nv.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH",
	nv.ERROR_IN_USE:                  "ERROR_IN_USE",
	nv.ERROR_MEMORY:                  "ERROR_MEMORY",
	nv.ERROR_NO_DATA:                 "ERROR_NO_DATA",
	nv.ERROR_UNKNOWN:                 "ERROR_UNKNOWN",
}

package drill

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/nvml"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/cudadrv"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// EmptyKernelPTX is the drills' tiny kernel (EmptyKernel): empty on a real
// GPU, its parameter's nanoseconds long on the simulator.
//
//go:embed empty_kernel.ptx
var EmptyKernelPTX string

// EmptyKernel is the entry in EmptyKernelPTX.
const EmptyKernel = "gpufeed_drill_empty"

// RealDriver is the CUDA driver library of an NVIDIA GPU host.
const RealDriver = "libcuda.so.1"

// Backend is the CUDA driver the drills call, opened on one device with
// its primary context current for the calls (as the CUDA runtime and
// PyTorch use it): libcuda.so.1 on a GPU host, the simulated driver over a
// simulated device anywhere else. The drills' code is the same on both.
type Backend struct {
	Lib       *cudadrv.Lib
	Dev       cudadrv.Device
	Ctx       cudadrv.Context
	Simulated bool
	// Desc says what runs the drills: the library and the device.
	Desc string
	// Socket is the simulated device's socket (Simulated only).
	Socket string
	// BusID is the real device's PCI address (not Simulated).
	BusID string

	stop func()
}

// Open opens the driver spec names on device ordinal:
//
//	auto      libcuda.so.1 when it loads and has the device, else a
//	          simulated device started in this process
//	cuda      libcuda.so.1, or an error
//	sim       a simulated device started in this process (Options default)
//	sim:PATH  the simulated device a gpufeed simdev serves at PATH
//	PATH      the CUDA driver library at PATH (a path with a slash)
//
// why is set when auto fell back to the simulator: why the real driver
// could not be used.
func Open(ctx context.Context, spec string, ordinal int, opt sim.Options) (b *Backend, why string, err error) {
	if err := ValidDriver(spec); err != nil {
		return nil, "", err
	}
	switch {
	case spec == "" || spec == "auto":
		b, err := openReal(RealDriver, ordinal)
		if err == nil {
			return b, "", nil
		}
		b, serr := openSim(ctx, "", opt)
		if serr != nil {
			return nil, "", fmt.Errorf("no CUDA driver (%v), and the simulated device did not start: %w", err, serr)
		}
		return b, err.Error(), nil
	case spec == "cuda":
		b, err := openReal(RealDriver, ordinal)
		return b, "", err
	case spec == "sim":
		b, err := openSim(ctx, "", opt)
		return b, "", err
	case strings.HasPrefix(spec, "sim:"):
		b, err := openSim(ctx, strings.TrimPrefix(spec, "sim:"), opt)
		return b, "", err
	case strings.Contains(spec, "/"):
		b, err := openReal(spec, ordinal)
		return b, "", err
	}
	return nil, "", ValidDriver(spec)
}

// ValidDriver checks a --driver value before anything is opened.
func ValidDriver(spec string) error {
	switch {
	case spec == "" || spec == "auto" || spec == "cuda" || spec == "sim", strings.HasPrefix(spec, "sim:") && len(spec) > 4, strings.Contains(spec, "/"):
		return nil
	}
	return fmt.Errorf("--driver %q: want auto, cuda, sim, sim:SOCKET or the path of a CUDA driver library", spec)
}

func openReal(path string, ordinal int) (*Backend, error) {
	lib, err := cudadrv.Open(path)
	if err != nil {
		return nil, err
	}
	if lib.Simulated() {
		return nil, fmt.Errorf("%s is gpufeed's simulated driver: use --driver sim or sim:SOCKET", path)
	}
	if err := lib.Init(); err != nil {
		return nil, err
	}
	n, err := lib.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%s: no CUDA device %d (it sees %d)", path, ordinal, n)
	}
	dev, err := lib.DeviceGet(ordinal)
	if err != nil {
		return nil, err
	}
	c, err := lib.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, err
	}
	b := &Backend{Lib: lib, Dev: dev, Ctx: c, stop: func() { lib.PrimaryCtxRelease(dev) }}
	name, _ := lib.DeviceName(dev)
	if id, err := lib.PCIBusID(dev); err == nil {
		b.BusID = sysfsBusID(id)
	}
	v, _ := lib.DriverVersion()
	shown := path
	if p := mappedPath(filepath.Base(path)); p != "" && p != path {
		shown += " (" + p + ")"
	}
	b.Desc = fmt.Sprintf("%s, CUDA %d.%d driver API, device %d: %s", shown, v/1000, v%1000/10, ordinal, name)
	if b.BusID != "" {
		b.Desc += " at " + strings.ToLower(b.BusID)
	}
	return b, nil
}

func openSim(ctx context.Context, socket string, opt sim.Options) (*Backend, error) {
	lp, err := simcuda.Path()
	if err != nil {
		return nil, err
	}
	lib, err := cudadrv.Open(lp)
	if err != nil {
		return nil, err
	}
	stop := func() {}
	if socket == "" {
		dir, err := os.MkdirTemp("", "gpufeed-drill-")
		if err != nil {
			return nil, err
		}
		socket = filepath.Join(dir, "gpu.sock")
		srv, err := sim.Listen(socket, opt)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { srv.Serve(sctx); close(done) }()
		stop = func() { cancel(); <-done; os.RemoveAll(dir) }
	}
	if err := lib.Init(); err != nil && !cudadrv.IsCode(err, cudadrv.ErrorNoDevice) {
		stop()
		return nil, err
	}
	dev, err := lib.SimDeviceGet(socket, 0)
	if err != nil {
		stop()
		return nil, err
	}
	c, err := lib.PrimaryCtxRetain(dev)
	if err != nil {
		stop()
		return nil, err
	}
	b := &Backend{Lib: lib, Dev: dev, Ctx: c, Simulated: true, Socket: socket}
	b.stop = func() { lib.PrimaryCtxRelease(dev); stop() }
	info, err := lib.SimCtxInfo(c)
	b.Desc = "gpufeed's simulated CUDA driver " + lp + " on a simulated GPU"
	if err == nil {
		b.Desc += fmt.Sprintf(" (each launch costs the launching thread %.1f µs of CPU)", float64(info.LaunchCostNS)/1e3)
	}
	return b, nil
}

// Close releases the context and stops a simulated device this process
// started.
func (b *Backend) Close() {
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
}

// Link is the device's PCIe link as it is negotiated now, and where that
// was read.
type Link struct {
	Gen, Width       int
	MaxGen, MaxWidth int
	Source           string
}

// BytesPerSec is the link's raw data rate in one direction.
func (l Link) BytesPerSec() float64 {
	v, _ := gpu.PCIeLinkBytesPerSec(l.Gen, l.Width)
	return v
}

// Link reads the negotiated PCIe link: from the simulated device's
// samples, or for a real device from NVML (matched by PCI address, since
// CUDA and NVML may number devices differently), else sysfs.
func (b *Backend) Link(fs procfs.FS) (Link, error) {
	if b.Simulated {
		src, err := sim.Dial(b.Socket)
		if err != nil {
			return Link{}, err
		}
		defer src.Close()
		return linkFrom(src, 0, "the simulated device's link")
	}
	bus := strings.ToLower(b.BusID)
	if bus == "" {
		return Link{}, errors.New("the driver gave no PCI address for the device")
	}
	var nerr error
	if src, err := nvml.Open(nvml.Options{ProcRoot: fs.ProcPath("")}); err == nil {
		defer src.Close()
		for _, d := range src.Devices() {
			if strings.EqualFold(d.BusID, bus) {
				l, err := linkFrom(src, d.Index, "NVML (current link generation and width)")
				if err == nil {
					return l, nil
				}
				nerr = err
			}
		}
	} else {
		nerr = err
	}
	d, err := fs.PCIDevice(bus)
	if err != nil {
		return Link{}, fmt.Errorf("NVML: %v; sysfs: %w", nerr, err)
	}
	if d.CurrentLinkSpeed == nil || d.CurrentLinkWidth == nil {
		return Link{}, fmt.Errorf("NVML: %v; sysfs: %s has no current link speed and width", nerr, bus)
	}
	l := Link{Gen: procfs.PCIeGen(*d.CurrentLinkSpeed), Width: *d.CurrentLinkWidth, Source: "sysfs current_link_speed and current_link_width of " + bus}
	if d.MaxLinkSpeed != nil && d.MaxLinkWidth != nil {
		l.MaxGen, l.MaxWidth = procfs.PCIeGen(*d.MaxLinkSpeed), *d.MaxLinkWidth
	}
	return l, nil
}

func linkFrom(src gpu.Source, index int, what string) (Link, error) {
	ss, err := src.Sample()
	if err != nil {
		return Link{}, err
	}
	for _, s := range ss {
		if s.Index != index {
			continue
		}
		if s.LinkGen == nil || s.LinkWidth == nil {
			return Link{}, fmt.Errorf("%s: no link generation and width in the device's readings", what)
		}
		l := Link{Gen: *s.LinkGen, Width: *s.LinkWidth, Source: what}
		for _, d := range src.Devices() {
			if d.Index == index && d.LinkGenMax != nil && d.LinkWidthMax != nil {
				l.MaxGen, l.MaxWidth = *d.LinkGenMax, *d.LinkWidthMax
			}
		}
		return l, nil
	}
	return Link{}, fmt.Errorf("%s: device %d not among the readings", what, index)
}

// sysfsBusID writes a PCI address as sysfs names it (0000:81:00.0, lower
// case): CUDA writes a four-digit domain, NVML an eight-digit one.
func sysfsBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) > 4 {
		id = dom[len(dom)-4:] + ":" + rest
	}
	return id
}

// mappedPath is the file this process mapped for a library named base
// (libcuda.so.1 is a link to the driver's versioned file), "" when none.
func mappedPath(base string) string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && strings.HasPrefix(filepath.Base(f[5]), stem) {
			return f[5]
		}
	}
	return ""
}

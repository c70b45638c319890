package sim

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// Defaults of the simulated device. The clock and power figures are those of
// an H100 SXM5 class part (idle and boost SM clock, 700 W board limit); they
// only give the reports realistic magnitudes, nothing is tuned on them.
const (
	// DefaultMaxPending is CUDA's per-stream launch queue depth: past about
	// 1024 outstanding operations a launch blocks in the driver.
	DefaultMaxPending = 1024
	// DefaultPointWindow is the width of a fine-grained utilisation point, the
	// resolution nvmlDeviceGetSamples gives on recent GPUs.
	DefaultPointWindow = 20 * time.Millisecond
	// DefaultPageableFactor is the pageable/pinned bandwidth ratio: a pageable
	// copy is staged through a pinned bounce buffer by an extra host memcpy,
	// which roughly halves the achieved rate.
	DefaultPageableFactor = 0.5
	// MinPageableFactor is the least pageable/pinned ratio the model takes:
	// a hundredth (a real staged copy runs at a third to two thirds of a
	// pinned one). At 1e-300 a 4 KB pageable copy lasted longer than any
	// clock counts, and never returned.
	MinPageableFactor = 0.01
	// PCIeEfficiency is the share of the raw link rate a pinned copy achieves
	// (TLP headers and flow control): about 25 GB/s of Gen4 x16's 31.5 GB/s,
	// what bandwidthTest reports on such links.
	PCIeEfficiency = 0.8
	// DefaultD2DBandwidth is device-to-device copy bandwidth in bytes/s: an
	// HBM3 part's 3.35 TB/s, halved (a copy reads and writes), rounded down.
	DefaultD2DBandwidth = 1.5e12
	// DefaultRetention is how much history the device keeps for observers; a
	// window longer than this is measured over its last DefaultRetention.
	DefaultRetention = 60 * time.Second
	// MaxStreamsPerProcess bounds the state one client can make the server hold.
	MaxStreamsPerProcess = 4096
	// MaxOpDuration bounds a single kernel or copy (one hour), so timestamps never overflow.
	MaxOpDuration = time.Hour
	// MaxDevices bounds the simulated GPUs of one server (a large node has 8
	// to 16; 64 leaves room for any test).
	MaxDevices = 64
	// MaxPendingLimit bounds gpufeed simdev's --max-pending: 64 times CUDA's
	// queue depth. Each pending operation is held per stream, so this bounds
	// what one client can make the server hold. (In-process users, such as
	// the launch benchmark, may set more.)
	MaxPendingLimit = 1 << 16
	// DefaultLaunchCost is the user CPU time the simulated driver spends on
	// each launch (and each copy, event record or graph launch it enqueues),
	// as real work: about 5 us, what cudaLaunchKernel costs the launching
	// thread in a profile of a small-batch decode loop (the CPU-side
	// article of this project's domain notes, exercise on launch jitter),
	// within NVIDIA's "a few microseconds" of launch overhead.
	DefaultLaunchCost = 5 * time.Microsecond
	// MaxLaunchCost bounds --launch-cost: a millisecond is already no driver.
	MaxLaunchCost = time.Millisecond
	// DefaultRingCapacity is how many records a context's ring holds: the
	// library tells the server when it is a quarter full, so a launch loop
	// makes one system call per 8192 launches.
	DefaultRingCapacity = 1 << 15
	// MinPointWindow is the finest utilisation point: an observer reads every
	// 100 ms and a sample carries at most maxPointsPerSample points, so finer
	// points only cut history short.
	MinPointWindow = time.Millisecond
)

// Options configure a simulated device server. The zero value is completed
// with the defaults by Listen.
type Options struct {
	// Devices is the number of simulated GPUs (default 1).
	Devices int
	// LinkGen and LinkWidth are the PCIe link (default Gen4 x16); the copy
	// bandwidth derives from them.
	LinkGen, LinkWidth int
	// PointWindow is the width of a fine-grained utilisation point (default 20 ms).
	PointWindow time.Duration
	// MaxPending is the per-stream queue depth (default 1024).
	MaxPending int
	// PageableFactor is the pageable/pinned copy bandwidth ratio (default 0.5).
	PageableFactor float64
	// D2DBandwidth is device-to-device copy bandwidth in bytes/s.
	D2DBandwidth float64
	// Retention is how much history is kept for slow observers (default 60 s).
	Retention time.Duration

	// Name is the device's marketing name in reports.
	Name string
	// Clocks (MHz) and power (W) of the clock and power models.
	IdleSMClockMHz, MaxSMClockMHz, MemClockMHz        uint32
	IdlePowerW, ActivePowerW, CopyPowerW, PowerLimitW float64
	// ClockRiseTau and ClockFallTau are the time constants with which the SM
	// clock moves toward its maximum while a kernel runs and toward idle when none does.
	ClockRiseTau, ClockFallTau time.Duration
	// MemTotalBytes is the memory size the device reports.
	MemTotalBytes uint64

	// LaunchCost is the user CPU time each enqueue costs the launching
	// thread (default DefaultLaunchCost; a process may override it with
	// GPUFEED_SIMDEV_LAUNCH_US).
	LaunchCost time.Duration
	// RingCapacity is the records a context's ring holds (default 32768).
	RingCapacity int
	// Library returns the simulated driver library's path, for clients that
	// ask (the Python client); default simcuda.Path, built on first ask.
	Library func() (string, error)
}

func (o Options) withDefaults() Options {
	if o.Devices <= 0 {
		o.Devices = 1
	}
	if o.LinkGen == 0 {
		o.LinkGen = 4
	}
	if o.LinkWidth == 0 {
		o.LinkWidth = 16
	}
	if o.PointWindow <= 0 {
		o.PointWindow = DefaultPointWindow
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.PageableFactor <= 0 {
		o.PageableFactor = DefaultPageableFactor
	}
	if o.D2DBandwidth <= 0 {
		o.D2DBandwidth = DefaultD2DBandwidth
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Name == "" {
		o.Name = "gpufeed simulated GPU"
	}
	if o.MaxSMClockMHz == 0 {
		o.MaxSMClockMHz = 1980
	}
	if o.IdleSMClockMHz == 0 {
		o.IdleSMClockMHz = 345
	}
	if o.MemClockMHz == 0 {
		o.MemClockMHz = 2619
	}
	if o.IdlePowerW == 0 {
		o.IdlePowerW = 70
	}
	if o.ActivePowerW == 0 {
		o.ActivePowerW = 620
	}
	if o.CopyPowerW == 0 {
		o.CopyPowerW = 25
	}
	if o.PowerLimitW == 0 {
		o.PowerLimitW = 700
	}
	// Boost is reached within a few milliseconds of work arriving; the driver
	// lets clocks sag only after a few hundred milliseconds without work. The
	// constants reproduce that asymmetry; they are a model, not a measurement.
	if o.ClockRiseTau <= 0 {
		o.ClockRiseTau = 5 * time.Millisecond
	}
	if o.ClockFallTau <= 0 {
		o.ClockFallTau = 300 * time.Millisecond
	}
	if o.MemTotalBytes == 0 {
		o.MemTotalBytes = 80 << 30
	}
	if o.LaunchCost == 0 {
		o.LaunchCost = DefaultLaunchCost
	}
	if o.RingCapacity <= 0 {
		o.RingCapacity = DefaultRingCapacity
	}
	return o
}

// checkGiven refuses values the zero-means-default convention cannot
// repair: negative counts and windows, a pageable factor that is not a
// number (NaN compares false with every bound: a pageable copy never ends).
func (o Options) checkGiven() error {
	switch {
	case o.Devices < 0:
		return fmt.Errorf("%d devices: want 1 to %d", o.Devices, MaxDevices)
	case o.MaxPending < 0:
		return fmt.Errorf("max pending %d: want 1 to %d operations per stream", o.MaxPending, MaxPendingLimit)
	case o.PointWindow < 0:
		return fmt.Errorf("point window %v: want %v to %v", o.PointWindow, MinPointWindow, DefaultRetention)
	case math.IsNaN(o.PageableFactor) || math.IsInf(o.PageableFactor, 0) || o.PageableFactor < 0:
		return fmt.Errorf("pageable factor %g: want a ratio in (0, 1]", o.PageableFactor)
	case o.LaunchCost < 0 || o.LaunchCost > MaxLaunchCost:
		return fmt.Errorf("launch cost %v: want 0 to %v", o.LaunchCost, MaxLaunchCost)
	case o.RingCapacity < 0 || o.RingCapacity > 1<<22:
		return fmt.Errorf("ring capacity %d: want 64 to %d records", o.RingCapacity, 1<<22)
	case math.IsNaN(o.D2DBandwidth) || math.IsInf(o.D2DBandwidth, 0) || o.D2DBandwidth < 0:
		return fmt.Errorf("device-to-device bandwidth %g: want a positive number of bytes/s", o.D2DBandwidth)
	}
	return nil
}

func (o Options) validate() error {
	if _, ok := gpu.PCIeLinkBytesPerSec(o.LinkGen, o.LinkWidth); !ok {
		return fmt.Errorf("PCIe link Gen%d x%d: want generation 1-6 and width 1, 2, 4, 8, 12, 16 or 32", o.LinkGen, o.LinkWidth)
	}
	if o.PageableFactor > 1 || o.PageableFactor < MinPageableFactor {
		return fmt.Errorf("pageable factor %g: want a ratio from %g to 1", o.PageableFactor, MinPageableFactor)
	}
	if o.IdleSMClockMHz > o.MaxSMClockMHz {
		return fmt.Errorf("idle SM clock %d MHz above the maximum %d MHz", o.IdleSMClockMHz, o.MaxSMClockMHz)
	}
	if o.RingCapacity < 64 {
		return fmt.Errorf("ring capacity %d: want 64 to %d records", o.RingCapacity, 1<<22)
	}
	if o.Devices > MaxDevices {
		return fmt.Errorf("%d devices: at most %d", o.Devices, MaxDevices)
	}
	if o.PointWindow < MinPointWindow || o.PointWindow > o.Retention {
		return fmt.Errorf("point window %v: want %v to %v (the history kept)", o.PointWindow, MinPointWindow, o.Retention)
	}
	return nil
}

// pinnedBandwidth returns bytes/s of a pinned copy in each direction.
func (o Options) pinnedBandwidth() [3]float64 {
	raw, _ := gpu.PCIeLinkBytesPerSec(o.LinkGen, o.LinkWidth)
	link := raw * PCIeEfficiency
	return [3]float64{link, link, o.D2DBandwidth}
}

var linkRE = regexp.MustCompile(`^(?i:gen)?([0-9]+)\s*x([0-9]+)$`)

// ParseLink reads a PCIe link written "gen4x16" (or "4x16").
func ParseLink(s string) (gen, width int, err error) {
	m := linkRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("PCIe link %q: want GENxWIDTH such as gen4x16", s)
	}
	gen, _ = strconv.Atoi(m[1])
	width, _ = strconv.Atoi(m[2])
	if _, ok := gpu.PCIeLinkBytesPerSec(gen, width); !ok {
		return 0, 0, fmt.Errorf("PCIe link %q: want generation 1-6 and width 1, 2, 4, 8, 12, 16 or 32", s)
	}
	return gen, width, nil
}

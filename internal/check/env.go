package check

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// env holds one run's options and the facts several checks share, each
// read once on first use.
type env struct {
	ctx  context.Context
	opts Options
	fs   procfs.FS

	pci        memo[pciListing]
	cpus       memo[[]procfs.CPU]
	nodes      memo[[]procfs.Node]
	target     memo[procfs.Status]
	mainThread memo[procfs.Status]
	fds        memo[procfs.FDKinds]
	limits     memo[map[string]procfs.Limit]
	mounts     memo[[]procfs.Mount]
	meminfo    memo[procfs.Meminfo]
	cmdline    memo[[]procfs.KernelParam]
	nvMinors   memo[map[int]string]

	// Counters read twice, Window apart.
	irq0, irq1     procfs.Interrupts
	irqErr         error
	irqTruncated   bool
	irqAt0, irqAt1 time.Time
	gpuInfo        []gpu.DeviceInfo
	gpu0, gpu1     []gpu.Sample
	gpuErr         error
	gpuAt0, gpuAt1 time.Time
	uptime         float64
	uptimeErr      error
	cgThreads      *cgroupThreads // cgroup_limits.go's first reading
}

type pciListing struct {
	devs    []procfs.PCIDevice
	skipped []error
}

type memo[T any] struct {
	done bool
	v    T
	err  error
}

func (m *memo[T]) get(load func() (T, error)) (T, error) {
	if !m.done {
		m.v, m.err = load()
		m.done = true
	}
	return m.v, m.err
}

func newEnv(ctx context.Context, opts Options) *env {
	if opts.Statfs == nil {
		opts.Statfs = procfs.Statfs
	}
	return &env{ctx: ctx, opts: opts, fs: procfs.At(opts.ProcRoot, opts.SysRoot)}
}

func (e *env) firstReadings() {
	e.irq0, e.irqErr = e.fs.Interrupts()
	if errors.Is(e.irqErr, procfs.ErrTooLarge) {
		// What was read still counts; the check says it was cut.
		e.irqTruncated, e.irqErr = true, nil
	}
	e.irqAt0 = time.Now()
	e.uptime, e.uptimeErr = e.fs.Uptime()
	e.firstCgroupReadings()
	if e.opts.GPU != nil {
		e.gpuInfo = e.opts.GPU.Devices()
		e.gpu0, e.gpuErr = e.opts.GPU.Sample()
		e.gpuAt0 = time.Now()
	}
}

func (e *env) secondReadings() {
	if e.opts.Window <= 0 {
		e.irq1, e.irqAt1 = e.irq0, e.irqAt0
		e.gpu1, e.gpuAt1 = e.gpu0, e.gpuAt0
		return
	}
	if e.irqErr == nil {
		if irq, err := e.fs.Interrupts(); err == nil {
			e.irq1, e.irqAt1 = irq, time.Now()
		} else {
			e.irq1, e.irqAt1 = e.irq0, e.irqAt0
		}
	}
	if e.opts.GPU != nil && e.gpuErr == nil {
		if s, err := e.opts.GPU.Sample(); err == nil {
			e.gpu1, e.gpuAt1 = s, time.Now()
		} else {
			e.gpu1, e.gpuAt1 = e.gpu0, e.gpuAt0
		}
	}
}

func (e *env) pciDevices() (pciListing, error) {
	return e.pci.get(func() (pciListing, error) {
		devs, skipped, err := e.fs.PCIDevices()
		return pciListing{devs, skipped}, err
	})
}

func (e *env) cpuList() ([]procfs.CPU, error) { return e.cpus.get(e.fs.CPUs) }

func (e *env) nodeList() ([]procfs.Node, error) { return e.nodes.get(e.fs.Nodes) }

// subjectPID names the process per-process checks look at.
func (e *env) subjectPID() string {
	if e.opts.PID > 0 {
		return "pid " + strconv.Itoa(e.opts.PID)
	}
	return ownProcess
}

func (e *env) targetStatus() (procfs.Status, error) {
	return e.target.get(func() (procfs.Status, error) { return e.fs.ProcStatus(e.opts.PID) })
}

// mainThreadStatus reads the target's main thread, which in PyTorch is the
// Python thread that launches kernels.
func (e *env) mainThreadStatus() (procfs.Status, error) {
	return e.mainThread.get(func() (procfs.Status, error) { return e.fs.ThreadStatus(e.opts.PID, e.opts.PID) })
}

func (e *env) targetFDs() (procfs.FDKinds, error) {
	return e.fds.get(func() (procfs.FDKinds, error) { return e.fs.FDKinds(e.opts.PID, -1) })
}

func (e *env) targetLimits() (map[string]procfs.Limit, error) {
	return e.limits.get(func() (map[string]procfs.Limit, error) { return e.fs.Limits(e.opts.PID) })
}

func (e *env) targetMounts() ([]procfs.Mount, error) {
	return e.mounts.get(func() ([]procfs.Mount, error) { return e.fs.Mounts(e.opts.PID) })
}

func (e *env) memInfo() (procfs.Meminfo, error) { return e.meminfo.get(e.fs.Meminfo) }

func (e *env) kernelCmdline() ([]procfs.KernelParam, error) { return e.cmdline.get(e.fs.KernelCmdline) }

func (e *env) nvidiaMinors() (map[int]string, error) { return e.nvMinors.get(e.fs.NVIDIADriverGPUs) }

// procFile and sysFile name a source for evidence as the user knows it
// (/proc/..., /sys/...), whatever the root; the report header names the root.
func procFile(elem ...string) string { return "/proc/" + joinPath(elem) }
func sysFile(elem ...string) string  { return "/sys/" + joinPath(elem) }

func joinPath(elem []string) string {
	out := ""
	for i, e := range elem {
		if i > 0 {
			out += "/"
		}
		out += e
	}
	return out
}

func pidDir(pid int) string { return procfs.PIDDir(pid) }

// Evidence helpers.

func num(what string, v float64, unit, source string) finding.Evidence {
	return finding.Evidence{What: what, Value: v, Unit: unit, Source: source}
}

func text(what, t, source string) finding.Evidence {
	return finding.Evidence{What: what, Text: t, Source: source}
}

// bytesEv gives a size in MiB, or KiB when under a MiB.
func bytesEv(what string, b uint64, source string) finding.Evidence {
	if b > 0 && b < 1<<20 {
		return finding.Evidence{What: what, Value: float64(b) / (1 << 10), Unit: "KiB", Source: source}
	}
	return finding.Evidence{What: what, Value: float64(b) / (1 << 20), Unit: "MiB", Source: source}
}

// gib formats bytes for claims.
func human(b uint64) string { return safetext.Bytes(float64(b), 0, 1) }

func since(window time.Duration) string {
	if window <= 0 {
		return "since boot"
	}
	return fmt.Sprintf("over %.1f s", window.Seconds())
}

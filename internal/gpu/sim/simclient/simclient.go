// Package simclient is the Go client of the simulated device: what Go
// workloads (the demo scenarios, tests) call where a CUDA program would call
// the driver. It drives the simulated CUDA driver library
// (libgpufeed-simcuda.so, built from the source embedded in this binary)
// through internal/sim/cudadrv, the same dlopen path a program takes to
// libcuda.so.1 on a GPU host: a launch is user-space work and a record in
// shared memory, no system call; a synchronisation waits as the context's
// scheduling flags say. docs/SIMDEV.md has the model.
//
// A Client is one process's primary context on one device: Clients of one
// process on the same device share it (its streams, its scheduling flags),
// as CUDA's primary context is shared. A Client is safe for concurrent use.
package simclient

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/gpufeed/gpufeed/internal/sim/cudadrv"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
	"golang.org/x/sys/unix"
)

// EnvVar names the environment variable that holds the device's socket path.
const EnvVar = "GPUFEED_SIMDEV"

// EnvSync names the environment variable that gives the default way a
// Client waits for the device: auto, spin, yield or block.
const EnvSync = "GPUFEED_SIMDEV_SYNC"

// CopyKind is a copy's direction.
type CopyKind uint8

// Copy directions.
const (
	H2D CopyKind = 0
	D2H CopyKind = 1
	D2D CopyKind = 2
)

// Sync modes, as CUDA's context scheduling flags.
var syncFlags = map[string]uint32{
	"auto":  cudadrv.SchedAuto,
	"spin":  cudadrv.SchedSpin,
	"yield": cudadrv.SchedYield,
	"block": cudadrv.SchedBlockingSync,
}

// ParseSync checks a sync mode ("" is auto).
func ParseSync(s string) (uint32, error) {
	if s == "" {
		return cudadrv.SchedAuto, nil
	}
	f, ok := syncFlags[s]
	if !ok {
		return 0, fmt.Errorf("sync mode %q: want auto, spin, yield or block", s)
	}
	return f, nil
}

// Options say how to connect.
type Options struct {
	// Device is the device index (default 0).
	Device int
	// Sync is how a wait for the device behaves: "auto" (CUDA's default:
	// spin while the process has no more contexts than CPUs, else yield),
	// "spin", "yield" or "block"; empty: GPUFEED_SIMDEV_SYNC, else auto.
	Sync string
}

// Client is a primary context on a simulated device.
type Client struct {
	lib  *cudadrv.Lib
	dev  cudadrv.Device
	ctx  cudadrv.Context
	fn   cudadrv.Function
	info cudadrv.SimInfo

	mu            sync.Mutex
	streams       map[uint32]cudadrv.Stream
	host          [2]hostBuf // pinned, pageable
	devBuf        cudadrv.DevicePtr
	devLen        uint64
	graphs        map[string]cudadrv.GraphExec
	captureStream cudadrv.Stream
	closed        bool
}

type hostBuf struct {
	p cudadrv.HostPtr
	n uint64
	m []byte // the pageable buffer's mapping (not Go memory)
}

var (
	libOnce sync.Once
	lib     *cudadrv.Lib
	libErr  error
)

// Library returns the simulated driver library, built and loaded once.
func Library() (*cudadrv.Lib, error) {
	libOnce.Do(func() {
		var p string
		if p, libErr = simcuda.Path(); libErr == nil {
			lib, libErr = cudadrv.Open(p)
		}
	})
	return lib, libErr
}

// Dial connects to device 0 of the simulated device at path.
func Dial(path string) (*Client, error) { return DialOptions(path, Options{}) }

// DialDevice connects to device index of the simulated device at path.
func DialDevice(path string, index int) (*Client, error) {
	return DialOptions(path, Options{Device: index})
}

// FromEnv connects to device 0 of the simulated device named by GPUFEED_SIMDEV.
func FromEnv() (*Client, error) {
	p := os.Getenv(EnvVar)
	if p == "" {
		return nil, errors.New(EnvVar + " is not set: start a simulated device with `gpufeed simdev --socket PATH` and export " + EnvVar + "=PATH")
	}
	return Dial(p)
}

// DialOptions connects as o says.
func DialOptions(path string, o Options) (*Client, error) {
	mode := o.Sync
	if mode == "" {
		mode = os.Getenv(EnvSync)
	}
	flags, err := ParseSync(mode)
	if err != nil {
		if o.Sync == "" {
			err = fmt.Errorf("%s: %w", EnvSync, err)
		}
		return nil, err
	}
	l, err := Library()
	if err != nil {
		return nil, err
	}
	dev, err := l.SimDeviceGet(path, o.Device)
	if err != nil {
		return nil, err
	}
	if err := l.PrimaryCtxSetFlags(dev, flags); err != nil {
		return nil, err
	}
	ctx, err := l.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, err
	}
	c := &Client{lib: l, dev: dev, ctx: ctx, streams: map[uint32]cudadrv.Stream{}, graphs: map[string]cudadrv.GraphExec{}}
	fail := func(err error) (*Client, error) {
		l.PrimaryCtxRelease(dev)
		return nil, err
	}
	mod, err := l.ModuleLoadData(ctx, simcuda.KernelPTX)
	if err != nil {
		return fail(err)
	}
	if c.fn, err = l.ModuleGetFunction(mod, simcuda.KernelName); err != nil {
		return fail(err)
	}
	if c.info, err = l.SimCtxInfo(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// PID is this process as the device identifies it (SO_PEERCRED).
func (c *Client) PID() int { return c.info.PID }

// Info describes the context: its scheduling, queue depth, launch cost and
// bandwidths.
func (c *Client) Info() cudadrv.SimInfo { return c.info }

// Sync says how the context's waits behave now: spin, yield or block.
func (c *Client) Sync() string {
	info, err := c.lib.SimCtxInfo(c.ctx)
	if err != nil {
		return "unknown"
	}
	switch info.SchedResolved {
	case cudadrv.SchedYield:
		return "yield"
	case cudadrv.SchedBlockingSync:
		return "block"
	}
	return "spin"
}

// stream returns the driver's stream for a stream number (0: the default
// stream), created on first use.
func (c *Client) stream(id uint32) (cudadrv.Stream, error) {
	if id == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("simulated device client closed")
	}
	if s, ok := c.streams[id]; ok {
		return s, nil
	}
	s, err := c.lib.StreamCreate(c.ctx, 0)
	if err != nil {
		return nil, err
	}
	c.streams[id] = s
	return s, nil
}

// Launch submits a kernel of duration d to stream. It returns after the
// launch's CPU cost, unless the stream holds the maximum of pending
// operations (1024): then it waits for one of them to end, as
// cuLaunchKernel does.
func (c *Client) Launch(d time.Duration, stream uint32) error {
	if d < 0 {
		return fmt.Errorf("kernel duration %v: must not be negative", d)
	}
	s, err := c.stream(stream)
	if err != nil {
		return err
	}
	return c.lib.Launch(c.ctx, c.fn, s, uint64(d))
}

// buffers returns host memory of at least n bytes (pinned or pageable) and
// a device buffer as large, grown as needed.
func (c *Client) buffers(n uint64, pinned bool) (cudadrv.HostPtr, cudadrv.DevicePtr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.devLen < n {
		if c.devBuf != 0 {
			c.lib.MemFree(c.ctx, c.devBuf)
		}
		p, err := c.lib.MemAlloc(c.ctx, max(n, 1))
		if err != nil {
			return 0, 0, err
		}
		c.devBuf, c.devLen = p, max(n, 1)
	}
	i := 1
	if pinned {
		i = 0
	}
	b := &c.host[i]
	if b.n < n {
		if pinned {
			if b.p != 0 {
				c.lib.MemFreeHost(b.p)
			}
			p, err := c.lib.MemHostAlloc(c.ctx, n)
			if err != nil {
				return 0, 0, err
			}
			b.p, b.n = p, n
		} else {
			if b.m != nil {
				unix.Munmap(b.m)
			}
			m, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return 0, 0, fmt.Errorf("pageable buffer of %d bytes: %w", n, err)
			}
			b.m, b.p, b.n = m, cudadrv.HostPtr(uintptrOf(m)), n
		}
	}
	return b.p, c.devBuf, nil
}

// Memcpy submits a copy of nbytes. A pinned copy is asynchronous, as
// cuMemcpyHtoDAsync from page-locked memory; a pageable one (h2d or d2h)
// stages through a bounce buffer (CPU work) and returns when it is done, as
// CUDA's does; d2d never blocks.
func (c *Client) Memcpy(nbytes uint64, kind CopyKind, pinned bool, stream uint32) error {
	if kind > D2D {
		return fmt.Errorf("copy kind %d: want H2D, D2H or D2D", kind)
	}
	s, err := c.stream(stream)
	if err != nil {
		return err
	}
	h, d, err := c.buffers(nbytes, pinned || kind == D2D)
	if err != nil {
		return err
	}
	switch kind {
	case H2D:
		return c.lib.MemcpyHtoD(c.ctx, d, h, nbytes, s, true)
	case D2H:
		return c.lib.MemcpyDtoH(c.ctx, h, d, nbytes, s, true)
	}
	return c.lib.MemcpyDtoD(c.ctx, d, d, nbytes, s)
}

// Synchronize blocks until every operation submitted to stream so far has
// ended (cuStreamSynchronize), waiting as the context's flags say.
func (c *Client) Synchronize(stream uint32) error {
	s, err := c.stream(stream)
	if err != nil {
		return err
	}
	return c.lib.StreamSynchronize(c.ctx, s)
}

// SynchronizeDevice blocks until every operation this context submitted so
// far has ended (cuCtxSynchronize).
func (c *Client) SynchronizeDevice() error { return c.lib.CtxSynchronize(c.ctx) }

// GraphLaunch launches a CUDA graph of kernels of the given durations, back
// to back, on stream: one launch's CPU cost for all of them
// (cuGraphLaunch). The graph is captured on first use and kept.
func (c *Client) GraphLaunch(kernels []time.Duration, stream uint32) error {
	key := fmt.Sprint(kernels)
	c.mu.Lock()
	exec, ok := c.graphs[key]
	c.mu.Unlock()
	if !ok {
		var err error
		if exec, err = c.captureGraph(kernels); err != nil {
			return err
		}
		c.mu.Lock()
		c.graphs[key] = exec
		c.mu.Unlock()
	}
	s, err := c.stream(stream)
	if err != nil {
		return err
	}
	return c.lib.GraphLaunch(c.ctx, exec, s)
}

func (c *Client) captureGraph(kernels []time.Duration) (cudadrv.GraphExec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.captureStream == nil {
		s, err := c.lib.StreamCreate(c.ctx, 0)
		if err != nil {
			return nil, err
		}
		c.captureStream = s
	}
	if err := c.lib.BeginCapture(c.ctx, c.captureStream, cudadrv.CaptureRelaxed); err != nil {
		return nil, err
	}
	for _, k := range kernels {
		if k < 0 {
			c.lib.EndCapture(c.ctx, c.captureStream)
			return nil, fmt.Errorf("kernel duration %v: must not be negative", k)
		}
		if err := c.lib.Launch(c.ctx, c.fn, c.captureStream, uint64(k)); err != nil {
			c.lib.EndCapture(c.ctx, c.captureStream)
			return nil, err
		}
	}
	g, err := c.lib.EndCapture(c.ctx, c.captureStream)
	if err != nil {
		return nil, err
	}
	defer c.lib.GraphDestroy(g)
	return c.lib.GraphInstantiate(c.ctx, g)
}

// Close releases the primary context (the last Client of the process on
// the device destroys it). Operations already submitted still run on the
// device.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, e := range c.graphs {
		c.lib.GraphExecDestroy(e)
	}
	for _, s := range c.streams {
		c.lib.StreamDestroy(c.ctx, s)
	}
	if c.captureStream != nil {
		c.lib.StreamDestroy(c.ctx, c.captureStream)
	}
	if c.host[0].p != 0 {
		c.lib.MemFreeHost(c.host[0].p)
	}
	if c.host[1].m != nil {
		unix.Munmap(c.host[1].m)
	}
	if c.devBuf != 0 {
		c.lib.MemFree(c.ctx, c.devBuf)
	}
	c.mu.Unlock()
	return c.lib.PrimaryCtxRelease(c.dev)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

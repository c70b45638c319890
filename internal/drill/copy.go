package drill

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sim/cudadrv"
)

// CopyOptions size the copy drill.
type CopyOptions struct {
	// Bytes per copy (default 64 MiB) and copies per row (default 5).
	Bytes uint64
	Reps  int
}

// Copy runs the copy drill: host-to-device and device-to-host copies from
// page-locked memory (cuMemAllocHost, what pin_memory=True gives) and from
// ordinary pageable memory (which the driver stages through its own
// pinned buffer), each timed from the call to the end of the copy, against
// the PCIe link the device negotiated.
func Copy(ctx context.Context, b *Backend, fs procfs.FS, opt CopyOptions) (*drillresult.Report, error) {
	if opt.Bytes == 0 {
		opt.Bytes = 64 << 20
	}
	if opt.Reps <= 0 {
		opt.Reps = 5
	}
	topo, err := ReadTopology(fs)
	if err != nil {
		return nil, err
	}
	rep := &drillresult.Report{Drill: "copy", Backend: b.Desc, Machine: Machine(fs, topo),
		Title: fmt.Sprintf("copies of %s between host and device, pinned versus pageable host memory", human(opt.Bytes))}
	link, lerr := b.Link(fs)
	ceiling := 0.0
	if lerr != nil {
		rep.Notes = append(rep.Notes, "the PCIe link could not be read: "+lerr.Error()+"; shares of the link are left out")
	} else {
		ceiling = link.BytesPerSec()
		s := fmt.Sprintf("negotiated PCIe link: Gen%d x%d, %.1f GB/s per direction raw (%s)", link.Gen, link.Width, ceiling/1e9, link.Source)
		if link.MaxGen > 0 && (link.MaxGen != link.Gen || link.MaxWidth != link.Width) {
			s += fmt.Sprintf("; the device can do Gen%d x%d: a link that trained below its maximum (or idles down to save power) caps every copy", link.MaxGen, link.MaxWidth)
		}
		rep.Notes = append(rep.Notes, s)
	}

	l, c := b.Lib, b.Ctx
	s, err := l.StreamCreate(c, 1)
	if err != nil {
		return nil, err
	}
	defer l.StreamDestroy(c, s)
	d, err := l.MemAlloc(c, opt.Bytes)
	if err != nil {
		return nil, err
	}
	defer l.MemFree(c, d)
	pinned, err := l.MemAllocHost(c, opt.Bytes)
	if err != nil {
		return nil, err
	}
	defer l.MemFreeHost(pinned)
	// Pageable memory: an anonymous mapping, outside Go's heap, every
	// page touched so the copies do not measure page faults.
	pageable, err := unix.Mmap(-1, 0, int(opt.Bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %s of pageable memory: %w", human(opt.Bytes), err)
	}
	defer unix.Munmap(pageable)
	for i := 0; i < len(pageable); i += 4096 {
		pageable[i] = byte(i)
	}
	pageablePtr := cudadrv.HostPtr(unsafePointer(pageable))

	tab := drillresult.Table{ID: "copy", Title: "bandwidth (median of the copies; range in brackets)",
		Columns: []drillresult.Column{
			{Key: "bandwidth_bytes_per_sec", Label: "bandwidth", Unit: drillresult.BytesPerSec},
			{Key: "link_percent", Label: "of the link", Unit: drillresult.Percent},
			{Key: "call_ns", Label: "call blocks for", Unit: drillresult.Nanoseconds},
		}}
	type spec struct {
		key, label string
		h2d        bool
		host       cudadrv.HostPtr
		pinned     bool
	}
	for _, sp := range []spec{
		{"h2d_pinned", "host to device, pinned", true, pinned, true},
		{"h2d_pageable", "host to device, pageable", true, pageablePtr, false},
		{"d2h_pinned", "device to host, pinned", false, pinned, true},
		{"d2h_pageable", "device to host, pageable", false, pageablePtr, false},
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var bws, calls []float64
		if sp.pinned {
			bws, calls, err = pinnedCopies(l, c, s, d, sp.host, opt.Bytes, opt.Reps, sp.h2d)
		} else {
			bws, calls, err = blockingCopies(l, c, s, d, sp.host, opt.Bytes, opt.Reps, sp.h2d)
		}
		if err != nil {
			return nil, fmt.Errorf("copy, %s: %w", sp.label, err)
		}
		bw := median(bws)
		var share *drillresult.Value
		if ceiling > 0 {
			share = drillresult.V(100 * bw / ceiling)
		}
		tab.Rows = append(tab.Rows, drillresult.Row{Key: sp.key, Label: sp.label,
			Measured:  []*drillresult.Value{drillresult.R(bw, slices.Min(bws), slices.Max(bws)), share, drillresult.V(median(calls))},
			Reference: []*drillresult.Value{nil, nil, nil}})
	}
	rep.Tables = append(rep.Tables, tab)
	rep.Notes = append(rep.Notes,
		"pinned copies are timed on the device, by events between copies queued back to back (as CUDA's bandwidthTest does); pageable ones from the call to the end of the copy, which their call blocks for",
		"no published reference for this drill: the link is the ceiling; a pinned copy reaches about 80 % of it (packet headers and flow control), a pageable one less, and its call blocks the calling thread until the data is staged (pin_memory=True in the DataLoader, non_blocking=True on .to() avoid both)")
	if b.Simulated {
		rep.Notes = append(rep.Notes, "on the simulator copy times follow the simulated link's model; a pageable copy really copies its bytes through a staging buffer on this CPU")
	}
	return rep, nil
}

// pinnedCopies times reps asynchronous copies from page-locked memory on
// the device's own clock, the way CUDA's bandwidthTest does: the copies
// are queued back to back with an event recorded after each, so each
// copy's time is the elapsed time between two events, which a
// descheduled host thread does not lengthen (the next copy is already
// queued). One copy before the first event warms the buffer's mapping.
// The calls' own times are kept: an asynchronous copy from pinned memory
// returns before the data moved.
func pinnedCopies(l *cudadrv.Lib, c cudadrv.Context, s cudadrv.Stream, d cudadrv.DevicePtr, h cudadrv.HostPtr, n uint64, reps int, h2d bool) (bws, calls []float64, err error) {
	copyOnce := func() error { return copyAsync(l, c, s, d, h, n, h2d) }
	if err := copyOnce(); err != nil {
		return nil, nil, err
	}
	events := make([]cudadrv.Event, 0, reps+1)
	defer func() {
		for _, e := range events {
			l.EventDestroy(e)
		}
	}()
	for i := 0; i <= reps; i++ {
		e, err := l.EventCreate(c, 0)
		if err != nil {
			return nil, nil, err
		}
		events = append(events, e)
	}
	if err := l.EventRecord(c, events[0], s); err != nil {
		return nil, nil, err
	}
	for i := 1; i <= reps; i++ {
		t0 := time.Now()
		if err := copyOnce(); err != nil {
			return nil, nil, err
		}
		calls = append(calls, float64(time.Since(t0)))
		if err := l.EventRecord(c, events[i], s); err != nil {
			return nil, nil, err
		}
	}
	if err := l.StreamSynchronize(c, s); err != nil {
		return nil, nil, err
	}
	for i := 1; i <= reps; i++ {
		ms, err := l.EventElapsed(events[i-1], events[i])
		if err != nil {
			return nil, nil, err
		}
		if ms > 0 {
			bws = append(bws, float64(n)/(float64(ms)/1e3))
		}
	}
	if len(bws) == 0 {
		return nil, nil, fmt.Errorf("the events between %d copies measured no time", reps)
	}
	return bws, calls, nil
}

// blockingCopies times reps copies from pageable memory from the call to
// the end of the copy: the driver stages pageable memory through its own
// pinned buffer, so the call blocks the calling thread, and that host time
// is what the job pays. The first copy, which pays for mapping the buffer,
// is left out.
func blockingCopies(l *cudadrv.Lib, c cudadrv.Context, s cudadrv.Stream, d cudadrv.DevicePtr, h cudadrv.HostPtr, n uint64, reps int, h2d bool) (bws, calls []float64, err error) {
	for i := 0; i <= reps; i++ {
		if err := l.StreamSynchronize(c, s); err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		err = copyAsync(l, c, s, d, h, n, h2d)
		called := time.Since(t0)
		if err == nil {
			err = l.StreamSynchronize(c, s)
		}
		if err != nil {
			return nil, nil, err
		}
		took := time.Since(t0)
		if i == 0 {
			continue
		}
		bws = append(bws, float64(n)/took.Seconds())
		calls = append(calls, float64(called))
	}
	return bws, calls, nil
}

// copyAsync queues one copy of n bytes between h and d on stream s.
func copyAsync(l *cudadrv.Lib, c cudadrv.Context, s cudadrv.Stream, d cudadrv.DevicePtr, h cudadrv.HostPtr, n uint64, h2d bool) error {
	if h2d {
		return l.MemcpyHtoD(c, d, h, n, s, true)
	}
	return l.MemcpyDtoH(c, h, d, n, s, true)
}

func human(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

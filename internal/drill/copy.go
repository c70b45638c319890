package drill

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/drill/result"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/cudadrv"
	"github.com/gpufeed/gpufeed/internal/procfs"
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
func Copy(ctx context.Context, b *Backend, fs procfs.FS, opt CopyOptions) (*result.Report, error) {
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
	rep := &result.Report{Drill: "copy", Backend: b.Desc, Machine: Machine(fs, topo),
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

	tab := result.Table{ID: "copy", Title: "bandwidth from the call to the end of the copy (median of the copies; range in brackets)",
		Columns: []result.Column{
			{Key: "bandwidth_bytes_per_sec", Label: "bandwidth", Unit: result.BytesPerSec},
			{Key: "link_percent", Label: "of the link", Unit: result.Percent},
			{Key: "call_ns", Label: "call blocks for", Unit: result.Nanoseconds},
		}}
	type spec struct {
		key, label string
		h2d        bool
		host       cudadrv.HostPtr
	}
	for _, sp := range []spec{
		{"h2d_pinned", "host to device, pinned", true, pinned},
		{"h2d_pageable", "host to device, pageable", true, pageablePtr},
		{"d2h_pinned", "device to host, pinned", false, pinned},
		{"d2h_pageable", "device to host, pageable", false, pageablePtr},
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var bws, calls []float64
		for i := 0; i <= opt.Reps; i++ {
			if err := l.StreamSynchronize(c, s); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if sp.h2d {
				err = l.MemcpyHtoD(c, d, sp.host, opt.Bytes, s, true)
			} else {
				err = l.MemcpyDtoH(c, sp.host, d, opt.Bytes, s, true)
			}
			called := time.Since(t0)
			if err == nil {
				err = l.StreamSynchronize(c, s)
			}
			if err != nil {
				return nil, fmt.Errorf("copy, %s: %w", sp.label, err)
			}
			took := time.Since(t0)
			if i == 0 {
				continue // the first copy of a buffer pays for mapping it
			}
			bws = append(bws, float64(opt.Bytes)/took.Seconds())
			calls = append(calls, float64(called))
		}
		bw := median(bws)
		var share *result.Value
		if ceiling > 0 {
			share = result.V(100 * bw / ceiling)
		}
		tab.Rows = append(tab.Rows, result.Row{Key: sp.key, Label: sp.label,
			Measured:  []*result.Value{result.R(bw, slices.Min(bws), slices.Max(bws)), share, result.V(median(calls))},
			Reference: []*result.Value{nil, nil, nil}})
	}
	rep.Tables = append(rep.Tables, tab)
	rep.Notes = append(rep.Notes,
		"no published reference for this drill: the link is the ceiling; a pinned copy reaches about 80 % of it (packet headers and flow control), a pageable one less, and its call blocks the calling thread until the data is staged (pin_memory=True in the DataLoader, non_blocking=True on .to() avoid both)")
	if b.Simulated {
		rep.Notes = append(rep.Notes, "on the simulator copy times follow the simulated link's model; a pageable copy really copies its bytes through a staging buffer on this CPU")
	}
	return rep, nil
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

package sample

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The ticks' thread samples are kept for the whole window (the judgement
// reads them all): at 1,000 threads and 100 ms ticks, about 9 MiB of fresh
// memory in 10 s, each of its pages faulted in at its first write, one
// exception per 4 KiB page. In this project's virtual machine the faults
// were a third of what a 1,000-thread window costs beyond a 100-thread one
// (docs/PERFORMANCE.md). The samples are handed out from chunks whose pages
// are populated in one system call each (MADV_POPULATE_WRITE, Linux 5.14:
// the pages are allocated as a write would, without the exception per
// page), where the kernel allows it.

// slabSamples is a chunk's size in samples: about 1 MiB.
const slabSamples = 1 << 20 / int(unsafe.Sizeof(timeline.ThreadSample{}))

// sampleSlab hands out the ticks' thread-sample slices.
type sampleSlab struct {
	buf []timeline.ThreadSample
	// noPopulate: the kernel refused to populate (before 5.14); the
	// chunks' pages then fault in as they are written.
	noPopulate bool
}

// take returns an empty slice with room for n samples, carved from the
// current chunk (a new one when it has less room left).
func (a *sampleSlab) take(n int) []timeline.ThreadSample {
	if n <= 0 {
		return nil
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]timeline.ThreadSample, 0, max(n, slabSamples))
		a.populate(a.buf[:cap(a.buf)])
	}
	at := len(a.buf)
	a.buf = a.buf[:at+n]
	return a.buf[at : at : at+n]
}

// populate faults in the whole pages of s, writable, in one call. The
// contents are left as they are (zero: a fresh allocation).
func (a *sampleSlab) populate(s []timeline.ThreadSample) {
	if a.noPopulate || len(s) == 0 {
		return
	}
	size := uintptr(len(s)) * unsafe.Sizeof(s[0])
	start := uintptr(unsafe.Pointer(&s[0]))
	page := uintptr(unix.Getpagesize())
	lo, hi := (start+page-1)&^(page-1), (start+size)&^(page-1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&s[0]), lo-start)), hi-lo)
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil {
		a.noPopulate = true
	}
}

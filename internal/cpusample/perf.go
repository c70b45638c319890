package cpusample

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stackBytes of the user stack above the stack pointer come with each
// sample, with the stack pointer itself (spMask, the architecture's SP
// register): where the leaf is code that does not settle what the time was
// for (the vDSO's clock read, the C library's sched_yield) and the kernel's
// frame-pointer walk found no caller (libraries built without frame
// pointers), the first return address on the stack that lands in code that
// does settle it names the caller.
const stackBytes = 512

var (
	spMask     = map[string]uint64{"amd64": 1 << 7, "arm64": 1 << 31}[runtime.GOARCH]
	sampleType = uint64(unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_CALLCHAIN)
)

func init() {
	if spMask != 0 {
		sampleType |= unix.PERF_SAMPLE_REGS_USER | unix.PERF_SAMPLE_STACK_USER
	}
}

// ring is one CPU's software cpu-clock event and its mmap'd sample buffer.
type ring struct {
	fd   int
	mem  []byte // metadata page, then the data pages
	data []byte
}

const (
	dataPages   = 16 // 64 KiB a CPU: at 99 Hz, seconds of samples between two reads
	maxStack    = 8  // frames of each callchain: the leaf and its callers settle the category
	offHead     = 1024
	offTail     = 1032
	recordLost  = 2
	recordSampl = 9
	miscMask    = 7
	miscKernel  = 1
)

// openRing opens a sampling cpu-clock event on cpu for every task, at hz.
func openRing(cpu, hz int) (*ring, error) {
	attr := unix.PerfEventAttr{
		Type:              unix.PERF_TYPE_SOFTWARE,
		Config:            unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:              uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:            uint64(hz),
		Sample_type:       sampleType,
		Sample_regs_user:  spMask,
		Sample_stack_user: stackBytes,
		Bits:              unix.PerfBitFreq | unix.PerfBitDisabled,
		Sample_max_stack:  maxStack,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	page := unix.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+dataPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping the sample buffer of CPU %d: %w", cpu, err)
	}
	return &ring{fd: fd, mem: mem, data: mem[page:]}, nil
}

func (r *ring) enable() error {
	return unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_ENABLE, 0)
}

func (r *ring) close() {
	unix.IoctlSetInt(r.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	unix.Munmap(r.mem)
	unix.Close(r.fd)
}

// sample is one PERF_RECORD_SAMPLE.
type sample struct {
	kernel   bool
	pid, tid int
	ip       uint64
	user     []uint64 // the user frames of the callchain, leaf first
	stack    []byte   // the user stack from its stack pointer (nil when not sampled)
}

// drain reads every complete record in the buffer, calling onSample for
// each sample and adding dropped ones to lost, then frees the space.
func (r *ring) drain(onSample func(*sample), lost *uint64) {
	head := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[offHead])))
	tail := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[offTail])))
	size := uint64(len(r.data))
	var buf []byte
	var s sample
	for tail+8 <= head {
		hdr := r.read(tail, 8, &buf)
		typ := binary.LittleEndian.Uint32(hdr[0:4])
		misc := binary.LittleEndian.Uint16(hdr[4:6])
		n := uint64(binary.LittleEndian.Uint16(hdr[6:8]))
		if n < 8 || tail+n > head || n > size {
			break
		}
		rec := r.read(tail+8, n-8, &buf)
		switch typ {
		case recordSampl:
			if parseSample(rec, misc, &s) {
				onSample(&s)
			}
		case recordLost:
			if len(rec) >= 16 {
				*lost += binary.LittleEndian.Uint64(rec[8:16])
			}
		}
		tail += n
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.mem[offTail])), tail)
}

// read returns n bytes of the ring from position pos, copying when they
// wrap around its end.
func (r *ring) read(pos, n uint64, buf *[]byte) []byte {
	size := uint64(len(r.data))
	off := pos % size
	if off+n <= size {
		return r.data[off : off+n]
	}
	*buf = append((*buf)[:0], r.data[off:]...)
	*buf = append(*buf, r.data[:n-(size-off)]...)
	return *buf
}

// The callchain's context markers (PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER):
// frames after the user marker are the user stack's.
const (
	contextUser = ^uint64(512) + 1
	contextMax  = ^uint64(4095) + 1
)

// parseSample decodes ip, pid/tid and the callchain of one sample record
// (sample_type IP|TID|CALLCHAIN). A record too short for what it claims is
// skipped.
func parseSample(b []byte, misc uint16, s *sample) bool {
	if len(b) < 24 {
		return false
	}
	s.ip = binary.LittleEndian.Uint64(b[0:8])
	s.pid = int(binary.LittleEndian.Uint32(b[8:12]))
	s.tid = int(binary.LittleEndian.Uint32(b[12:16]))
	s.kernel = misc&miscMask == miscKernel
	nr := binary.LittleEndian.Uint64(b[16:24])
	if nr > uint64(len(b)-24)/8 {
		return false
	}
	s.user = s.user[:0]
	inUser := false
	for i := uint64(0); i < nr; i++ {
		v := binary.LittleEndian.Uint64(b[24+8*i:])
		if v >= contextMax {
			inUser = v == contextUser
			continue
		}
		if inUser {
			s.user = append(s.user, v)
		}
	}
	if !s.kernel && len(s.user) == 0 {
		s.user = append(s.user, s.ip)
	}
	s.stack = nil
	if spMask == 0 {
		return true
	}
	rest := b[24+8*nr:]
	// regs_user: abi, then the one register asked for (none when abi is 0:
	// a kernel thread); stack_user: size, data, dyn_size.
	if len(rest) < 8 {
		return true
	}
	abi := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if abi != 0 {
		if len(rest) < 8 {
			return true
		}
		rest = rest[8:]
	}
	if len(rest) < 8 {
		return true
	}
	size := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if size == 0 || size > uint64(len(rest)) {
		return true
	}
	dyn := size
	if uint64(len(rest)) >= size+8 {
		dyn = min(size, binary.LittleEndian.Uint64(rest[size:]))
	}
	s.stack = rest[:dyn]
	return true
}

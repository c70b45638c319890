//go:build amd64 || arm64

package schedbpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Where sleeping threads wait, read in the kernel (bpf/waits.bpf.c): the
// system call with its arguments and the wait channel, what
// /proc/PID/task/TID/syscall and wchan print. The sampler reads a thread's
// wait once it has slept through a slow period, and an active thread's
// when a slow tick finds it asleep; from /proc that is two file opens per
// thread, about 55 ms of CPU for a 1,000-thread job's idle threads in its
// first seconds in this project's virtual machine, most of a 10 s window's
// cost above the steady ticks. Here it is one program run per process.

// Wait is one thread's wait.
type Wait struct {
	TID int
	// Running: the thread was running, waking or queued, or ran while it
	// was read (/proc's syscall file says "running"); nothing else is set.
	Running bool
	// Number is the system call's number, -1 where the thread is blocked
	// outside one (a page fault); Args its arguments.
	Number int
	Args   [6]uint64
	// Wchan is the wait channel as /proc's wchan names it ("" where none).
	Wchan string
}

// maxAsked is the most threads one program run reads (WAITS in
// bpf/waits.bpf.c); a reading of more runs it again.
const maxAsked = 4096

// waitSize is the size of struct wait in bpf/waits.bpf.c.
const waitSize = 128

// waiter is the waits reader's state where it loaded.
type waiter struct {
	objs    twObjects
	asked   *ebpf.Memory
	waits   *ebpf.Memory
	facts   *ebpf.Memory
	cursor  *ebpf.Memory
	iters   map[int]*link.Iter // proc_asked per process, linked to its leader
	tids    []byte             // a run's tids, as written to asked (64 bits each)
	buf     []byte
	facts1  []Facts
	scratch [64]byte
	records []Wait
}

// loadWaits loads the waits reader and looks the sleep text's bounds up.
func (t *Tracer) loadWaits() error {
	spec, err := loadTw()
	if err != nil {
		return err
	}
	w := &waiter{iters: map[int]*link.Iter{}}
	if err := spec.LoadAndAssign(&w.objs, nil); err != nil {
		return err
	}
	fail := func(err error) error {
		w.objs.Close()
		return err
	}
	if ret, err := w.objs.TextBounds.Run(&ebpf.RunOptions{}); err != nil {
		return fail(fmt.Errorf("looking the scheduler's text up: %w", err))
	} else if ret != 0 {
		return fail(errors.New("the kernel's symbols lack the scheduler's or the locks' text bounds"))
	}
	var b twBounds
	if err := w.objs.Text.Lookup(uint32(0), &b); err != nil {
		return fail(err)
	}
	if b.SchedStart == 0 || b.SchedEnd <= b.SchedStart || b.LockEnd < b.LockStart {
		return fail(fmt.Errorf("the scheduler's text bounds read %#x-%#x", b.SchedStart, b.SchedEnd))
	}
	for _, m := range []struct {
		to **ebpf.Memory
		m  *ebpf.Map
	}{{&w.asked, w.objs.Asked}, {&w.waits, w.objs.Waits}, {&w.facts, w.objs.Facts}, {&w.cursor, w.objs.Wcursors}} {
		if *m.to, err = m.m.Memory(); err != nil {
			return fail(err)
		}
	}
	t.waits = w
	return nil
}

func (w *waiter) close() {
	for _, it := range w.iters {
		it.Close()
	}
	clear(w.iters)
	w.objs.Close()
}

// ReadsWaits says whether ReadWaits reads in the kernel; why not, if not.
func (t *Tracer) ReadsWaits() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waits != nil, t.waitsErr
}

// errNoWaits: the waits reader is not loaded (ReadsWaits says why).
var errNoWaits = errors.New("the waits are not read in the kernel")

// ReadWaits reads where pid's threads tids wait, in one program run (one
// per 4,096 threads). The result (valid until the next call) holds a record
// for each of them that was still a thread of pid; a thread missing from it
// exited. An error leaves the caller to read /proc.
func (t *Tracer) ReadWaits(pid int, tids []int) ([]Wait, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waits
	if w == nil {
		return nil, errNoWaits
	}
	w.records = w.records[:0]
	le := binary.LittleEndian // both targets (bpfel) are little-endian
	err := w.read(pid, tids, readWaits, w.waits, waitSize, func(r []byte) {
		wt := Wait{TID: int(le.Uint32(r)), Running: le.Uint32(r[4:])&1 != 0, Number: int(int64(le.Uint64(r[8:])))}
		if !wt.Running {
			for k := range wt.Args {
				wt.Args[k] = le.Uint64(r[16+8*k:])
			}
			wt.Wchan = wchanName(r[64:128])
		}
		w.records = append(w.records, wt)
	})
	if err != nil {
		return nil, err
	}
	return w.records, nil
}

// The program's modes (READ_WAITS, READ_FACTS in bpf/waits.bpf.c).
const (
	readWaits = 0
	readFacts = 1
)

// read runs proc_asked in mode over pid's threads tids (its link made at
// the first reading), maxAsked threads a run, and hands each record it
// wrote in out (size bytes) to each.
func (w *waiter) read(pid int, tids []int, mode uint32, out *ebpf.Memory, size int, each func([]byte)) error {
	it := w.iters[pid]
	if it == nil {
		var err error
		if it, err = taskIter(w.objs.ProcAsked, 0, pid); err != nil {
			return fmt.Errorf("%s: linking the waits' reader to pid %d: %w", What, pid, err)
		}
		w.iters[pid] = it
	}
	for len(tids) > 0 {
		n := min(len(tids), maxAsked)
		b, err := w.run(it, tids[:n], mode, out, size)
		if err != nil {
			return err
		}
		for off := 0; off < len(b); off += size {
			each(b[off : off+size])
		}
		tids = tids[n:]
	}
	return nil
}

// run is one run of the program over at most maxAsked threads: the records
// it wrote (valid until the next run).
func (w *waiter) run(it *link.Iter, tids []int, mode uint32, out *ebpf.Memory, size int) ([]byte, error) {
	w.tids = w.tids[:0]
	for _, tid := range tids {
		if tid <= 0 || tid > math.MaxInt32 {
			return nil, fmt.Errorf("%s: tid %d out of range", What, tid)
		}
		w.tids = binary.NativeEndian.AppendUint64(w.tids, uint64(tid))
	}
	if _, err := w.asked.WriteAt(w.tids, 0); err != nil {
		return nil, err
	}
	var c [16]byte // struct wcursor: next, full, mode, count
	binary.NativeEndian.PutUint32(c[8:], mode)
	binary.NativeEndian.PutUint32(c[12:], uint32(len(tids)))
	if _, err := w.cursor.WriteAt(c[:], 0); err != nil {
		return nil, err
	}
	if err := runIter(it, w.scratch[:]); err != nil {
		return nil, fmt.Errorf("%s: running the waits' reader: %w", What, err)
	}
	if _, err := w.cursor.ReadAt(c[:], 0); err != nil {
		return nil, err
	}
	if binary.NativeEndian.Uint32(c[4:]) != 0 {
		return nil, fmt.Errorf("%s: more threads asked than the waits' reader's %d records", What, maxAsked)
	}
	n := int(binary.NativeEndian.Uint32(c[:])) * size
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	b := w.buf[:n]
	if _, err := out.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// wchanName is the symbol as /proc's wchan prints it: %ps adds a module's
// name (" [nvidia]"), lookup_symbol_name does not.
func wchanName(b []byte) string {
	b = cString(b)
	if i := bytes.Index(b, []byte(" [")); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 || string(b) == "0" {
		return ""
	}
	return string(b)
}

// cString is b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// removeWaits drops pid's waits link.
func (t *Tracer) removeWaits(pid int) {
	if t.waits == nil {
		return
	}
	if it := t.waits.iters[pid]; it != nil {
		it.Close()
		delete(t.waits.iters, pid)
	}
}

// runIter runs an iterator whose program writes to maps only, reading it
// to its end with raw system calls, as readIter does (none blocks).
func runIter(it *link.Iter, scratch []byte) error {
	fd, errno := createIter(it)
	if errno != 0 {
		return errno
	}
	defer unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	for {
		r, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&scratch[0])), uintptr(len(scratch)))
		switch {
		case errno == unix.EINTR || errno == unix.EAGAIN:
		case errno != 0:
			return errno
		case r == 0:
			return nil
		}
	}
}

// Facts is what /proc/PID/task/TID/stat says of a thread, read in the
// kernel (bpf/waits.bpf.c's proc_asked, its facts mode) for the threads of a process first
// seen, in one program run instead of a file opened per thread.
type Facts struct {
	TID int
	// State is stat's state letter; CPU the processor it last ran on.
	State byte
	CPU   int
	// Comm is the thread's name; StartTime its start in clock ticks after
	// boot (stat's starttime, the thread's identity with its tid).
	Comm      string
	StartTime uint64
	// UTime and STime are stat's utime and stime (clock ticks), computed
	// from the task's CPU times as the kernel computes them for stat.
	UTime, STime uint64
}

// factsSize is the size of struct thread_facts in bpf/waits.bpf.c.
const factsSize = 80

// ReadFacts reads pid's threads tids' stat facts in one program run (one
// per 4,096 threads). The result (valid until the next call) holds a record
// for each of them that was still a thread of pid. An error leaves the
// caller to read /proc.
func (t *Tracer) ReadFacts(pid int, tids []int) ([]Facts, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waits
	if w == nil {
		return nil, errNoWaits
	}
	w.facts1 = w.facts1[:0]
	le := binary.LittleEndian
	err := w.read(pid, tids, readFacts, w.facts, factsSize, func(r []byte) {
		f := Facts{TID: int(le.Uint32(r)), State: StateLetter(le.Uint32(r[4:])), CPU: int(int32(le.Uint32(r[8:]))),
			StartTime: le.Uint64(r[16:]) / nsPerClockTick, Comm: string(cString(r[64:80]))}
		ut, st := cputimeAdjusted(le.Uint64(r[24:]), le.Uint64(r[32:]), le.Uint64(r[40:]), le.Uint64(r[48:]), le.Uint64(r[56:]))
		f.UTime, f.STime = ut/nsPerClockTick, st/nsPerClockTick
		w.facts1 = append(w.facts1, f)
	})
	if err != nil {
		return nil, err
	}
	return w.facts1, nil
}

// nsPerClockTick is NSEC_PER_SEC / USER_HZ: stat's clock ticks (USER_HZ is
// 100 on every architecture Linux exposes to user space).
const nsPerClockTick = 10_000_000

// cputimeAdjusted is the kernel's cputime_adjust (kernel/sched/cputime.c)
// without its update of prev: utime and stime (counted at the scheduler's
// ticks) scaled to the run time rtime, never below the values last given
// (prev), as stat prints them.
func cputimeAdjusted(utime, stime, rtime, prevU, prevS uint64) (ut, st uint64) {
	if prevS+prevU >= rtime {
		return prevU, prevS
	}
	switch {
	case stime == 0:
		utime = rtime
	case utime == 0:
		stime = rtime
	default:
		hi, lo := bits.Mul64(stime, rtime)
		if d := stime + utime; hi < d {
			stime, _ = bits.Div64(hi, lo, d)
		} else {
			stime = rtime
		}
		if stime > rtime {
			stime = rtime
		}
	}
	if stime < prevS {
		stime = prevS
	}
	utime = rtime - stime
	if utime < prevU {
		utime = prevU
		stime = rtime - utime
	}
	return utime, stime
}

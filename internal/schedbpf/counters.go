//go:build amd64 || arm64

package schedbpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The kernel's own counters (Options.Counters). The scheduler keeps, for
// every task, what /proc/PID/task/TID/schedstat and status print: the run
// time (se.sum_exec_runtime), the run-queue wait (sched_info.run_delay,
// from the enqueue to the switch-in), the slices (sched_info.pcount), and
// the voluntary and involuntary switches (nvcsw, nivcsw). A task iterator
// (bpf/sched.bpf.c's counts) copies them for every watched thread in one
// read, where /proc costs a pread per thread and formats text; and no
// program runs on the scheduler's path, where a program on sched_switch and
// sched_waking costs the job on every context switch (a pipe ping-pong 14 %
// slower, measured in docs/PERFORMANCE.md). What the counters lack is who
// woke whom: the sched_waking program is attached only while SampleWakers
// says so, and the waker graph is a sample of the window.
//
// Read reads every watched thread each call; a watched thread missing from
// a reading has exited (or left the process by exec's de_thread).

// countsSize is the size of struct sched_counts, the record counts writes.
const countsSize = 56

// countsRecord is struct sched_counts in bpf/sched.bpf.c.
type countsRecord struct {
	tid, tgid, state              uint32
	cpu                           int32
	run, wait, slices, vol, invol uint64
}

func parseCounts(b []byte) countsRecord {
	le := binary.LittleEndian // both targets (bpfel) are little-endian
	return countsRecord{tid: le.Uint32(b), tgid: le.Uint32(b[4:]), state: le.Uint32(b[8:]), cpu: int32(le.Uint32(b[12:])),
		run: le.Uint64(b[16:]), wait: le.Uint64(b[24:]), slices: le.Uint64(b[32:]), vol: le.Uint64(b[40:]), invol: le.Uint64(b[48:])}
}

// countsIter makes the counts iterator's link: over pid's threads only
// (6.1 and later), or, pid 0, over every task of the host.
func countsIter(prog *ebpf.Program, pid int) (*link.Iter, error) {
	if pid == 0 {
		return link.AttachIter(link.IterOptions{Program: prog})
	}
	return taskIter(prog, 4, pid)
}

// taskIter links a task iterator to one process's threads (at 4: the
// pid member) or to one task (at 0: the tid member). cilium/ebpf v0.22
// passes only a map's descriptor, so the link is made here.
func taskIter(prog *ebpf.Program, at, id int) (*link.Iter, error) {
	// union bpf_iter_link_info's task member: tid, pid, pid_fd.
	var info [16]byte
	binary.NativeEndian.PutUint32(info[at:], uint32(id))
	attr := struct {
		progFD, targetFD, attachType, flags uint32
		iterInfo                            uint64
		iterInfoLen                         uint32
		_                                   uint32
	}{progFD: uint32(prog.FD()), attachType: uint32(ebpf.AttachTraceIter), iterInfo: uint64(uintptr(unsafe.Pointer(&info[0]))), iterInfoLen: uint32(len(info))}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&info)
	if errno != 0 {
		return nil, errno
	}
	l, err := link.NewFromFD(int(fd))
	if err != nil {
		return nil, err
	}
	it, ok := l.(*link.Iter)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("the kernel made a %T, not an iterator's link", l)
	}
	return it, nil
}

// watchCounts gives pid its iterator (where the iterators are per
// process).
func (t *Tracer) watchCounts(pid int) error {
	if t.allIter != nil || t.procIters[pid] != nil {
		return nil
	}
	if t.fast != nil {
		it, err := taskIter(t.fast.ProcCounts, 0, pid)
		if err == nil {
			t.procIters[pid] = it
			return nil
		}
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%s: pid %d: %w", What, pid, err)
		}
		if err := t.dropFast(fmt.Errorf("linking it to pid %d: %w", pid, err)); err != nil {
			return err
		}
	}
	it, err := countsIter(t.objs.Counts, pid)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%s: pid %d: %w", What, pid, err)
		}
		// A kernel before 6.1 (no per-process task iterator): one iterator
		// over every task, filtered by the watched bitmap.
		all, err2 := countsIter(t.objs.Counts, 0)
		if err2 != nil {
			return attachError("task iterator", err2)
		}
		for _, it := range t.procIters {
			it.Close()
		}
		clear(t.procIters)
		t.allIter = all
		return nil
	}
	t.procIters[pid] = it
	return nil
}

// Remove stops watching pid (its process exited: its iterator would read
// nothing from now on).
func (t *Tracer) Remove(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it := t.procIters[pid]; it != nil {
		it.Close()
		delete(t.procIters, pid)
	}
	t.removeWaits(pid)
	if pid <= 0 || pid >= watchWords*64 {
		return
	}
	w := uint32(pid / 64)
	var b sbWatch
	if t.objs.Watched.Lookup(w, &b) == nil && b.User&(1<<(pid%64)) != 0 {
		b.User &^= 1 << (pid % 64)
		_ = t.objs.Watched.Update(w, b, ebpf.UpdateExist)
	}
}

// readCounts reads every watched thread's counters into s.
func (t *Tracer) readCounts(s *Snapshot) error {
	s.Complete = true
	if t.allIter != nil {
		return t.readIter(t.allIter, s)
	}
	// In the order of the pids, so that a thread's row stays where it was
	// (Snapshot.GetAt).
	t.pids = t.pids[:0]
	for pid := range t.procIters {
		t.pids = append(t.pids, pid)
	}
	slices.Sort(t.pids)
	if t.fast != nil {
		err := t.readFast(s)
		if !errors.Is(err, errRowsFull) {
			return err
		}
		// More threads than rows: the iterator per process from now on.
		if err := t.dropFast(err); err != nil {
			return err
		}
	}
	for _, pid := range t.pids {
		if err := t.readIter(t.procIters[pid], s); err != nil {
			return err
		}
	}
	return nil
}

// Reader says how the counters are read: "per process" (the threads
// walked by the program, Linux 6.7 and later), "per thread" (an iterator
// step per thread, 6.1 and later), or "every task" (one iterator over the
// host's tasks, the watched bitmap filtering them); "" for the events.
func (t *Tracer) Reader() string {
	switch {
	case !t.o.Counters:
		return ""
	case t.allIter != nil:
		return "every task"
	case t.fast != nil:
		return "per process"
	}
	return "per thread"
}

// loadFast loads the faster reader (bpf/threads.bpf.c): where the kernel
// lacks the task iterator kfuncs (before 6.7) the load fails, and the
// per-process iterator of counts stays.
func (t *Tracer) loadFast() error {
	spec, err := loadTc()
	if err != nil {
		return err
	}
	if t.o.MaxThreads > 0 {
		spec.Maps["rows"].MaxEntries = uint32(t.o.MaxThreads)
		spec.Maps["slots"].MaxEntries = uint32(t.o.MaxThreads)
	}
	var objs tcObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return err
	}
	rows, err := objs.Rows.Memory()
	if err != nil {
		objs.Close()
		return err
	}
	cursor, err := objs.Cursors.Memory()
	if err != nil {
		objs.Close()
		return err
	}
	t.fast, t.rows, t.cursor = &objs, rows, cursor
	return nil
}

// closeFast closes the faster reader's objects (its links are procIters).
func (t *Tracer) closeFast() {
	if t.fast != nil {
		t.fast.Close()
		t.fast, t.rows, t.cursor = nil, nil, nil
	}
}

// dropFast gives up the faster reader (why says why) and links counts to
// each watched process instead.
func (t *Tracer) dropFast(why error) error {
	for _, it := range t.procIters {
		it.Close()
	}
	pids := make([]int, 0, len(t.procIters))
	for pid := range t.procIters {
		pids = append(pids, pid)
	}
	clear(t.procIters)
	t.closeFast()
	t.fastErr = why
	for _, pid := range pids {
		if err := t.watchCounts(pid); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// errRowsFull: the watched processes had more threads than the faster
// reader's rows.
var errRowsFull = errors.New("more threads than the rows of the counters' map")

// readFast runs each process's program (the processes in t.pids' order),
// which appends its threads' rows from the cursor on, then copies the rows
// out of the mapped array.
func (t *Tracer) readFast(s *Snapshot) error {
	var c [12]byte // struct cursor: next, full, walked
	if _, err := t.cursor.WriteAt(c[:], 0); err != nil {
		return fmt.Errorf("%s: resetting the counters' cursor: %w", What, err)
	}
	for _, pid := range t.pids {
		if err := t.readIter(t.procIters[pid], s); err != nil {
			return err
		}
	}
	if _, err := t.cursor.ReadAt(c[:], 0); err != nil {
		return fmt.Errorf("%s: reading the counters' cursor: %w", What, err)
	}
	if binary.NativeEndian.Uint32(c[4:]) != 0 {
		return errRowsFull
	}
	t.walks += int(binary.NativeEndian.Uint32(c[8:]))
	next := int(binary.NativeEndian.Uint32(c[:]))
	if next < t.held {
		if err := t.release(next, t.held); err != nil {
			return err
		}
	}
	t.held = next
	size := next * countsSize
	if cap(t.buf) < size {
		t.buf = make([]byte, size)
	}
	b := t.buf[:size]
	if _, err := t.rows.ReadAt(b, 0); err != nil {
		return fmt.Errorf("%s: reading the counters' rows: %w", What, err)
	}
	s.Threads = slices.Grow(s.Threads, len(b)/countsSize)
	for off := 0; off < len(b); off += countsSize {
		s.Threads = append(s.Threads, threadOf(parseCounts(b[off:off+countsSize])))
	}
	return nil
}

// release drops the references the rows from, to held (threads of a
// process that lost threads or left the reading: a task_struct pinned
// each, about 10 KiB of the kernel's memory, for as long as gpufeed runs).
// Writing a row's slot from user space releases its reference.
func (t *Tracer) release(from, to int) error {
	n := to - from
	keys := make([]uint32, n)
	for i := range keys {
		keys[i] = uint32(from + i)
	}
	if _, err := t.fast.Slots.BatchUpdate(keys, make([]uint64, n), nil); err != nil {
		return fmt.Errorf("%s: releasing the threads held: %w", What, err)
	}
	return nil
}

func threadOf(c countsRecord) Thread {
	return Thread{TID: int(c.tid), PID: int(c.tgid), CPU: int(c.cpu), RunNS: c.run, WaitNS: c.wait,
		Slices: c.slices, Voluntary: c.vol, Involuntary: c.invol, State: StateLetter(c.state)}
}

// readIter runs one iterator and adds its records to s. The iterator's
// descriptor is made and read with plain system calls (no os.File a tick),
// raw ones (no entersyscall): none of them blocks (the read runs the
// program, hundreds of µs at 1,000 threads), and a scheduled system call
// wakes the Go runtime's monitor thread out of its deep sleep to poll every
// 20 µs while the tick runs: 612 of its sleeps in 5 s at 1,000 threads,
// against 227 raw (and the whole process's context switches 1,060 against
// 570), about a tenth of gpufeed's CPU.
func (t *Tracer) readIter(it *link.Iter, s *Snapshot) error {
	fd, errno := createIter(it)
	if errno != 0 {
		return fmt.Errorf("%s: running the counters' iterator: %w", What, errno)
	}
	defer unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	if len(t.buf) == 0 {
		t.buf = make([]byte, 64<<10)
	}
	n := 0 // bytes of a record not yet whole
	for {
		r, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&t.buf[n])), uintptr(len(t.buf)-n))
		if errno == unix.EINTR || errno == unix.EAGAIN {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("%s: reading the counters' iterator: %w", What, errno)
		}
		if r == 0 {
			break
		}
		n += int(r)
		whole := n / countsSize * countsSize
		for off := 0; off < whole; off += countsSize {
			s.Threads = append(s.Threads, threadOf(parseCounts(t.buf[off:off+countsSize])))
		}
		n = copy(t.buf, t.buf[whole:n])
	}
	if n != 0 {
		return fmt.Errorf("%s: the counters' iterator ended within a record (%d bytes of %d)", What, n, countsSize)
	}
	return nil
}

// SampleWakers attaches (on) or detaches the sched_waking program, which
// counts who wakes the watched threads, where the counters are the
// source; with the events it is attached throughout. Attached, it runs on
// every wake-up of the host: kept to a part of the window, its cost to the
// job is that part of what the events cost.
func (t *Tracer) SampleWakers(on bool) error {
	if !t.o.Counters {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case on && t.wake == nil:
		l, err := link.AttachTracing(link.TracingOptions{Program: t.objs.SchedWaking})
		if err != nil {
			return attachError("sched_waking", err)
		}
		t.wake, t.wakeSince = l, monoNow()
	case !on && t.wake != nil:
		t.wake.Close()
		t.wake = nil
		t.wakeNS += monoNow() - t.wakeSince
	}
	return nil
}

// WakersSampled is how long the wake-up program has been attached, where
// the counters are the source (0 with the events: the whole run).
func (t *Tracer) WakersSampled() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.wakeNS
	if t.wake != nil {
		d += monoNow() - t.wakeSince
	}
	return time.Duration(d)
}

// createIter makes an iterator's descriptor from its link (a raw system
// call, as readIter says why); the caller closes it the same way.
func createIter(it *link.Iter) (uintptr, unix.Errno) {
	attr := struct{ linkFD, flags uint32 }{linkFD: uint32(it.FD())}
	fd, _, errno := unix.RawSyscall(unix.SYS_BPF, unix.BPF_ITER_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	return fd, errno
}

//go:build amd64 || arm64

// Package schedbpf reads the scheduling of a set of processes' threads
// from the kernel, in one of two modes.
//
// The counters (Options.Counters, what the sampler uses; counters.go): a
// task iterator copies each watched thread's own counters, those
// schedstat and status print (time on CPU, run-queue wait, slices,
// voluntary and involuntary switches, state, CPU), in one read per
// process. Nothing runs on a context switch; who wakes whom is counted by
// the sched_waking program only while SampleWakers attaches it.
//
// The events: programs on the scheduler's BTF-typed tracepoints
// (sched_switch, sched_waking, sched_wakeup_new, sched_process_exit)
// count per thread the time on CPU, the time runnable on a run queue (from
// the wake-up, or the preemption, to the switch-in), voluntary and
// involuntary switches, the time in uninterruptible sleep (D) and who
// wakes it (the waking thread's id, process and name), read with one batch
// lookup of a map. They run on every switch and wake-up of the host, and
// cost a job that switches often (a pipe ping-pong 14 %, docs/
// PERFORMANCE.md): kept for the benchmark's comparison.
//
// Children the processes fork are followed in the kernel unless NoFollow.
package schedbpf

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
)

// What names the measurement in Unavailable.
const What = "scheduler tracing"

// Options say what to count.
type Options struct {
	// Proc is where /proc is read ("" is /proc): capabilities.
	Proc string
	// NoFollow keeps the set to the pids given (and Add's): children
	// they fork are not counted.
	NoFollow bool
	// MaxThreads sizes the threads' table (0: 65536). Threads past it are
	// counted in Snapshot.Dropped and not read. With the counters it sizes
	// the faster reader's rows (the threads of all watched processes):
	// past them, the iterator per process reads on.
	MaxThreads int
	// Counters reads the kernel's own per-thread counters with a task
	// iterator (counters.go) instead of counting the scheduler's events:
	// nothing runs on a context switch, and the waker graph is counted
	// only while SampleWakers says so.
	Counters bool
	// everyTask makes the counters' one iterator walk every task of the
	// host, as on a kernel before 6.1 (tests).
	everyTask bool
	// WaitsFromProc leaves the threads' waits to /proc (ReadWaits is not
	// loaded): the sampler's tests compare both.
	WaitsFromProc bool
	// stepPerThread keeps the per-process iterator that visits each
	// thread as a step, as on a kernel before 6.7 (tests).
	stepPerThread bool
}

// Tracer is a running count.
type Tracer struct {
	o      Options
	objs   sbObjects
	links  []link.Link
	iter   *link.Iter
	follow bool

	// The counters (counters.go): an iterator per watched process, or
	// allIter over every task where the kernel has no per-process one;
	// the wake-up program's link while attached, since when, and how long
	// it was attached before.
	procIters map[int]*link.Iter
	pids      []int // procIters' keys, sorted for a reading
	allIter   *link.Iter
	buf       []byte
	// fast is the faster reader (bpf/threads.bpf.c) where it loaded:
	// procIters are then its links, one per process's leader; rows and
	// cursor its maps, mapped. fastErr says why it is not used.
	fast    *tcObjects
	rows    *ebpf.Memory
	cursor  *ebpf.Memory
	fastErr error
	// walks counts the faster reader's walks of a process's thread list
	// (the other readings went through the threads it holds); held is the
	// rows whose threads it may hold, the last reading's.
	walks, held int
	// waits is the waits reader (bpf/waits.bpf.c, waits.go) where it
	// loaded; waitsErr says why it did not.
	waits     *waiter
	waitsErr  error
	wake      link.Link
	wakeSince int64
	wakeNS    int64

	mu   sync.Mutex // the watched bitmap's user words; the buffers
	keys []uint32
	vals []sbThread
	gone []uint32
}

// watchWords is the watched bitmap's length in 64-bit words (WATCH_WORDS in
// bpf/sched.bpf.c: PID_MAX_LIMIT on 64-bit over 64).
const watchWords = 4194304 / 64

// Check says, without loading anything, whether this process may trace
// the scheduler: the capabilities, and a kernel with BTF (the programs
// are BTF-typed tracepoints). An error is a *bpfcap.Unavailable.
func Check(proc string) error {
	if err := bpfcap.Check(proc, What); err != nil {
		return err
	}
	if !bpfcap.BTF("") {
		return &bpfcap.Unavailable{What: What, Missing: "a kernel with BTF (CONFIG_DEBUG_INFO_BTF: no /sys/kernel/btf/vmlinux)"}
	}
	return nil
}

// Start loads and attaches the programs and watches pids. An error is a
// *bpfcap.Unavailable saying what would allow it.
func Start(pids []int, o Options) (*Tracer, error) {
	if err := Check(o.Proc); err != nil {
		return nil, err
	}
	spec, err := loadSb()
	if err != nil {
		return nil, fmt.Errorf("%s: the BPF object: %w", What, err)
	}
	if o.MaxThreads > 0 {
		spec.Maps["threads"].MaxEntries = uint32(o.MaxThreads)
	}
	if !switchHasState() {
		if err := spec.Variables["state_arg"].Set(uint32(0)); err != nil {
			return nil, fmt.Errorf("%s: the BPF object: %w", What, err)
		}
	}
	t := &Tracer{o: o}
	if o.Counters {
		// Only the iterator, and the wake-up program for its samples: the
		// others are not verified.
		bpfcap.Stub(spec, "sched_switch", "sched_wakeup_new", "thread_exit", "seed")
		t.procIters = map[int]*link.Iter{}
	}
	if t.follow, err = bpfcap.Load(What, spec, &t.objs, !o.NoFollow, "5.11 or later with BTF"); err != nil {
		return nil, err
	}
	if o.Counters && (t.follow || o.everyTask) {
		// Children are added to the bitmap in the kernel, with no
		// iterator of their own: one over every task reads them.
		if t.allIter, err = countsIter(t.objs.Counts, 0); err != nil {
			t.Close()
			return nil, attachError("task iterator", err)
		}
	}
	if o.Counters && t.allIter == nil {
		if o.stepPerThread {
			t.fastErr = errors.New("not asked for")
		} else {
			t.fastErr = t.loadFast()
		}
	}
	if o.WaitsFromProc {
		t.waitsErr = errors.New("not asked for")
	} else {
		t.waitsErr = t.loadWaits()
	}
	for _, pid := range pids {
		if err := t.watch(pid); err != nil {
			t.Close()
			return nil, err
		}
	}
	if t.follow {
		l, err := bpfcap.AttachFork(What, t.objs.Fork)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.links = append(t.links, l)
	}
	if o.Counters {
		for _, pid := range pids {
			if err := t.watchCounts(pid); err != nil {
				t.Close()
				return nil, err
			}
		}
		return t, nil
	}
	for _, a := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_switch", t.objs.SchedSwitch}, {"sched_waking", t.objs.SchedWaking},
		{"sched_wakeup_new", t.objs.SchedWakeupNew}, {"sched_process_exit", t.objs.ThreadExit}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog})
		if err != nil {
			t.Close()
			return nil, attachError(a.name, err)
		}
		t.links = append(t.links, l)
	}
	if t.iter, err = link.AttachIter(link.IterOptions{Program: t.objs.Seed}); err != nil {
		t.Close()
		return nil, attachError("task iterator", err)
	}
	if err := t.seed(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// switchHasState says whether the kernel's sched_switch tracepoint passes
// prev_state (5.18 and later): its BTF prototype has five parameters (the
// first is the tracepoint's data).
func switchHasState() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return true
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_switch", &td); err != nil {
		return true
	}
	if p, ok := td.Type.(*btf.Pointer); ok {
		if fp, ok := p.Target.(*btf.FuncProto); ok {
			return len(fp.Params) >= 5
		}
	}
	return true
}

func attachError(name string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &bpfcap.Unavailable{What: What, Missing: "attaching to the " + name + " tracepoint needs CAP_PERFMON (or CAP_SYS_ADMIN)", Err: err}
	}
	return &bpfcap.Unavailable{What: What, Missing: "a kernel with BTF-typed tracepoints and task iterators (5.8 or later)", Err: fmt.Errorf("attaching to %s: %w", name, err)}
}

// Add watches one more process: its threads, and its children where
// followed. Its threads get a row at once, saying what each is doing.
func (t *Tracer) Add(pid int) error {
	if err := t.watch(pid); err != nil {
		return err
	}
	if t.o.Counters {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.watchCounts(pid)
	}
	return t.seed()
}

func (t *Tracer) watch(pid int) error {
	if pid <= 0 || pid >= watchWords*64 {
		return fmt.Errorf("%s: pid %d: want a positive pid within the kernel's range", What, pid)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := uint32(pid / 64)
	var b sbWatch
	if err := t.objs.Watched.Lookup(w, &b); err != nil {
		return fmt.Errorf("%s: watching pid %d: %w", What, pid, err)
	}
	if b.User&(1<<(pid%64)) != 0 {
		return nil
	}
	b.User |= 1 << (pid % 64)
	if err := t.objs.Watched.Update(w, b, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("%s: watching pid %d: %w", What, pid, err)
	}
	return nil
}

// seed runs the task iterator: every watched thread without a row gets
// one saying whether it is on a CPU, queued, in D or asleep now.
func (t *Tracer) seed() error {
	if t.iter == nil {
		return nil
	}
	r, err := t.iter.Open()
	if err != nil {
		return fmt.Errorf("%s: running the task iterator: %w", What, err)
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// Following says whether children forked since Start are counted without
// being added.
func (t *Tracer) Following() bool { return t.follow }

// Close detaches the programs and frees the maps.
func (t *Tracer) Close() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	if t.iter != nil {
		t.iter.Close()
		t.iter = nil
	}
	for _, it := range t.procIters {
		it.Close()
	}
	clear(t.procIters)
	if t.allIter != nil {
		t.allIter.Close()
		t.allIter = nil
	}
	if t.wake != nil {
		t.wake.Close()
		t.wake = nil
	}
	t.closeFast()
	if t.waits != nil {
		t.waits.close()
		t.waits = nil
	}
	t.objs.Close()
}

// Thread is one thread's counts up to the reading, the slice, wait or
// uninterruptible sleep in progress included.
type Thread struct {
	TID, PID int
	// CPU is the processor it was last switched in on (-1: not seen).
	CPU int
	// RunNS, WaitNS and Slices are schedstat's three fields as counted
	// since the thread was watched (or born): time on CPU, time runnable
	// on a run queue, times switched in.
	RunNS, WaitNS, Slices uint64
	// DNS is the time in uninterruptible sleep (D).
	DNS uint64
	// Voluntary and Involuntary are the context switches (status's
	// voluntary_ctxt_switches and nonvoluntary_ctxt_switches).
	Voluntary, Involuntary uint64
	// Wakeups counts the times it was woken.
	Wakeups uint64
	// State is the thread's state as /proc/TID/stat shows it (R, S, D, T,
	// t, Z, X, I), or 0 when no event has told it yet.
	State byte
	// Exited says the thread exited; its row is gone after this reading.
	Exited bool
}

// Snapshot is one reading of every watched thread.
type Snapshot struct {
	// At is the reading's time (CLOCK_MONOTONIC, ns).
	At      int64
	Threads []Thread
	// Dropped counts the threads whose row the full table could not hold.
	Dropped uint64
	// Complete says the reading holds every live watched thread (the
	// counters): a thread it lacks has exited.
	Complete bool
	byTID    map[int]int
	indexed  bool // byTID holds this reading's rows
}

// Get returns tid's row, or nil when the reading has none (a thread
// asleep since it was watched and never seeded).
func (s *Snapshot) Get(tid int) *Thread {
	var hint int
	return s.GetAt(tid, &hint)
}

// GetAt is Get starting from where the thread's row was in the last
// reading (*at; updated): the counters' readings list a process's threads
// in the same order each tick, so a tick finds each row there, without the
// index by thread id, which is built only when a row has moved.
func (s *Snapshot) GetAt(tid int, at *int) *Thread {
	if i := *at; i >= 0 && i < len(s.Threads) && s.Threads[i].TID == tid {
		return &s.Threads[i]
	}
	if !s.indexed {
		if s.byTID == nil {
			s.byTID = map[int]int{}
		}
		clear(s.byTID)
		for i := range s.Threads {
			s.byTID[s.Threads[i].TID] = i
		}
		s.indexed = true
	}
	if i, ok := s.byTID[tid]; ok {
		*at = i
		return &s.Threads[i]
	}
	return nil
}

// Read reads every row into s (its slices reused) with batch lookups, then
// deletes the rows of threads that exited.
func (t *Tracer) Read(s *Snapshot) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Threads, s.Dropped, s.Complete, s.indexed = s.Threads[:0], 0, false, false
	if t.o.Counters {
		s.At = monoNow()
		return t.readCounts(s)
	}
	if s.byTID == nil {
		s.byTID = map[int]int{}
	}
	clear(s.byTID)
	s.indexed = true
	if t.keys == nil {
		n := 1024
		t.keys, t.vals = make([]uint32, n), make([]sbThread, n)
	}
	t.gone = t.gone[:0]
	var cursor ebpf.MapBatchCursor
	var err error
	for {
		var n int
		n, err = t.objs.Threads.BatchLookup(&cursor, t.keys, t.vals, nil)
		if errors.Is(err, unix.ENOSPC) {
			// A hash bucket larger than the buffer: grow and start over.
			t.keys, t.vals = make([]uint32, 2*len(t.keys)), make([]sbThread, 2*len(t.vals))
			s.Threads, t.gone, cursor = s.Threads[:0], t.gone[:0], ebpf.MapBatchCursor{}
			clear(s.byTID)
			continue
		}
		s.At = monoNow()
		for i := range n {
			t.add(s, t.keys[i], &t.vals[i])
		}
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("%s: reading the threads' table: %w", What, err)
	}
	var c uint64
	if t.objs.Counters.Lookup(uint32(0), &c) == nil {
		s.Dropped = c
	}
	if len(t.gone) > 0 {
		if _, err := t.objs.Threads.BatchDelete(t.gone, nil); err != nil {
			for _, k := range t.gone {
				_ = t.objs.Threads.Delete(k)
			}
		}
	}
	return nil
}

// Missed counts, since Start, the scheduler events the counting programs
// did not see: those the kernel did not run them for (sched_switch and
// sched_waking's recursion misses: the program was already running on that
// CPU; 0 where the kernel does not report it, before 5.12), and the
// switch-ins seen missing, a thread switched out with no switch-in since
// its last switch-out (on a loaded host a few in a thousand, with no
// recursion miss counted). A missed switch loses a slice, its switch and
// its run or wait time from the rows. It costs a system call per program:
// read it when it is needed, not every tick.
func (t *Tracer) Missed() uint64 {
	var n uint64
	for _, p := range []*ebpf.Program{t.objs.SchedSwitch, t.objs.SchedWaking} {
		if st, err := p.Stats(); err == nil {
			n += st.RecursionMisses
		}
	}
	var unseen uint64
	if t.objs.Counters.Lookup(uint32(3), &unseen) == nil {
		n += unseen
	}
	return n
}

func (t *Tracer) add(s *Snapshot, tid uint32, v *sbThread) {
	if v.Exited != 0 {
		t.gone = append(t.gone, tid)
	}
	s.byTID[int(tid)] = len(s.Threads)
	s.Threads = append(s.Threads, row(tid, v, s.At))
}

func row(tid uint32, v *sbThread, now int64) Thread {
	th := Thread{TID: int(tid), PID: int(v.Tgid), CPU: -1, RunNS: v.RunNs, WaitNS: v.WaitNs, Slices: v.Slices,
		DNS: v.DsleepNs, Voluntary: v.Voluntary, Involuntary: v.Involuntary, Wakeups: v.Wakeups, Exited: v.Exited != 0}
	if v.Slices > 0 {
		th.CPU = int(v.Cpu)
	}
	since := func(ts uint64) uint64 {
		if ts == 0 || int64(ts) > now {
			return 0
		}
		return uint64(now) - ts
	}
	th.RunNS += since(v.OncpuSince)
	th.WaitNS += since(v.QueuedSince)
	th.DNS += since(v.DsleepSince)
	switch {
	case v.Exited != 0:
		th.State = 'X'
	case v.OncpuSince != 0 || v.QueuedSince != 0:
		th.State = 'R'
	case v.Seeded != 0 || v.Voluntary+v.Involuntary > 0:
		th.State = StateLetter(v.LastState)
	}
	return th
}

// StateLetter is the letter /proc shows for a task state word
// (fs/proc/array.c's task_state_array, the kernel's TASK_* bits).
func StateLetter(s uint32) byte {
	switch {
	case s == 0:
		return 'R'
	case s&0x8 != 0: // __TASK_TRACED
		return 't'
	case s&0x4 != 0: // __TASK_STOPPED
		return 'T'
	case s&0x2 != 0 && s&0x400 != 0: // TASK_IDLE
		return 'I'
	case s&0x2 != 0: // TASK_UNINTERRUPTIBLE
		return 'D'
	case s&0x1 != 0: // TASK_INTERRUPTIBLE
		return 'S'
	case s&0x20 != 0: // EXIT_ZOMBIE
		return 'Z'
	case s&0x10 != 0: // EXIT_DEAD
		return 'X'
	}
	return 'S'
}

// Wake is one edge of the waker graph: Waker woke Wakee Count times.
type Wake struct {
	Wakee int
	// Waker is the waking thread and its process (for a wake-up from an
	// interrupt, the thread the interrupt came in on; 0: the idle task).
	Waker, WakerPID int
	WakerComm       string
	Count           uint64
}

// Wakers reads the waker graph: every edge whose wakee is watched.
// Dropped counts the wake-ups whose edge the full table could not hold.
//
// A thread's row holds the edge in progress (its last waker and that
// waker's wake-ups since it took the place of another), which moves to
// the wakers' table when another waker comes. The rows are read before
// and after the table: a row whose edge did not move in between adds its
// edge in progress to the table's; one whose edge moved (a thread whose
// wakers alternate) is read from the table again, so that the edge that
// moved is counted once. What a thread's wakers did while it was read is
// counted in the next reading.
func (t *Tracer) Wakers() (edges []Wake, dropped uint64, err error) {
	before, err := t.pending()
	if err != nil {
		return nil, 0, err
	}
	type key struct{ wakee, waker uint32 }
	at := map[key]int{}
	var k sbWkey
	var v sbWval
	it := t.objs.Wakers.Iterate()
	for it.Next(&k, &v) {
		at[key{k.Wakee, k.Waker}] = len(edges)
		edges = append(edges, Wake{Wakee: int(k.Wakee), Waker: int(k.Waker), WakerPID: int(v.WakerTgid),
			WakerComm: bpfcap.Comm(v.Comm), Count: v.Count})
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: reading the wakers' table: %w", What, err)
	}
	after, err := t.pending()
	if err != nil {
		return nil, 0, err
	}
	for tid, p := range after {
		if b, ok := before[tid]; ok && b.gen != p.gen {
			// The edge in progress before moved to the table while it
			// was read: read that edge again.
			if err := t.objs.Wakers.Lookup(sbWkey{Wakee: tid, Waker: b.waker}, &v); err == nil {
				if i, ok := at[key{tid, b.waker}]; ok {
					edges[i].Count = max(edges[i].Count, v.Count)
				} else {
					at[key{tid, b.waker}] = len(edges)
					edges = append(edges, Wake{Wakee: int(tid), Waker: int(b.waker), WakerPID: int(v.WakerTgid), WakerComm: bpfcap.Comm(v.Comm), Count: v.Count})
				}
			}
		}
		if p.count == 0 {
			continue
		}
		if i, ok := at[key{tid, p.waker}]; ok {
			edges[i].Count += p.count
			continue
		}
		at[key{tid, p.waker}] = len(edges)
		edges = append(edges, Wake{Wakee: int(tid), Waker: int(p.waker), WakerPID: int(p.tgid), WakerComm: p.comm, Count: p.count})
	}
	_ = t.objs.Counters.Lookup(uint32(2), &dropped)
	return edges, dropped, nil
}

// pendingEdge is a row's wake-up edge in progress.
type pendingEdge struct {
	waker, tgid uint32
	comm        string
	count, gen  uint64
}

// pending reads every row's edge in progress, by tid.
func (t *Tracer) pending() (map[uint32]pendingEdge, error) {
	out := map[uint32]pendingEdge{}
	var tid uint32
	var v sbThread
	it := t.objs.Threads.Iterate()
	for it.Next(&tid, &v) {
		if v.WakerCount == 0 && v.WakerGen == 0 {
			continue
		}
		out[tid] = pendingEdge{waker: v.Waker, tgid: v.WakerTgid, comm: bpfcap.Comm(v.WakerComm), count: v.WakerCount, gen: v.WakerGen}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%s: reading the threads' table: %w", What, err)
	}
	return out, nil
}

// Forked counts the children the fork program added.
func (t *Tracer) Forked() uint64 {
	var c uint64
	_ = t.objs.Counters.Lookup(uint32(1), &c)
	return c
}

// monoNow is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monoNow() int64 {
	var ts unix.Timespec
	// Raw: a call that cannot block, made each tick (see readIter).
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// Since is how long ago a Snapshot's At was.
func Since(at int64) time.Duration { return time.Duration(monoNow() - at) }

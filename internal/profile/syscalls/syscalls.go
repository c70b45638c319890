//go:build amd64 || arm64

// Package syscalls counts the system calls of a set of processes per
// thread and per syscall in the kernel (raw_syscalls sys_enter/sys_exit
// as raw tracepoints, attached by name: no tracefs needed) and returns
// strace -c's table (calls, errors, time) for the window. Children the
// processes fork in the window are followed in the kernel where the
// kernel has BTF, else when Add is told of them.
//
// Another command takes the table for a set of pids and a duration with
// Summarize; diagnose starts a Tracer beside the CPU profile.
package syscalls

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// What names the measurement in Unavailable.
const What = "syscall summary"

// Options say how to count.
type Options struct {
	// Proc is where /proc is read ("" is /proc): capabilities, threads'
	// names.
	Proc string
	// NoFollow keeps the set to the pids given (and Add's): children they
	// fork are not counted.
	NoFollow bool

	// oneSlot puts every thread's call in progress in one slot, so that
	// all but one thread go through the starts hash (tests of that path).
	oneSlot bool
}

// Tracer is a running count.
type Tracer struct {
	o       Options
	objs    scObjects
	links   []link.Link
	started time.Time
	follow  bool

	mu      sync.Mutex
	stopped bool

	addMu sync.Mutex // the watched bitmap's user words
}

// watchWords is the watched bitmap's length in 64-bit words (WATCH_WORDS in
// bpf/syscalls.bpf.c: PID_MAX_LIMIT on 64-bit over 64).
const watchWords = 4194304 / 64

// Check says, without loading anything, whether this process may count
// syscalls; an error is a *bpfcap.Unavailable naming what is missing.
func Check(proc string) error { return bpfcap.Check(proc, What) }

// Start loads the programs, watches pids and starts counting. An error is
// a *bpfcap.Unavailable saying what would allow it.
func Start(pids []int, o Options) (*Tracer, error) {
	t, err := Load(pids, o)
	if err != nil {
		return nil, err
	}
	if err := t.Attach(); err != nil {
		return nil, err
	}
	return t, nil
}

// Load loads the programs and watches pids without counting yet: loading
// (the kernel's verifier) is the slow part, seconds on a loaded host, and
// a caller that starts other probes too loads them all first, then
// attaches them together so that their windows are one (Attach). An
// error is a *bpfcap.Unavailable saying what would allow it.
func Load(pids []int, o Options) (*Tracer, error) {
	if err := Check(o.Proc); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil { // kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK
		return nil, &bpfcap.Unavailable{What: What, Missing: "a higher locked-memory limit (ulimit -l) for BPF maps", Err: err}
	}
	spec, err := loadSc()
	if err != nil {
		return nil, fmt.Errorf("syscall summary: the BPF object: %w", err)
	}
	follow := !o.NoFollow && bpfcap.BTF("")
	if !follow {
		delete(spec.Programs, "fork") // BTF-typed: needs the kernel's BTF
	}
	if o.oneSlot {
		if err := spec.Variables["slot_mask"].Set(uint32(0)); err != nil {
			return nil, fmt.Errorf("syscall summary: the BPF object: %w", err)
		}
	}
	t := &Tracer{o: o, follow: follow}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, loadError(err)
	}
	for _, pid := range pids {
		if err := t.Add(pid); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// Attach starts counting: the window starts here. On an error the
// tracer is closed.
func (t *Tracer) Attach() error {
	for _, a := range []struct {
		name string
		prog *ebpf.Program
	}{{"sys_enter", t.objs.SysEnter}, {"sys_exit", t.objs.SysExit}, {"sched_process_exit", t.objs.ThreadExit}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: a.name, Program: a.prog})
		if err != nil {
			t.close()
			return attachError(a.name, err)
		}
		t.links = append(t.links, l)
	}
	if t.follow && t.objs.Fork != nil {
		l, err := link.AttachTracing(link.TracingOptions{Program: t.objs.Fork})
		if err != nil {
			t.close()
			return attachError("sched_process_fork", err)
		}
		t.links = append(t.links, l)
	}
	t.started = time.Now()
	return nil
}

func loadError(err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) {
		return &bpfcap.Unavailable{What: What, Missing: "loading eBPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root); " +
			"in a container, a seccomp profile that allows bpf()", Err: err}
	}
	return &bpfcap.Unavailable{What: What, Missing: "a kernel that accepts this BPF program (5.12 or later)", Err: err}
}

func attachError(name string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &bpfcap.Unavailable{What: What, Missing: "attaching to the " + name + " tracepoint needs CAP_PERFMON (or CAP_SYS_ADMIN)", Err: err}
	}
	return &bpfcap.Unavailable{What: What, Missing: "a kernel with raw tracepoints (4.17 or later)", Err: fmt.Errorf("attaching to %s: %w", name, err)}
}

// Add watches one more process (its threads, and its children where
// followed).
func (t *Tracer) Add(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("syscall summary: pid %d: want a positive pid", pid)
	}
	t.addMu.Lock()
	defer t.addMu.Unlock()
	one := uint32(1)
	if err := t.objs.Pids.Update(uint32(pid), one, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("syscall summary: watching pid %d: %w", pid, err)
	}
	// The bitmap the programs test: only this process writes the `user`
	// words (under addMu), the fork program only the `forked` ones.
	if pid >= watchWords*64 {
		return fmt.Errorf("syscall summary: pid %d: above the kernel's largest pid", pid)
	}
	w := uint32(pid / 64)
	var b scWatch
	if err := t.objs.Watched.Lookup(w, &b); err != nil {
		return fmt.Errorf("syscall summary: watching pid %d: %w", pid, err)
	}
	b.User |= 1 << (pid % 64)
	if err := t.objs.Watched.Update(w, b, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("syscall summary: watching pid %d: %w", pid, err)
	}
	return nil
}

// Following says whether children forked in the window are counted
// without being added.
func (t *Tracer) Following() bool { return t.follow }

func (t *Tracer) close() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	t.objs.Close()
}

// Stop detaches the programs, reads the tables and returns the summary.
func (t *Tracer) Stop() *profile.SyscallSummary {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return &profile.SyscallSummary{State: profile.StateOff}
	}
	t.stopped = true
	for _, l := range t.links {
		l.Close() // first: nothing changes the maps while they are read
	}
	t.links = nil
	window := time.Since(t.started)
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	out := t.read(window, now.Nano())
	t.objs.Close()
	return out
}

func (t *Tracer) read(window time.Duration, nowNS int64) *profile.SyscallSummary {
	out := &profile.SyscallSummary{State: profile.StateOn, WindowNS: window.Nanoseconds()}
	var pid, v uint32
	it := t.objs.Pids.Iterate()
	for it.Next(&pid, &v) {
		out.PIDs = append(out.PIDs, int(pid))
	}
	sort.Ints(out.PIDs)
	var c uint64
	if err := t.objs.Counters.Lookup(uint32(0), &c); err == nil {
		out.Dropped = c
	}
	threads := map[uint32]*profile.ThreadSyscalls{}
	totals := map[int]*profile.SyscallStat{}
	var k scKey
	var s scStat
	it = t.objs.Stats.Iterate()
	for it.Next(&k, &s) {
		th := threads[k.Tid]
		if th == nil {
			th = &profile.ThreadSyscalls{PID: int(s.Tgid), TID: int(k.Tid), Comm: bpfcap.Comm(s.Comm)}
			threads[k.Tid] = th
		}
		row := profile.SyscallStat{Name: Name(int(k.Nr)), Nr: int(k.Nr), Calls: s.Calls, Errors: s.Errors,
			TimeNS: int64(s.Ns), MaxNS: int64(s.MaxNs)}
		th.Syscalls = append(th.Syscalls, row)
		th.Calls += s.Calls
		th.Errors += s.Errors
		th.TimeNS += int64(s.Ns)
		tot := totals[row.Nr]
		if tot == nil {
			tot = &profile.SyscallStat{Name: row.Name, Nr: row.Nr}
			totals[row.Nr] = tot
		}
		tot.Calls += row.Calls
		tot.Errors += row.Errors
		tot.TimeNS += row.TimeNS
		tot.MaxNS = max(tot.MaxNS, row.MaxNS)
	}
	// The calls still in progress: a thread blocked the whole window
	// returned nothing, but waited.
	if err := t.objs.Counters.Lookup(uint32(2), &c); err == nil {
		out.FutexDropped = c
	}
	words := map[wordKey]*profile.FutexWord{}
	word := func(pid int, addr uint64) *profile.FutexWord {
		w := words[wordKey{pid, addr}]
		if w == nil {
			w = &profile.FutexWord{PID: pid, Addr: addr}
			words[wordKey{pid, addr}] = w
		}
		return w
	}
	var fk scFkey
	var fs scFstat
	it = t.objs.Futexes.Iterate()
	for it.Next(&fk, &fs) {
		w := word(int(fk.Tgid), fk.Uaddr)
		ft := profile.FutexThread{TID: int(fk.Tid), Calls: fs.Calls, TimeNS: int64(fs.Ns)}
		if th := threads[fk.Tid]; th != nil {
			ft.Comm = th.Comm
		}
		if fk.Kind == futexWait {
			w.Waiters = append(w.Waiters, ft)
			w.WaitNS += ft.TimeNS
		} else {
			w.Wakers = append(w.Wakers, ft)
		}
	}
	for tid, st := range t.inProgress() {
		tgid, alive := t.tgidOf(int(tid))
		if !alive {
			continue // exited inside the call (exit, execve's old image)
		}
		since := min(nowNS-int64(st.Ts), window.Nanoseconds())
		if since < 0 {
			since = 0
		}
		th := threads[tid]
		if th == nil {
			th = &profile.ThreadSyscalls{PID: tgid, TID: int(tid), Comm: t.threadComm(tgid, int(tid))}
			threads[tid] = th
		}
		th.InProgress = &profile.PendingSyscall{Name: Name(int(st.Nr)), Nr: int(st.Nr), SinceNS: since}
		if st.Kind == futexWait {
			w := word(tgid, st.Uaddr)
			w.WaitNS += since
			i := slices.IndexFunc(w.Waiters, func(f profile.FutexThread) bool { return f.TID == int(tid) })
			if i < 0 {
				w.Waiters = append(w.Waiters, profile.FutexThread{TID: int(tid), Comm: th.Comm})
				i = len(w.Waiters) - 1
			}
			w.Waiters[i].TimeNS += since
		}
	}
	for _, w := range words {
		byTime := func(a, b profile.FutexThread) int {
			return cmp.Or(cmp.Compare(b.TimeNS, a.TimeNS), cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.TID, b.TID))
		}
		slices.SortFunc(w.Waiters, byTime)
		slices.SortFunc(w.Wakers, byTime)
		if len(w.Waiters) > 0 {
			out.Futexes = append(out.Futexes, *w)
		}
	}
	slices.SortFunc(out.Futexes, func(a, b profile.FutexWord) int {
		return cmp.Or(cmp.Compare(b.WaitNS, a.WaitNS), cmp.Compare(a.PID, b.PID), cmp.Compare(a.Addr, b.Addr))
	})
	if len(out.Futexes) > profile.MaxFutexWords {
		out.Futexes = out.Futexes[:profile.MaxFutexWords]
	}
	for _, th := range threads {
		profile.SortSyscalls(th.Syscalls)
		out.Threads = append(out.Threads, *th)
	}
	sort.Slice(out.Threads, func(i, j int) bool {
		a, b := out.Threads[i], out.Threads[j]
		if a.TimeNS != b.TimeNS {
			return a.TimeNS > b.TimeNS
		}
		return a.TID < b.TID
	})
	for _, r := range totals {
		out.Totals = append(out.Totals, *r)
	}
	profile.SortSyscalls(out.Totals)
	return out
}

// inProgress reads the calls in progress: the slots' and the starts hash's
// entries with a start time, by thread.
func (t *Tracer) inProgress() map[uint32]scStart {
	out := map[uint32]scStart{}
	keys := make([]uint32, 1024)
	vals := make([]scStart, 1024)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := t.objs.Slots.BatchLookup(&cursor, keys, vals, nil)
		for _, v := range vals[:n] {
			if v.Tid != 0 && v.Ts != 0 {
				out[v.Tid] = v
			}
		}
		if err != nil {
			if !errors.Is(err, ebpf.ErrKeyNotExist) { // ErrKeyNotExist: the end
				// A kernel without batch lookups: element by element.
				var i uint32
				var v scStart
				for it := t.objs.Slots.Iterate(); it.Next(&i, &v); {
					if v.Tid != 0 && v.Ts != 0 {
						out[v.Tid] = v
					}
				}
			}
			break
		}
	}
	var tid uint32
	var st scStart
	for it := t.objs.Starts.Iterate(); it.Next(&tid, &st); {
		if st.Ts != 0 {
			out[tid] = st
		}
	}
	return out
}

type wordKey struct {
	pid  int
	addr uint64
}

// futexWait and futexWake are the kinds the BPF program gives futex calls
// (FUTEX_KIND_* in bpf/syscalls.bpf.c).
const (
	futexWait = 1
	futexWake = 2
)

// tgidOf reads which process thread tid belongs to (its Tgid line), and
// whether it is still there.
func (t *Tracer) tgidOf(tid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(t.proc(), strconv.Itoa(tid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

func (t *Tracer) threadComm(pid, tid int) string {
	b, err := os.ReadFile(filepath.Join(t.proc(), strconv.Itoa(pid), "task", strconv.Itoa(tid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (t *Tracer) proc() string {
	if t.o.Proc == "" {
		return "/proc"
	}
	return t.o.Proc
}

// Name is syscall nr's name on this architecture ("syscall_N" where the
// table has none).
func Name(nr int) string {
	if n, ok := names[nr]; ok {
		return n
	}
	return "syscall_" + strconv.Itoa(nr)
}

// Summarize counts the syscalls of pids (and, unless o.NoFollow, the
// children they fork) for d, or until ctx is done, and returns the table.
// An error before counting started is a *bpfcap.Unavailable naming what
// is missing, or the reason a pid could not be watched.
func Summarize(ctx context.Context, pids []int, d time.Duration, o Options) (*profile.SyscallSummary, error) {
	if len(pids) == 0 {
		return nil, errors.New("syscall summary: no pids")
	}
	t, err := Start(pids, o)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return t.Stop(), nil
}

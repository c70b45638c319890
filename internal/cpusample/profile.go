// Package cpusample samples where a job's threads spend their CPU: a software
// cpu-clock perf event on every CPU (per-CPU events see an already running
// process on hosts where per-task events attached to it deliver nothing,
// as on virtual machines; the eBPF profilers sample the same way), at a
// modest rate, keeping the samples of the job's processes. Each sample's
// user frames are mapped through PROC/PID/maps to their file and ELF
// symbol (cached per file identity, device and inode) and the sample is
// charged to what that code is (profile.Category): the CUDA driver's
// launches, syncs or other calls, the Python interpreter, the framework's
// CPU operators, decode libraries, copies, locks, the kernel.
//
// It needs CAP_PERFMON (or CAP_SYS_ADMIN) or kernel.perf_event_paranoid
// at 0 or below; Check says which is missing.
package cpusample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// DefaultHz is the sampling rate per CPU: off the timer's multiples, cheap
// (a few hundred samples a second on a small host).
const DefaultHz = 99

// Options say what to sample.
type Options struct {
	// Proc is where /proc is read (its sys/kernel/perf_event_paranoid and
	// self/status too); "" is /proc.
	Proc string
	// Hz is the rate per CPU (0: DefaultHz).
	Hz int
	// Keep says whether a process is the job's; it is asked once per pid,
	// from the profiler's own goroutine.
	Keep func(pid int) bool
	// Poll is how often the buffers are read (0: 100 ms).
	Poll time.Duration
}

// Unavailable says why the profile cannot be taken and what would allow it.
type Unavailable struct {
	// Missing is the capability or setting that would show it.
	Missing string
	Err     error
}

func (u *Unavailable) Error() string {
	if u.Err != nil {
		return fmt.Sprintf("CPU profile not available: %v: %s", u.Err, u.Missing)
	}
	return "CPU profile not available: " + u.Missing
}

func (u *Unavailable) Unwrap() error { return u.Err }

// CannotTell is what a report without the profile cannot tell apart: the
// classes a launch thread on a CPU through the GPU's idle time may be.
const CannotTell = "a saturated launch thread's time in CUDA launch calls, in driver syncs (spinning) and in its own " +
	"preprocessing (decoding, CPU operators, the interpreter) reads the same from /proc: submission-bound, " +
	"sync-bound (spinning) and preprocessing-bound cannot be told apart"

const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// Check says, without opening anything, whether this process may sample
// every CPU: kernel.perf_event_paranoid at 0 or below, or CAP_PERFMON or
// CAP_SYS_ADMIN in its effective set. A nil error does not promise the
// kernel allows it (a seccomp filter may still refuse): Start says.
func Check(proc string) error {
	if proc == "" {
		proc = "/proc"
	}
	pp := filepath.Join(proc, "sys/kernel/perf_event_paranoid")
	b, err := os.ReadFile(pp)
	if errors.Is(err, os.ErrNotExist) {
		return &Unavailable{Missing: "this kernel has no perf events (" + pp + " is absent; CONFIG_PERF_EVENTS)"}
	}
	if err != nil {
		return &Unavailable{Missing: "reading " + pp, Err: err}
	}
	level, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return &Unavailable{Missing: fmt.Sprintf("%s: want an integer, got %q", pp, strings.TrimSpace(string(b)))}
	}
	if level <= 0 {
		return nil
	}
	caps, err := bpfcap.EffectiveCaps(filepath.Join(proc, "self/status"))
	if err != nil {
		return &Unavailable{Missing: "reading the capabilities", Err: err}
	}
	if caps&(1<<capPerfmon) != 0 || caps&(1<<capSysAdmin) != 0 {
		return nil
	}
	return &Unavailable{Missing: fmt.Sprintf("sampling every CPU needs CAP_PERFMON (or CAP_SYS_ADMIN, or root), "+
		"or kernel.perf_event_paranoid at 0 or below (it is %d)", level)}
}

// Profiler is a running profile.
type Profiler struct {
	o       Options
	rings   []*ring
	started time.Time
	stop    chan struct{}
	done    chan struct{}
	// timer is the loop's next reading of the buffers, put off by Drain.
	timer *time.Timer

	mu         sync.Mutex
	lost       uint64
	unresolved int
	keep       map[int]bool
	procs      map[int]*procMaps
	files      map[string]*elfFile
	threads    map[int]*threadAgg
	frames     []frame
}

type procMaps struct {
	maps   []mapping
	reread time.Time
	// size is the address space's size (statm, pages) when maps was read.
	size uint64
	err  error
}

type threadAgg struct {
	pid     int
	comm    string
	samples int
	cats    map[profile.Category]int
	syms    map[frame]*profile.SymbolSamples
}

// Start opens one event per online CPU and reads them until Stop. An
// error is an *Unavailable saying what would allow it.
func Start(o Options) (*Profiler, error) {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Hz <= 0 {
		o.Hz = DefaultHz
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.Keep == nil {
		return nil, errors.New("cpusample: no Keep")
	}
	if err := Check(o.Proc); err != nil {
		return nil, err
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, &Unavailable{Missing: "the online CPUs are not known", Err: err}
	}
	p := &Profiler{o: o, stop: make(chan struct{}), done: make(chan struct{}), keep: map[int]bool{},
		procs: map[int]*procMaps{}, files: map[string]*elfFile{}, threads: map[int]*threadAgg{}}
	for _, cpu := range cpus {
		r, err := openRing(cpu, o.Hz)
		if err != nil {
			p.closeRings()
			return nil, &Unavailable{Missing: missingFor(err), Err: fmt.Errorf("perf_event_open on CPU %d: %w", cpu, err)}
		}
		p.rings = append(p.rings, r)
	}
	for _, r := range p.rings {
		if err := r.enable(); err != nil {
			p.closeRings()
			return nil, &Unavailable{Missing: "the kernel refused to start the event", Err: err}
		}
	}
	p.started = time.Now()
	p.timer = time.NewTimer(o.Poll)
	go p.loop()
	return p, nil
}

func missingFor(err error) string {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return "sampling every CPU needs CAP_PERFMON (or CAP_SYS_ADMIN, or root), or kernel.perf_event_paranoid at 0 or below; " +
			"in a container, a seccomp profile that allows perf_event_open"
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return "a kernel with software perf events (CONFIG_PERF_EVENTS)"
	case errors.Is(err, unix.EMFILE):
		return "a higher open-files limit (ulimit -n): one descriptor per CPU"
	}
	return "perf events that this kernel accepts"
}

func onlineCPUs() ([]int, error) {
	var set unix.CPUSet
	// Every CPU the kernel has online, not gpufeed's own affinity.
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, err
		}
		var out []int
		for i := 0; i < 1024; i++ {
			if set.IsSet(i) {
				out = append(out, i)
			}
		}
		return out, nil
	}
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("/sys/devices/system/cpu/online: want a CPU list, got %q", b)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("/sys/devices/system/cpu/online: want a CPU list, got %q", b)
			}
		}
		for c := a; c <= z; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

func (p *Profiler) loop() {
	defer close(p.done)
	defer p.timer.Stop()
	for {
		select {
		case <-p.stop:
			p.drainAll()
			return
		case <-p.timer.C:
			p.drainAll()
			p.timer.Reset(p.o.Poll)
		}
	}
}

// Drain reads the buffers now, and puts the profiler's own next reading
// off by one and a half Poll: called at every tick of a sampler ticking at
// Poll or faster, it takes the reading into that wake-up, and the
// profiler's goroutine never wakes. Its own wake-ups were about a tenth of
// gpufeed's CPU on a 1,000-thread job in this project's virtual machine
// (docs/PERFORMANCE.md). The buffers hold about a second of samples at the
// full rate, so readings stay well within it either way.
func (p *Profiler) Drain() {
	p.drainAll()
	p.timer.Reset(p.o.Poll * 3 / 2)
}

func (p *Profiler) drainAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rings {
		r.drain(p.add, &p.lost)
	}
}

func (p *Profiler) closeRings() {
	for _, r := range p.rings {
		r.close()
	}
	p.rings = nil
}

// add charges one sample to its thread; p.mu held.
func (p *Profiler) add(s *sample) {
	if s.pid <= 0 {
		return
	}
	keep, seen := p.keep[s.pid]
	if !seen {
		keep = p.o.Keep(s.pid)
		p.keep[s.pid] = keep
	}
	if !keep {
		return
	}
	p.frames = p.frames[:0]
	users := s.user
	if len(users) > 4 {
		users = users[:4] // past its first callers a stack without frame pointers is not to be trusted
	}
	for _, ip := range users {
		f, ok := p.resolve(s.pid, ip)
		if !ok {
			if len(p.frames) == 0 {
				p.unresolved++
			}
			continue
		}
		p.frames = append(p.frames, f)
	}
	// A leaf that does not settle the sample (the C library's system-call
	// wrappers, the vDSO) usually runs without a frame of its own, and the
	// kernel's frame-pointer walk from it skips its caller: the first
	// caller it reports is the caller's caller, or, past code built without
	// frame pointers (the CUDA driver), whatever the frame register held
	// (the interpreter). The caller's return address is on top of the
	// sampled stack: a yielding sync's sched_yield is the driver's wait,
	// not the thread's own kernel time.
	if len(p.frames) == 0 || !settles(p.frames[0]) {
		if f, ok := p.scanStack(s); ok {
			if len(p.frames) == 0 {
				p.frames = append(p.frames, f)
			} else {
				p.frames = append(p.frames[:1], append([]frame{f}, p.frames[1:]...)...)
			}
		}
	}
	p.nameDriverEntry(s, p.frames)
	// No frame settled it only where the leaf did not and the stack
	// scan above found nothing that does: scanning again would find nothing.
	cat, at, _ := categorize(s.kernel, p.frames)
	t := p.threads[s.tid]
	if t == nil {
		t = &threadAgg{pid: s.pid, cats: map[profile.Category]int{}, syms: map[frame]*profile.SymbolSamples{}}
		if b, err := os.ReadFile(filepath.Join(p.o.Proc, strconv.Itoa(s.pid), "task", strconv.Itoa(s.tid), "comm")); err == nil {
			t.comm = strings.TrimSpace(string(b))
		}
		p.threads[s.tid] = t
	}
	t.samples++
	t.cats[cat]++
	key := frame{file: at.file, sym: at.sym}
	if len(t.syms) >= 4096 {
		key = frame{file: "(more)"} // bounded: a thread's distinct symbols beyond this are pooled
	}
	ss := t.syms[key]
	if ss == nil {
		ss = &profile.SymbolSamples{Symbol: key.sym, File: key.file, Category: cat}
		t.syms[key] = ss
	}
	ss.Samples++
}

func settles(f frame) bool {
	_, ok := classify(f.file, f.sym)
	return ok
}

// scanStack returns the first word of the sampled user stack that is an
// address in code that settles a sample's category (see stackBytes).
func (p *Profiler) scanStack(s *sample) (frame, bool) {
	pm := p.procs[s.pid]
	if pm == nil {
		return frame{}, false
	}
	for i := 0; i+8 <= len(s.stack); i += 8 {
		w := binary.LittleEndian.Uint64(s.stack[i:])
		if _, ok := find(pm.maps, w); !ok {
			continue
		}
		f, ok := p.resolve(s.pid, w)
		if !ok {
			continue
		}
		if _, settles := classify(f.file, f.sym); settles {
			return f, true
		}
	}
	return frame{}, false
}

// nameDriverEntry gives the first driver frame among frames, where its
// code has no name (the released driver names only its exported entry
// points; its launches and waits run in internal code), the name of the
// driver entry point the thread is in: the first word of the sampled user
// stack that is an address in one of the driver's cu* functions (the entry
// point's return address into itself; the driver has no frame pointers for
// the kernel to walk). An internal function that has a name keeps it.
func (p *Profiler) nameDriverEntry(s *sample, frames []frame) {
	for i, f := range frames {
		if !driverFile.MatchString(f.file) {
			continue
		}
		if f.sym != "" {
			return
		}
		pm := p.procs[s.pid]
		if pm == nil {
			return
		}
		for j := 0; j+8 <= len(s.stack); j += 8 {
			w := binary.LittleEndian.Uint64(s.stack[j:])
			if _, ok := find(pm.maps, w); !ok {
				continue
			}
			if e, ok := p.resolve(s.pid, w); ok && e.file == f.file && strings.HasPrefix(e.sym, "cu") {
				frames[i].sym = e.sym
				return
			}
		}
		return
	}
}

// resolve maps one user address of pid to its file and symbol, reading the
// process's maps again (at most every 200 ms) when no mapping holds it.
func (p *Profiler) resolve(pid int, ip uint64) (frame, bool) {
	pm := p.procs[pid]
	if pm == nil {
		pm = &procMaps{}
		p.procs[pid] = pm
		p.readMaps(pid, pm, p.addressSpace(pid))
	}
	m, ok := find(pm.maps, ip)
	if !ok && time.Since(pm.reread) > 200*time.Millisecond {
		if size, changed := p.mapsChanged(pid, pm); changed {
			p.readMaps(pid, pm, size)
			m, ok = find(pm.maps, ip)
		}
	}
	if !ok {
		return frame{}, false
	}
	base := filepath.Base(m.path)
	if m.path == "" || strings.HasPrefix(m.path, "[") {
		return frame{file: m.path}, true
	}
	key := m.dev + ":" + strconv.FormatUint(m.inode, 10)
	if m.inode == 0 {
		key = m.path
	}
	ef := p.files[key]
	if ef == nil {
		ef = openELF(filepath.Join(p.o.Proc, strconv.Itoa(pid), "root", strings.TrimSuffix(m.path, " (deleted)")))
		p.files[key] = ef
	}
	return frame{file: base, sym: ef.lookup(ip - m.start + m.off)}, true
}

// mapsChanged says whether pid's address space changed size since its
// maps were read (statm: one short line). An address in no mapping asks
// for a re-read (code mapped since: dlopen, a JIT), but most such
// addresses are no address at all: past a function built without frame
// pointers, the kernel's frame-pointer walk reports whatever the register
// held. Re-reading maps for each, every 200 ms, cost more than the rest of
// the profile on a 1,000-thread job (its maps has a line or two per thread's
// stack: 2,000 lines, about 2 ms a read). A mapping added changes the size.
// size is the size now (0 when it could not be read: the maps are read).
func (p *Profiler) mapsChanged(pid int, pm *procMaps) (size uint64, changed bool) {
	size = p.addressSpace(pid)
	if size == 0 || size != pm.size {
		return size, true
	}
	pm.reread = time.Now()
	return size, false
}

// addressSpace is pid's address-space size in pages (0: not read).
func (p *Profiler) addressSpace(pid int) uint64 {
	size, _ := procfs.AddressSpacePages(filepath.Join(p.o.Proc, strconv.Itoa(pid), "statm"))
	return size
}

// readMaps reads pid's maps; size is its address-space size, read just
// before (0: not known).
func (p *Profiler) readMaps(pid int, pm *procMaps, size uint64) {
	pm.reread = time.Now()
	pm.size = size
	name := filepath.Join(p.o.Proc, strconv.Itoa(pid), "maps")
	b, err := os.ReadFile(name)
	if err != nil {
		pm.err = err
		return
	}
	if ms, err := parseMaps(name, b); err == nil {
		pm.maps = ms
	} else {
		pm.err = err
	}
}

// Stop ends sampling, reads what is left and returns the profile.
func (p *Profiler) Stop() *profile.CPUProfile {
	close(p.stop)
	<-p.done
	window := time.Since(p.started)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &profile.CPUProfile{State: "on", FrequencyHz: p.o.Hz, CPUs: len(p.rings), WindowNS: window.Nanoseconds(),
		Lost: p.lost, Unresolved: p.unresolved, Threads: []profile.ThreadCPU{}}
	p.closeRings()
	for tid, t := range p.threads {
		tc := profile.ThreadCPU{PID: t.pid, TID: tid, Comm: t.comm, Samples: t.samples, Categories: t.cats}
		for _, s := range t.syms {
			tc.Top = append(tc.Top, *s)
		}
		sortSyms(tc.Top)
		if len(tc.Top) > 12 {
			tc.Top = tc.Top[:12]
		}
		out.Threads = append(out.Threads, tc)
	}
	out.SortThreads()
	return out
}

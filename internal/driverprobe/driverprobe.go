//go:build amd64 || arm64

// Package driverprobe counts a job's CUDA driver calls per thread with
// eBPF uprobes on the driver library each process maps (libcuda.so.1, or
// gpufeed's simulated driver): kernel launches, graph launches, copies by
// direction and form, allocations and frees, and the time inside the
// synchronisations (entry and return probes). The probes are placed once
// per file (device and inode), for every process that maps it, through
// uprobe_multi links (6.6 and later; elsewhere one probe per entry point
// through the uprobe perf-event PMU: no tracefs needed); the BPF program keeps
// the job's processes only and adds up in the kernel. A launch costs one
// probe hit and one hash update.
package driverprobe

import (
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
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// What names the measurement in Unavailable.
const What = "CUDA driver probes"

// Options say what to probe.
type Options struct {
	// Proc is where /proc is read ("" is /proc).
	Proc string
	// Rescan is how often the watched processes' maps are read again for a
	// driver library loaded since (0: 500 ms): PyTorch loads libcuda at
	// its first CUDA call.
	Rescan time.Duration
	// NoFollow keeps the set to the pids given and added.
	NoFollow bool
	// OnePerEntry places one uprobe per entry point even where the kernel
	// has uprobe_multi links (6.6 and later), as on older kernels: each
	// is removed on its own, a tenth of a second or more each.
	OnePerEntry bool
	// Continuous keeps the launch probes on all the window: exact counts,
	// at one probe hit per launch. Otherwise they are on in bursts sized
	// so that their cost stays within Budget of a launch-bound thread's
	// time, and launches per second are measured over the bursts.
	Continuous bool
	// Budget is the share of a launching thread's time the launch probes
	// may cost (0: 2 %); HitCost what one probe hit is assumed to cost
	// (0: 25 us: the wall-clock cost seen on a loaded virtual machine, whose
	// CPU cost per hit is 0.9 us; bare metal is 1-3 us).
	Budget  float64
	HitCost time.Duration
	// Period is the burst cycle (0: 1 s); the first burst is a twentieth
	// of it, the shortest MinBurst (0: 20 ms).
	Period   time.Duration
	MinBurst time.Duration
	// MaxDuty is the largest share of each period the launch probes are
	// on once launches are too many to probe all the window (0: a tenth).
	// The rate a burst reads is a wall-clock rate: a launch-bound thread
	// that a crowded host gives a fraction of a CPU reads a few thousand
	// launches a second, and sizing from HitCost alone kept the probes on
	// a third of the time, where each hit costs the thread 0.9 us of CPU
	// on a 5 us launch (15 % while on: 5 % of its launches lost). At a
	// tenth the worst case is 1.5 %.
	MaxDuty float64
}

// IsDriver says whether a mapped file is a CUDA driver library.
func IsDriver(path string) (ok, simulated bool) {
	base := filepath.Base(strings.TrimSuffix(path, " (deleted)"))
	if base == simcuda.LibName {
		return true, true
	}
	return strings.HasPrefix(base, "libcuda.so"), false
}

// Check says, without loading anything, whether this process may probe
// the driver; an error is a *bpfcap.Unavailable naming what is missing.
func Check(proc string) error {
	if err := bpfcap.Check(proc, What); err != nil {
		return err
	}
	return bpfcap.Uprobes("", What)
}

// Prober is a running count.
type Prober struct {
	o      Options
	objs   dpObjects
	follow bool
	// multi: each file's entry points are probed by uprobe_multi links
	// (one for the launches, one for the other calls, one for the syncs'
	// returns), placed and removed together.
	multi  bool
	stop   chan struct{}
	done   chan struct{}
	closed chan struct{}

	mu      sync.Mutex
	started time.Time
	files   map[string]*probedFile // by device:inode
	// sizes is each watched process's address-space size (pages) when its
	// maps were last read (scan's goroutine only).
	sizes   map[int]uint64
	links   []link.Link // the probes on all the window (and the fork program)
	scanErr error
	stopped bool

	// The launch probes: on in bursts unless Continuous.
	launchOn  bool
	onSince   time.Time
	probedNS  int64
	burst     time.Duration
	bursts    int
	lastCount uint64
}

type probedFile struct {
	lib    profile.DriverLibrary
	ex     *link.Executable
	launch []link.Link // attached while launchOn
	// launchKnown: the launch entry points were tried once (Absent and
	// Errors say which could not be probed).
	launchKnown bool
}

// Start loads the program, watches pids and probes the driver libraries
// they map, and keeps looking for libraries loaded later until Stop. An
// error is a *bpfcap.Unavailable saying what would allow it.
func Start(pids []int, o Options) (*Prober, error) {
	p, err := Load(pids, o)
	if err != nil {
		return nil, err
	}
	if err := p.Probe(); err != nil {
		return nil, err
	}
	return p, nil
}

// Load loads the program and watches pids without probing any library
// yet: loading (the kernel's verifier) is the slow part, seconds on a
// loaded host, and a caller that starts other probes too loads them all
// first, then starts them together so that their windows are one
// (Probe). An error is a *bpfcap.Unavailable saying what would allow it.
func Load(pids []int, o Options) (*Prober, error) {
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Rescan <= 0 {
		o.Rescan = 500 * time.Millisecond
	}
	if o.Budget <= 0 {
		o.Budget = 0.02
	}
	if o.HitCost <= 0 {
		o.HitCost = 25 * time.Microsecond
	}
	if o.Period <= 0 {
		o.Period = time.Second
	}
	if o.MaxDuty <= 0 || o.MaxDuty > 1 {
		o.MaxDuty = 0.1
	}
	if o.MinBurst <= 0 {
		o.MinBurst = 20 * time.Millisecond
	}
	if err := Check(o.Proc); err != nil {
		return nil, err
	}
	spec, err := loadDp()
	if err != nil {
		return nil, fmt.Errorf("%s: the BPF object: %w", What, err)
	}
	p := &Prober{o: o, stop: make(chan struct{}), done: make(chan struct{}), closed: make(chan struct{}), files: map[string]*probedFile{}}
	// Removing a uprobe waits for the kernel's grace periods: about a
	// tenth of a second each on a 6.x kernel in a virtual machine, and
	// placing one waits for a removal under way. Forty entry points probed
	// one by one took seconds to place and to remove (and the launch
	// probes' bursts each removed theirs); a uprobe_multi link places and
	// removes a file's entry points at once. Only one set of programs is
	// loaded: the other is stubbed.
	p.multi = !o.OnePerEntry && features.HaveBPFLinkUprobeMulti() == nil
	if p.multi {
		bpfcap.Stub(spec, dpProgCall, dpProgSyncEnter, dpProgSyncExit)
	} else {
		bpfcap.Stub(spec, dpProgCallMulti, dpProgSyncEnterMulti, dpProgSyncExitMulti)
	}
	if p.follow, err = bpfcap.Load(What, spec, &p.objs, !o.NoFollow, "5.15 or later: attach cookies"); err != nil {
		return nil, err
	}
	if p.follow && p.objs.Fork != nil {
		l, err := bpfcap.AttachFork(What, p.objs.Fork)
		if err != nil {
			p.close()
			return nil, err
		}
		p.links = append(p.links, l)
	}
	for _, pid := range pids {
		if err := p.Add(pid); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// Probe probes the driver libraries the watched processes map and starts
// counting (the window starts once they are probed), then keeps looking
// for libraries loaded later until Stop. On an error the prober is
// closed.
func (p *Prober) Probe() error {
	p.started = time.Now()
	p.setLaunch(true) // the first burst (or all the window)
	if err := p.scan(); err != nil {
		p.close()
		return err
	}
	// The window starts once the libraries mapped now are probed: finding
	// and probing them takes a loaded host a tenth of a second and more.
	// The probes placed first count from their placing, the launches'
	// last (after every other entry point of the file): what they counted
	// before the window is cleared, so that every count covers the window
	// alone (a sync probed 0.7 s before the launches read 198 syncs for
	// 159 loops of four launches and one sync). A library mapped later (a
	// command launched under gpufeed loads it after its imports) is counted
	// from its own probing, within this window.
	p.clearCounts()
	p.mu.Lock()
	p.started = time.Now()
	if p.launchOn {
		p.onSince = p.started
	}
	p.mu.Unlock()
	go p.loop()
	return nil
}

// clearCounts empties what the probes counted so far: the per-thread rows,
// the syncs being waited in (a return whose entry was cleared counts as
// entered before the window) and the calls a full map dropped; the children
// followed are kept.
func (p *Prober) clearCounts() {
	var k dpKey
	var v dpStat
	var keys []dpKey
	it := p.objs.Stats.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_ = p.objs.Stats.Delete(k)
	}
	var tid uint32
	var tids []uint32
	var in dpInside
	it = p.objs.Insides.Iterate()
	for it.Next(&tid, &in) {
		tids = append(tids, tid)
	}
	for _, tid := range tids {
		_ = p.objs.Insides.Delete(tid)
	}
	for i := uint32(0); i < 2; i++ {
		_ = p.objs.Counters.Put(i, uint64(0))
	}
}

// Add watches one more process; its driver library is probed at the next
// scan.
func (p *Prober) Add(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("%s: pid %d: want a positive pid", What, pid)
	}
	if err := p.objs.Pids.Update(uint32(pid), uint32(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: watching pid %d: %w", What, pid, err)
	}
	return nil
}

func (p *Prober) loop() {
	defer close(p.done)
	rescan := time.NewTicker(p.o.Rescan)
	defer rescan.Stop()
	var burst <-chan time.Time
	var timer *time.Timer
	if !p.o.Continuous {
		p.burst = p.o.Period / 20
		timer = time.NewTimer(p.burst)
		defer timer.Stop()
		burst = timer.C
	}
	for {
		select {
		case <-p.stop:
			return
		case <-rescan.C:
			if err := p.scan(); err != nil {
				p.mu.Lock()
				p.scanErr = err
				p.mu.Unlock()
			}
		case <-burst:
			p.mu.Lock()
			on, since := p.launchOn, p.onSince
			p.mu.Unlock()
			if !on {
				p.setLaunch(true)
				timer.Reset(p.burst)
				continue
			}
			n := p.launchCount()
			seen := time.Since(since)
			next := p.nextBurst(n-p.lastCount, seen)
			p.lastCount = n
			p.mu.Lock()
			p.bursts++
			p.mu.Unlock()
			p.burst = next
			if next >= p.o.Period {
				timer.Reset(p.o.Period) // continuous: look at the rate again in a period
				continue
			}
			p.setLaunch(false)
			timer.Reset(p.o.Period - next)
		}
	}
}

// scan reads the maps of every watched process and probes each driver
// file not probed yet. A process gone since is skipped. Only a refusal
// to attach at all (the first file) is an error.
func (p *Prober) scan() error {
	var pids []int
	var pid, v uint32
	it := p.objs.Pids.Iterate()
	for it.Next(&pid, &v) {
		pids = append(pids, int(pid))
	}
	sort.Ints(pids)
	if p.sizes == nil {
		p.sizes = map[int]uint64{}
	}
	for pid := range p.sizes {
		if _, ok := slices.BinarySearch(pids, pid); !ok {
			delete(p.sizes, pid)
		}
	}
	for _, pid := range pids {
		// A process whose address space kept its size mapped nothing new:
		// its maps (a line or two per thread: 2 ms a read at 1,000 threads)
		// are not read again.
		size, read := p.mapsToRead(pid)
		if !read {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.o.Proc, strconv.Itoa(pid), "maps"))
		if err != nil {
			continue // gone, or not readable: its calls stay uncounted
		}
		for _, m := range driverMappings(b) {
			key := m.dev + ":" + strconv.FormatUint(m.inode, 10)
			p.mu.Lock()
			_, done := p.files[key]
			p.mu.Unlock()
			if done {
				continue
			}
			f, err := p.attach(filepath.Join(p.o.Proc, strconv.Itoa(pid), "root", m.path), m.path)
			if err != nil {
				return err
			}
			p.mu.Lock()
			p.files[key] = f
			p.mu.Unlock()
		}
		if size > 0 {
			p.sizes[pid] = size
		}
	}
	return nil
}

// mapsToRead says whether pid's maps are to be read: not when its address
// space has the size it had when they were last read (size: the size now,
// 0 when unknown).
func (p *Prober) mapsToRead(pid int) (size uint64, read bool) {
	size, err := procfs.AddressSpacePages(filepath.Join(p.o.Proc, strconv.Itoa(pid), "statm"))
	if err != nil {
		return 0, true
	}
	last, ok := p.sizes[pid]
	return size, !ok || last != size
}

type mapping struct {
	dev   string
	inode uint64
	path  string
}

// driverMappings returns the executable mappings of driver libraries in a
// maps file, once per file.
func driverMappings(b []byte) []mapping {
	var out []mapping
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[1], "x") {
			continue
		}
		path := strings.Join(f[5:], " ")
		if ok, _ := IsDriver(path); !ok {
			continue
		}
		ino, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		key := f[3] + ":" + f[4]
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, mapping{dev: f[3], inode: ino, path: path})
	}
	return out
}

// attach probes every entry point the file exports but the launches (an
// entry probe each, a return probe too on the syncs); the launches are
// probed by setLaunch.
func (p *Prober) attach(open, path string) (*probedFile, error) {
	_, sim := IsDriver(path)
	f := &probedFile{lib: profile.DriverLibrary{Path: strings.TrimSuffix(path, " (deleted)"), Simulated: sim}}
	ex, err := link.OpenExecutable(strings.TrimSuffix(open, " (deleted)"))
	if err != nil {
		f.lib.Errors = append(f.lib.Errors, err.Error())
		return f, nil
	}
	f.ex = ex
	var links []link.Link
	if p.multi {
		var err error
		if links, err = p.attachMultiFile(f); err != nil {
			return nil, err
		}
	} else {
		for i, e := range entries {
			if e.class == profile.CallLaunch {
				continue
			}
			opt := &link.UprobeOptions{Cookie: cookie(i)}
			prog := p.objs.Call
			if e.class == profile.CallSync {
				prog = p.objs.SyncEnter
			}
			l, err := ex.Uprobe(e.sym, prog, opt)
			if errors.Is(err, link.ErrNoSymbol) {
				f.lib.Absent = append(f.lib.Absent, e.sym)
				continue
			}
			if err != nil {
				if denied(err) {
					closeAll(links)
					return nil, uprobesDenied(err)
				}
				f.lib.Errors = append(f.lib.Errors, e.sym+": "+err.Error())
				continue
			}
			links = append(links, l)
			if e.class == profile.CallSync {
				r, err := ex.Uretprobe(e.sym, p.objs.SyncExit, opt)
				if err != nil {
					f.lib.Errors = append(f.lib.Errors, e.sym+" (return): "+err.Error())
				} else {
					links = append(links, r)
				}
			}
			f.lib.Probes++
		}
	}
	p.mu.Lock()
	p.links = append(p.links, links...)
	on := p.launchOn
	p.mu.Unlock()
	if on {
		p.attachLaunch(f)
	}
	return f, nil
}

func denied(err error) bool { return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) }

func uprobesDenied(err error) error {
	return &bpfcap.Unavailable{What: What, Missing: "placing uprobes needs CAP_PERFMON (or CAP_SYS_ADMIN)", Err: err}
}

// attachMultiFile places the uprobe_multi links of every entry point but
// the launches on f: one for the calls counted at entry, one for the
// syncs' entries and one for their returns.
func (p *Prober) attachMultiFile(f *probedFile) ([]link.Link, error) {
	var links []link.Link
	for _, set := range []struct {
		idx  []int
		prog *ebpf.Program
	}{{otherIdx, p.objs.CallMulti}, {syncIdx, p.objs.SyncEnterMulti}} {
		l, placed, err := p.placeMulti(f, set.idx, set.prog, false, true)
		if err != nil {
			closeAll(links)
			return nil, err
		}
		if l == nil {
			continue
		}
		links = append(links, l)
		f.lib.Probes += len(placed)
		if set.prog == p.objs.SyncEnterMulti {
			r, _, err := p.placeMulti(f, placed, p.objs.SyncExitMulti, true, true)
			if err != nil {
				closeAll(links)
				return nil, err
			}
			if r != nil {
				links = append(links, r)
			}
		}
	}
	return links, nil
}

// placeMulti places one uprobe_multi link on f's file for the entries idx
// (each with its cookie), on their returns where ret. The entry points the
// file lacks are left out and placed says which were probed. A refusal for
// want of privilege is an error; any other failure places nothing. Where
// say, what was left out (on entry) and what failed go into f.lib.Absent
// and f.lib.Errors: a file's report says them once, at the first placement,
// not at every burst of the launch probes.
func (p *Prober) placeMulti(f *probedFile, idx []int, prog *ebpf.Program, ret, say bool) (l link.Link, placed []int, err error) {
	idx = slices.Clone(idx)
	for len(idx) > 0 {
		syms := make([]string, len(idx))
		cookies := make([]uint64, len(idx))
		for j, i := range idx {
			syms[j], cookies[j] = entries[i].sym, cookie(i)
		}
		opt := &link.UprobeMultiOptions{Cookies: cookies}
		if ret {
			l, err = f.ex.UretprobeMulti(syms, prog, opt)
		} else {
			l, err = f.ex.UprobeMulti(syms, prog, opt)
		}
		if errors.Is(err, link.ErrNoSymbol) {
			// The symbol the file lacks is named in the error ("symbol
			// cuLaunchKernel_ptsz: not found"): left out, the rest placed.
			k := slices.IndexFunc(syms, func(s string) bool { return strings.Contains(err.Error(), "symbol "+s+":") })
			if k >= 0 {
				if say && !ret {
					f.lib.Absent = append(f.lib.Absent, syms[k])
				}
				idx = slices.Delete(idx, k, k+1)
				continue
			}
		}
		if err != nil {
			if denied(err) {
				return nil, nil, uprobesDenied(err)
			}
			if say {
				what := strings.Join(syms, ", ")
				if ret {
					what += " (return)"
				}
				f.lib.Errors = append(f.lib.Errors, what+": "+err.Error())
			}
			return nil, nil, nil
		}
		return l, idx, nil
	}
	return nil, nil, nil
}

// attachLaunch places the launch probes on one file.
func (p *Prober) attachLaunch(f *probedFile) {
	if f.ex == nil {
		return
	}
	if p.multi {
		first := !f.launchKnown
		l, placed, err := p.placeMulti(f, launchIdx, p.objs.CallMulti, false, first)
		switch {
		case err != nil && first:
			f.lib.Errors = append(f.lib.Errors, err.Error())
		case err == nil && first:
			f.lib.Probes += len(placed)
		}
		if l != nil {
			f.launch = append(f.launch, l)
		}
		f.launchKnown = true
		return
	}
	for _, i := range launchIdx {
		e := entries[i]
		l, err := f.ex.Uprobe(e.sym, p.objs.Call, &link.UprobeOptions{Cookie: cookie(i)})
		if !f.launchKnown {
			switch {
			case errors.Is(err, link.ErrNoSymbol):
				f.lib.Absent = append(f.lib.Absent, e.sym)
			case err != nil:
				f.lib.Errors = append(f.lib.Errors, e.sym+": "+err.Error())
			default:
				f.lib.Probes++
			}
		}
		if err == nil {
			f.launch = append(f.launch, l)
		}
	}
	f.launchKnown = true
}

// setLaunch turns the launch probes on or off on every file, and keeps
// the time they were on.
func (p *Prober) setLaunch(on bool) {
	p.mu.Lock()
	files := make([]*probedFile, 0, len(p.files))
	for _, f := range p.files {
		files = append(files, f)
	}
	was := p.launchOn
	p.launchOn = on
	now := time.Now()
	if was && !on {
		p.probedNS += now.Sub(p.onSince).Nanoseconds()
	}
	if on && !was {
		p.onSince = now
	}
	p.mu.Unlock()
	if on == was {
		return
	}
	for _, f := range files {
		if on {
			p.attachLaunch(f)
		} else {
			closeAll(f.launch)
			f.launch = nil
		}
	}
}

// launchCount sums the launch rows counted so far.
func (p *Prober) launchCount() uint64 {
	var n uint64
	var k dpKey
	var s dpStat
	it := p.objs.Stats.Iterate()
	for it.Next(&k, &s) {
		if int(k.Index) < len(entries) && entries[k.Index].class == profile.CallLaunch {
			n += s.Calls
		}
	}
	return n
}

// nextBurst sizes the next burst from the launch rate the last one saw:
// the whole period (continuous) where the probes' cost (rate x HitCost
// per second probed) is within Budget, else that cost within Budget of
// the period, at most MaxDuty of it and at least MinBurst.
func (p *Prober) nextBurst(launches uint64, over time.Duration) time.Duration {
	if over <= 0 {
		return p.o.MinBurst
	}
	rate := float64(launches) / over.Seconds()
	cost := rate * p.o.HitCost.Seconds() // share of a second the probes cost while on
	if cost <= p.o.Budget {
		return p.o.Period
	}
	b := time.Duration(min(p.o.Budget/cost, p.o.MaxDuty) * float64(p.o.Period)).Round(time.Millisecond)
	return min(max(b, p.o.MinBurst), p.o.Period)
}

func closeAll(ls []link.Link) {
	for _, l := range ls {
		l.Close()
	}
}

func (p *Prober) close() {
	closeAll(p.links)
	p.links = nil
	p.objs.Close()
}

// Stop removes the probes, reads the counts and returns them.
func (p *Prober) Stop() *profile.DriverCalls {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return &profile.DriverCalls{State: profile.StateOff}
	}
	p.stopped = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	// Read before the probes are removed: removing a return probe waits
	// for a thread inside the function to return (a sync blocked past the
	// window's end would hold the report). Each row's counts are added
	// atomically, so a call returning while they are read only lands or not.
	window := time.Since(p.started)
	probed := p.probedNS
	if p.launchOn {
		probed += time.Since(p.onSince).Nanoseconds()
	}
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	out := p.read(window, now.Nano())
	out.LaunchProbedNS = min(probed, window.Nanoseconds())
	out.LaunchContinuous = p.o.Continuous || out.LaunchProbedNS >= window.Nanoseconds()*99/100
	for _, f := range p.files {
		p.links = append(p.links, f.launch...)
		f.launch = nil
	}
	removing.Add(1)
	go func(links []link.Link, objs dpObjects) {
		defer removing.Done()
		closeAll(links)
		objs.Close()
		close(p.closed)
	}(p.links, p.objs)
	p.links = nil
	return out
}

// Removed is closed once the probes are gone after Stop.
func (p *Prober) Removed() <-chan struct{} { return p.closed }

// removing counts the Stops whose probes are still being removed.
var removing sync.WaitGroup

// AwaitRemoval waits, at most timeout, until the probes of every Stop are
// removed, and says whether they are. A process that probed calls it
// before it exits. Stop removes the probes in the background (a
// uprobe_multi link at once, a tenth of a second or so; one probe per
// entry point, where the kernel has no such links, about a tenth of a
// second each, one after the other: seconds in all), and a process that
// exits in the middle leaves the probe being
// removed in the kernel for good: the exit's SIGKILL reaches the thread
// inside close(2), the kernel's lookup of the probed page (to put its
// instruction back) fails on the pending signal, and the kernel logs
// "uprobe: gpufeed:PID failed to unregister, leaking uprobe". The
// probes closed by the exit itself are removed.
func AwaitRemoval(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { removing.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (p *Prober) read(window time.Duration, nowNS int64) *profile.DriverCalls {
	out := &profile.DriverCalls{State: profile.StateOn, WindowNS: window.Nanoseconds()}
	for _, f := range p.files {
		out.Libraries = append(out.Libraries, f.lib)
	}
	sort.Slice(out.Libraries, func(i, j int) bool { return out.Libraries[i].Path < out.Libraries[j].Path })
	var c uint64
	if p.objs.Counters.Lookup(uint32(0), &c) == nil {
		out.Dropped = c
	}
	if p.objs.Counters.Lookup(uint32(1), &c) == nil {
		out.Unmatched = c
	}
	threads := map[uint32]*profile.ThreadDriver{}
	var k dpKey
	var s dpStat
	it := p.objs.Stats.Iterate()
	for it.Next(&k, &s) {
		if int(k.Index) >= len(entries) {
			continue
		}
		th := threads[k.Tid]
		if th == nil {
			th = &profile.ThreadDriver{PID: int(k.Tgid), TID: int(k.Tid), Comm: bpfcap.Comm(s.Comm)}
			threads[k.Tid] = th
		}
		e := entries[k.Index]
		th.Calls = append(th.Calls, profile.DriverCall{Symbol: e.sym, Class: e.class, Copy: e.copy, Async: e.async,
			Calls: s.Calls, Bytes: s.Bytes, TimeNS: int64(s.Ns), MaxNS: int64(s.MaxNs)})
	}
	var tid uint32
	var in dpInside
	it = p.objs.Insides.Iterate()
	for it.Next(&tid, &in) {
		th := threads[tid]
		if th == nil || int(in.Index) >= len(entries) {
			continue // its entry made the row: a thread with no row exited inside
		}
		since := min(nowNS-int64(in.Ts), window.Nanoseconds())
		th.InSync = &profile.PendingCall{Symbol: entries[in.Index].sym, SinceNS: max(since, 0)}
	}
	simulated := len(out.Libraries) > 0
	for _, l := range out.Libraries {
		simulated = simulated && l.Simulated
	}
	for _, th := range threads {
		if simulated {
			unwrap(th)
		}
		th.Sum()
		out.Threads = append(out.Threads, *th)
	}
	out.SortThreads()
	return out
}

// simWrappers are the simulated driver's exported entry points that call
// another of its exported entry points (cuLaunchKernelEx calls
// cuLaunchKernel, cuMemAllocHost_v2 cuMemHostAlloc), so that each probe
// counts both: the inner one's count is what the program called directly.
// libcuda's entry points do not call each other this way.
var simWrappers = map[string]string{"cuLaunchKernelEx": "cuLaunchKernel", "cuMemAllocHost_v2": "cuMemHostAlloc"}

// unwrap takes the wrappers' calls off the entry points they call, in a
// thread of a job that maps only the simulated driver.
func unwrap(th *profile.ThreadDriver) {
	for _, outer := range th.Calls {
		inner, ok := simWrappers[outer.Symbol]
		if !ok {
			continue
		}
		for i := range th.Calls {
			if c := &th.Calls[i]; c.Symbol == inner {
				c.Calls -= min(c.Calls, outer.Calls)
				c.Bytes -= min(c.Bytes, outer.Bytes)
			}
		}
	}
	th.Calls = slices.DeleteFunc(th.Calls, func(c profile.DriverCall) bool { return c.Calls == 0 && c.TimeNS == 0 })
}

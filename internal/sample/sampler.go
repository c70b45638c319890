package sample

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// clockTick is USER_HZ, the unit of utime/stime in /proc. The kernel fixes
// it at 100 on every architecture Linux exposes to user space (sysconf
// _SC_CLK_TCK), so it is a constant here rather than a cgo call.
const clockTick = 100

// Sampler samples one target until its window ends.
type Sampler struct {
	cfg Config
	tl  *timeline.Timeline
	fs  procfs.FS
	// ownPIDs: the proc root's pids are this process's (procfs.FS.OwnPIDs),
	// so a process's CPU clock can be read (dormant.go).
	ownPIDs bool
	arch    string
	start   time.Time

	procRoot *procfs.Dir
	host     *procfs.Host
	procs    map[int]*trackedProc
	// notDesc caches pids seen in /proc that are not in the tree, with the
	// generation of the last listing that showed them (pruned when gone, so
	// a reused pid is looked at again).
	notDesc map[int]uint32
	gen     uint32
	cands   []candidate

	buf []byte // fast-tier reads: one stat or schedstat at a time
	// kept counts the per-thread descriptors held open; keptBudget is how
	// many may be (the open-file limit less a reserve for everything else).
	kept         int
	keptBudget   int
	ticks        int
	lastSlow     time.Duration
	lastDiscover time.Duration
	// loadavg is proc/loadavg kept open: its last field, the pid handed out
	// last (lastPID at the last listing), tells a tick whether any process
	// or thread was created since (nil: not readable; every listing is made).
	loadavg *procfs.Kept
	lastPID int
	// pidNow is loadavg's last pid at this tick's start (pidKnown false:
	// not known).
	pidNow   int
	pidKnown bool
	// taskScans counts the listings of processes' task/ (tests).
	taskScans int
	// carried counts dormant threads' samples carried, not read (dormant.go).
	carried int
	recErr  error
	gpuErr  string
	gpuLost map[int]bool
	tickDur []int64
	samples int
	// ownErr is the first read that failed for want of a descriptor
	// (EMFILE, ENFILE): gpufeed's own failure, never the job's end.
	ownErr error
	// observer holds gpufeed's own process and the processes that started
	// it (pid -> start time): never part of the job, even inside its tree.
	observer map[int]uint64
	// tickUser and tickSys are the ticks' own CPU time (SharedProcess).
	tickUser, tickSys uint64
	// rollupSpent is the CPU the memory readings (smaps_rollup, smaps)
	// have cost since the window's start, for Config.RollupJobBudget.
	rollupSpent time.Duration
	// parentAnon caches a parent's anonymous mappings for the tick they
	// were read in (its forked children's inherited memory).
	parentAnon map[int]*parentMaps
	cgTick     cgroupTick // this tick's cgroup counter reads (cgroup.go)
	// sched is the kernel's counters where they are the source (nil:
	// /proc), snap this tick's reading of them (sched.go).
	sched *schedbpf.Tracer
	snap  schedbpf.Snapshot
	// wakersOn says the wake-up program is attached for this tick, since
	// wakersSince; wakersFailed that attaching it failed; wakerSlow counts
	// the slow ticks (sampleWakers).
	wakersOn, wakersFailed bool
	wakersSince            int64
	wakerSlow              int
	// schedReads counts the scheduler's readings made (schedRead).
	schedReads int
	// slab holds the ticks' thread samples (slab.go).
	slab sampleSlab
	// waitsKernel: where threads wait is read in the kernel (sched.go's
	// kernelWaits), for the threads readWait queued in waitsPending this
	// tick (each at its sampleAt in the process's samples); waitTIDs is the
	// reading's buffer. waitsSrc and waitsNotBPF become Observer.Waits and
	// WaitsNotBPF.
	waitsKernel           bool
	waitsPending          []*trackedThread
	waitTIDs              []int
	waitsSrc, waitsNotBPF string
	// factsKernel: a new thread's stat facts are read in the kernel
	// (kernelFacts); factsPending holds the threads whose name the last
	// tick reads there (kernelNames).
	factsKernel  bool
	factsPending []*trackedThread
	// onTick runs at the end of each tick (SetTickHook).
	onTick func()
	// schedSrc and schedNotBPF become Observer.Sched and SchedNotBPF.
	schedSrc, schedNotBPF string
}

type candidate struct {
	pid int
	st  procfs.Stat
}

// New prepares a sampler; it fails when the target does not exist, except
// for a command gpufeed launched: one that exited before its first read is a
// run to report (it ended at once), not a mistyped pid.
func New(cfg Config) (*Sampler, error) {
	cfg.defaults()
	if cfg.FS.Proc == "" {
		fs, err := procfs.NewFS("", "")
		if err != nil {
			return nil, err
		}
		cfg.FS = fs
	}
	st, err := procfs.ReadStatOnce(cfg.FS.PidPath(cfg.PID, "stat"))
	if isEMFILE(err) {
		return nil, &OutOfFilesError{Err: err}
	}
	if err != nil && cfg.Launched && procfs.IsVanished(err) {
		st, err = procfs.Stat{}, nil
	}
	if err != nil {
		if procfs.IsVanished(err) {
			return nil, fmt.Errorf("no process %d under %s", cfg.PID, cfg.FS.Proc)
		}
		return nil, fmt.Errorf("target %d: %w", cfg.PID, err)
	}
	self, chain, inTree := observerChain(cfg.FS, cfg.PID)
	if self == cfg.PID {
		return nil, fmt.Errorf("pid %d is this gpufeed process itself (a shell that runs its last command in its own place gives it the shell's $$): point --pid at the job, or use -- COMMAND", cfg.PID)
	}
	s := &Sampler{
		observer: map[int]uint64{},
		cfg:      cfg,
		fs:       cfg.FS,
		arch:     procfs.HostArch(),
		procs:    map[int]*trackedProc{},
		notDesc:  map[int]uint32{},
		gpuLost:  map[int]bool{},
		buf:      make([]byte, 4096),
		ownPIDs:  cfg.FS.OwnPIDs(),
	}
	s.keptBudget = cfg.MaxKeptFiles
	if s.keptBudget <= 0 {
		s.keptBudget = keptBudget()
	}
	s.tl = &timeline.Timeline{
		Procs:   map[timeline.ProcKey]*timeline.ProcInfo{},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{},
	}
	m := &s.tl.Meta
	m.SchemaVersion = timeline.SchemaVersion
	m.Tool = cfg.Tool
	m.Hostname, _ = os.Hostname()
	var uts syscall.Utsname
	if syscall.Uname(&uts) == nil {
		m.Kernel = utsString(uts.Release[:])
	}
	m.NumCPU = numCPU(cfg.FS)
	m.ClockTick = clockTick
	m.PageSize = os.Getpagesize()
	m.Interval = timeline.Duration(cfg.Interval)
	m.Duration = timeline.Duration(cfg.Duration)
	m.Target = timeline.Target{PID: cfg.PID, StartTime: st.StartTime, Command: cfg.Command, Launched: cfg.Launched, Held: cfg.Held}
	m.ProcRoot = cfg.FS.Proc
	m.SysRoot = cfg.FS.Sys
	m.GPUSource = cfg.GPUSource
	m.Arch = s.arch
	m.Tiers = timeline.Tiers{Slow: timeline.Duration(cfg.SlowEvery), Rollup: timeline.Duration(cfg.RollupEvery)}
	for _, o := range chain {
		s.observer[o.pid] = o.start
	}
	if inTree {
		m.Notes = append(m.Notes, observerNote(chain))
		// The chain climbs from gpufeed to the target: its last process
		// is the target's child.
		m.ObserverParent = cfg.PID
	}
	return s, nil
}

// uptimeNS reads PROC/uptime (seconds since boot, in hundredths): with it a
// process's start time (clock ticks since boot) becomes an age. 0 when not
// readable (a fixture root without it).
func uptimeNS(fs procfs.FS) int64 {
	b, err := os.ReadFile(fs.ProcPath("uptime"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil || v <= 0 || v > 1e10 {
		return 0
	}
	return int64(v * 1e9)
}

type observed struct {
	pid   int
	start uint64
	comm  string
}

// observerChain finds gpufeed's own process in the proc tree (PROC/self,
// which a procfs resolves in its own pid namespace) and its ancestors up to
// the target: gpufeed run from inside the job (a shell of the job, through
// timeout or sudo) is a descendant of the target, and it and the processes
// between them are the observer, not the job. inTree says the chain reached
// the target. A fixture tree has no self link: no chain.
func observerChain(fs procfs.FS, target int) (self int, chain []observed, inTree bool) {
	link, err := os.Readlink(fs.ProcPath("self"))
	if err != nil {
		return 0, nil, false
	}
	self, err = strconv.Atoi(link)
	if err != nil {
		return 0, nil, false
	}
	for pid := self; pid > 0 && len(chain) < 64; {
		if pid == target {
			return self, chain, len(chain) > 0
		}
		if pid == 1 {
			break // init: the target is not an ancestor
		}
		st, err := procfs.ReadStatOnce(fs.PidPath(pid, "stat"))
		if err != nil {
			break
		}
		chain = append(chain, observed{pid: pid, start: st.StartTime, comm: string(st.Comm)})
		pid = st.PPID
	}
	return self, chain, false
}

func observerNote(chain []observed) string {
	note := fmt.Sprintf("gpufeed's own process (pid %d) runs inside the watched tree", chain[0].pid)
	if len(chain) > 1 {
		var by []string
		for _, o := range chain[1:] {
			by = append(by, fmt.Sprintf("%s (pid %d)", o.comm, o.pid))
		}
		note += ", started through " + strings.Join(by, ", ")
	}
	return note + ": the observer is left out of the job (its processes, CPU and roles)"
}

func utsString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// numCPU counts the cpuN lines of ROOT/stat (the CPUs the kernel reports,
// not this process's affinity), falling back to the runtime's count.
func numCPU(fs procfs.FS) int {
	b, err := os.ReadFile(fs.ProcPath("stat"))
	if err == nil {
		var hs procfs.HostStat
		if procfs.ParseProcStat(fs.ProcPath("stat"), b, &hs) == nil {
			return len(hs.CPUs)
		}
	}
	return runtimeNumCPU()
}

// Run samples until the window ends, the tree has exited, or ctx is done,
// and returns the timeline. A recorder error stops recording but not
// sampling; it is returned (wrapped) with the timeline.
func (s *Sampler) Run(ctx context.Context) (*timeline.Timeline, error) {
	cfg := s.cfg
	var err error
	if s.procRoot, err = procfs.OpenDir(s.fs.Proc); err != nil {
		if isEMFILE(err) {
			return nil, &OutOfFilesError{Err: err}
		}
		return nil, err
	}
	defer s.procRoot.Close()
	if s.loadavg == nil && s.hostProc() {
		// Only where /proc is this process's own: loadavg counts the pids of
		// the reader's namespace, which another tree's listing would not match.
		if k, err := procfs.OpenKept(s.fs.ProcPath("loadavg"), ""); err == nil {
			s.loadavg = k
			defer k.Close()
		}
	}
	if s.host, err = procfs.OpenHost(s.fs); err != nil {
		if isEMFILE(err) {
			return nil, &OutOfFilesError{Err: err}
		}
		return nil, err
	}
	defer s.host.Close()
	defer s.closeAll()
	if err := s.startSched(); err != nil {
		return nil, err
	}
	defer s.stopSched()
	for k, v := range s.host.NotVisible {
		if s.tl.Meta.NotVisible == nil {
			s.tl.Meta.NotVisible = map[string]string{}
		}
		s.tl.Meta.NotVisible[k] = v
	}
	if cfg.GPU != nil {
		s.tl.Devices = cfg.GPU.Devices()
	}

	if cfg.Release != nil {
		if err := cfg.Release(); err != nil {
			return nil, err
		}
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	up := uptimeNS(s.fs)
	s.start = time.Now()
	s.tl.Meta.Started = s.start
	s.tl.Meta.UptimeNS = up
	s.record(func(r Recorder) error { return r.WriteMeta(s.tl.Meta) })
	if len(s.tl.Devices) > 0 {
		s.record(func(r Recorder) error { return r.WriteDevices(s.tl.Devices) })
	}

	// The target itself is tracked first; everything else is found by its
	// parent. Only its absence (ENOENT, ESRCH) or another process under its
	// pid (another start time) means it is gone; a read that failed for
	// another reason is no news of it.
	s.pidNow, s.pidKnown = s.lastPIDNow()
	if st, err := procfs.ReadStatOnce(s.fs.PidPath(cfg.PID, "stat")); err == nil && st.StartTime == s.tl.Meta.Target.StartTime {
		s.addProc(cfg.PID, st, 0)
	} else if err != nil && !procfs.IsVanished(err) {
		s.readError(0, cfg.PID, err)
	}
	if s.ownErr != nil {
		return nil, &OutOfFilesError{Err: s.ownErr}
	}

	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	ended := ""
	slot := int64(0)
	// The grid and the window's length count from the first tick, which
	// comes after the target's files were opened (milliseconds for a big
	// tree): the window from the first tick to the last then covers the
	// requested duration.
	first := time.Duration(-1)
	for {
		elapsed := time.Since(s.start)
		if first < 0 {
			first = elapsed
		}
		final := elapsed-first >= cfg.Duration-cfg.Interval/4
		t0 := time.Now()
		s.ownTick(elapsed, final)
		s.tickDur = append(s.tickDur, int64(time.Since(t0)))
		if s.ownErr != nil {
			// What failed to be read is unknown, not gone: no timeline
			// can say what the job did.
			return nil, &OutOfFilesError{Err: s.ownErr, After: time.Since(s.start)}
		}
		if cfg.Progress != nil {
			cfg.Progress(elapsed, cfg.Duration, len(s.procs), s.liveThreads())
		}
		if final {
			ended = "duration"
			break
		}
		if len(s.procs) == 0 {
			ended = "target exited"
			break
		}
		if cfg.MaxSamples > 0 {
			live := s.liveThreads()
			if s.ticks == 1 {
				s.warnBudget(live)
			}
			if s.samples+live > cfg.MaxSamples {
				ended = EndedBudget
				s.tl.Meta.Notes = append(s.tl.Meta.Notes, s.budgetNote(time.Since(s.start)-first, live))
				break
			}
		}
		// Next slot on the grid, moved by its phase sweep; a tick that ran
		// past it is an overrun and the missed slots are skipped, not
		// bunched up.
		slot++
		now := time.Since(s.start) - first
		next := slotTime(slot, cfg.Interval, cfg.Duration)
		if now > next {
			s.tl.Counts.Overruns++
			for slot = int64(now/cfg.Interval) + 1; ; slot++ {
				if next = slotTime(slot, cfg.Interval, cfg.Duration); next > now || next >= cfg.Duration {
					break
				}
			}
		}
		timer.Reset(next - now)
		select {
		case <-ctx.Done():
			ended = "interrupted"
		case <-cfg.TargetDone:
			// A launched target was reaped: take one last sample now so its
			// exit (and any survivors) are seen without waiting for the slot.
			cfg.TargetDone = nil
		case <-timer.C:
		}
		if ended != "" {
			s.ownTick(time.Since(s.start), true)
			if s.ownErr != nil {
				return nil, &OutOfFilesError{Err: s.ownErr, After: time.Since(s.start)}
			}
			break
		}
	}

	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	wall := time.Since(s.start)
	s.tl.Meta.Ended = ended
	user, sys := uint64(tvNS(ru1.Utime)-tvNS(ru0.Utime)), uint64(tvNS(ru1.Stime)-tvNS(ru0.Stime))
	if cfg.SharedProcess {
		user, sys = s.tickUser, s.tickSys
	}
	ob := &timeline.Observer{
		CPUUserNS:            user,
		CPUSysNS:             sys,
		WallNS:               int64(wall),
		ThreadSamples:        s.samples,
		ThreadSamplesCarried: s.carried,
		TickP50NS:            median(s.tickDur),
		TickMaxNS:            slices.Max(s.tickDur),
	}
	ob.Sched, ob.SchedNotBPF = s.schedSrc, s.schedNotBPF
	ob.Waits, ob.WaitsNotBPF = s.waitsSrc, s.waitsNotBPF
	s.readWakers()
	s.tl.Meta.Observer = ob
	for _, p := range s.procs {
		p.info.LastSeen = s.lastT()
	}
	AssignRoles(s.tl)
	if s.recErr != nil {
		return s.tl, &RecordError{Err: s.recErr}
	}
	return s.tl, nil
}

// RecordError is the recorder's first error: recording stopped there,
// sampling went on.
type RecordError struct{ Err error }

func (e *RecordError) Error() string { return "recording stopped: " + e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }

// fdReserve is what the kept-file budget leaves of the open-file limit for
// everything else: processes' statm and task/ (two each), one-shot reads,
// the recording, the GPU source.
const fdReserve = 256

// keptBudget is the soft RLIMIT_NOFILE (the Go runtime raises it to the
// hard limit at start-up) less the reserve.
func keptBudget() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return max(0, int(rl.Cur)-fdReserve)
}

// ownTick runs one tick; in a shared process, with the goroutine locked to
// its OS thread and the thread's CPU time counted as the sampler's.
func (s *Sampler) ownTick(elapsed time.Duration, final bool) {
	if !s.cfg.SharedProcess {
		s.tick(elapsed, final)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru0)
	s.tick(elapsed, final)
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru1)
	s.tickUser += uint64(max(0, tvNS(ru1.Utime)-tvNS(ru0.Utime)))
	s.tickSys += uint64(max(0, tvNS(ru1.Stime)-tvNS(ru0.Stime)))
}

func tvNS(tv syscall.Timeval) int64 { return tv.Sec*1e9 + int64(tv.Usec)*1e3 }

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	return c[len(c)/2]
}

func (s *Sampler) lastT() int64 {
	if n := len(s.tl.Ticks); n > 0 {
		return s.tl.Ticks[n-1].T
	}
	return 0
}

func (s *Sampler) liveThreads() int {
	n := 0
	for _, p := range s.procs {
		n += len(p.threads)
	}
	return n
}

// record sends one item to the recorder and keeps its first error. The
// recorder is called after an error too: a live consumer in front of the
// recording (-o jsonl's window) goes on when the file cannot be written (a
// full disk stopped the stream halfway), and a recording that failed
// refuses each item at once.
func (s *Sampler) record(fn func(Recorder) error) {
	if s.cfg.Recorder == nil {
		return
	}
	if err := fn(s.cfg.Recorder); err != nil && s.recErr == nil {
		s.recErr = err
	}
}

func (s *Sampler) event(e timeline.Event) {
	s.tl.Events = append(s.tl.Events, e)
	s.record(func(r Recorder) error { return r.WriteEvent(e) })
}

// OutOfFilesError says gpufeed could not open a file for want of a
// descriptor: its own open-file limit (EMFILE) or the system's (ENFILE) was
// reached. It is gpufeed's failure: what could not be read is unknown, not
// gone, and the run is not judged.
type OutOfFilesError struct {
	Err   error
	After time.Duration // into the window (0: before it started)
}

func (e *OutOfFilesError) Error() string {
	what := "out of file descriptors"
	fix := "raise gpufeed's open-file limit (ulimit -n; it is " + softNoFile() + ") and run it again"
	if errors.Is(e.Err, syscall.ENFILE) {
		what = "the system's open-file table is full"
		fix = "the host has run out of file descriptors (fs.file-max; see /proc/sys/fs/file-nr); run gpufeed again once some are free"
	}
	when := "before the window started"
	if e.After > 0 {
		when = fmt.Sprintf("%.1f s into the window", e.After.Seconds())
	}
	return fmt.Sprintf("%s %s (%v): this is gpufeed's own failure, not the job's: what it could not read is unknown, so no verdict is given; %s",
		what, when, e.Err, fix)
}

func (e *OutOfFilesError) Unwrap() error { return e.Err }

// softNoFile is this process's soft open-file limit, in words.
func softNoFile() string {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return "unknown"
	}
	if rl.Cur > 1<<40 {
		return "unlimited"
	}
	return strconv.FormatUint(rl.Cur, 10)
}

// readError counts a read that failed for another reason than vanished or
// denied, and leaves an event naming it (once per message). A read that
// failed for want of a descriptor is remembered: it ends the run as
// gpufeed's own failure (OutOfFilesError).
func (s *Sampler) readError(t int64, pid int, err error) {
	if isEMFILE(err) && s.ownErr == nil {
		s.ownErr = err
	}
	s.tl.Counts.ReadErrors++
	msg := err.Error()
	for _, e := range s.tl.Events {
		if e.Kind == timeline.EventReadError && e.Text == msg {
			return
		}
	}
	s.event(timeline.Event{T: t, Kind: timeline.EventReadError, PID: pid, Text: msg})
}

// tick takes one sample of everything; full forces every tier (the last tick).
func (s *Sampler) tick(elapsed time.Duration, full bool) {
	t := int64(elapsed)
	slow := full || s.ticks == 0 || elapsed-s.lastSlow >= s.cfg.SlowEvery-s.cfg.Interval/2
	s.ticks++
	if slow {
		s.lastSlow = elapsed
	}
	s.pidNow, s.pidKnown = s.lastPIDNow()
	if s.ticks == 1 || full || elapsed-s.lastDiscover >= s.cfg.DiscoverEvery-s.cfg.Interval/2 {
		s.lastDiscover = elapsed
		// Between slow ticks the listing is made only when a pid was handed
		// out since the last one: a child of the tree is a new pid. Listing
		// /proc costs a stat read per host process (tens of ms a second on
		// a busy host at 100 ms ticks); loadavg is one pread.
		if !s.pidKnown || s.pidNow != s.lastPID || slow || full || s.ticks == 1 {
			s.lastPID = s.pidNow
			s.discover(t)
		}
	}
	s.schedRead(t)
	s.sampleWakers(t, slow, full)
	tk := timeline.Tick{T: t}
	nThreads := 0
	for _, p := range s.procs {
		nThreads += len(p.threads)
	}
	tk.Threads = s.slab.take(nThreads)
	tk.Procs = make([]timeline.ProcSample, 0, len(s.procs))
	for _, pid := range s.sortedPIDs() {
		p := s.procs[pid]
		s.sampleProc(p, &tk, t, slow, full)
		if p.gone {
			s.procExit(p, t)
		}
	}
	if hs, err := s.host.Sample(slow); err != nil {
		s.readError(t, 0, err)
	} else {
		tk.Host = hs
		for k, v := range s.host.NotVisible {
			if s.tl.Meta.NotVisible == nil {
				s.tl.Meta.NotVisible = map[string]string{}
			}
			s.tl.Meta.NotVisible[k] = v
		}
	}
	s.sampleGPU(&tk, t)
	s.samples += len(tk.Threads)
	s.tl.Ticks = append(s.tl.Ticks, tk)
	s.record(func(r Recorder) error { return r.WriteTick(&s.tl.Ticks[len(s.tl.Ticks)-1]) })
	if s.onTick != nil {
		s.onTick()
	}
}

// lastPIDNow reads loadavg's last pid (ok false: not known).
func (s *Sampler) lastPIDNow() (int, bool) {
	if s.loadavg == nil {
		return 0, false
	}
	b, err := s.loadavg.ReadInto(s.buf)
	if err != nil {
		return 0, false
	}
	pid, err := procfs.ParseLoadavgLastPID(b)
	return pid, err == nil
}

func (s *Sampler) sortedPIDs() []int {
	pids := make([]int, 0, len(s.procs))
	for pid := range s.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

func (s *Sampler) sampleGPU(tk *timeline.Tick, t int64) {
	if s.cfg.GPU == nil {
		return
	}
	gs, err := s.cfg.GPU.Sample()
	if err != nil {
		if msg := err.Error(); msg != s.gpuErr {
			s.gpuErr = msg
			s.event(timeline.Event{T: t, Kind: timeline.EventGPUError, Text: msg})
		}
		return
	}
	for _, g := range gs {
		if g.Lost != "" && !s.gpuLost[g.Index] {
			s.gpuLost[g.Index] = true
			s.event(timeline.Event{T: t, Kind: timeline.EventGPULost, Text: fmt.Sprintf("GPU%d: %s", g.Index, g.Lost)})
		}
	}
	tk.GPUs = gs
}

func (s *Sampler) closeAll() {
	for _, p := range s.procs {
		p.close()
	}
}

var errGone = errors.New("gone")

// SetRecorder streams the timeline to r as it is sampled.
func (s *Sampler) SetRecorder(r Recorder) { s.cfg.Recorder = r }

// SetProgress reports each tick to fn.
func (s *Sampler) SetProgress(fn Progress) { s.cfg.Progress = fn }

// SetTickHook runs fn at the end of each tick, in the tick's goroutine:
// work that would otherwise wake a goroutine of its own on a timer (the CPU
// profile's reading of its buffers) done in the wake-up the tick already
// costs.
func (s *Sampler) SetTickHook(fn func()) { s.onTick = fn }

// sweepQuarter is a quarter of the phase sweep's period, in ticks.
const sweepQuarter = 5

// slotTime is when tick slot falls, from the first tick: its place on the
// grid (slot x interval) moved by a triangle wave of amplitude interval/2
// and period 4 x sweepQuarter ticks (2 s at the default 100 ms), and never
// past the window's end (the last tick falls on it). Successive ticks are
// thus interval ± interval/10 apart, interval on average, and every 20
// ticks fall at ten phases, a tenth of the interval apart, of anything that
// repeats each interval.
// A fixed grid samples such a thing at one phase only: at the default
// 100 ms, the CPU limit's own 100 ms period (CFS bandwidth's default, as
// Kubernetes sets it) put every tick of a window in the part of the period
// where a throttled launch thread waited for a CPU, never in the part where
// it slept on the device, and where it waited went unread (perf samples at
// 99 Hz rather than 100 for the same reason).
func slotTime(slot int64, interval, window time.Duration) time.Duration {
	grid := time.Duration(slot) * interval
	if grid >= window {
		return window
	}
	x := slot % (4 * sweepQuarter)
	var f int64
	switch {
	case x <= sweepQuarter:
		f = x
	case x <= 3*sweepQuarter:
		f = 2*sweepQuarter - x
	default:
		f = x - 4*sweepQuarter
	}
	return min(grid+time.Duration(f)*(interval/2)/sweepQuarter, window)
}

package pysample

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// ReaderName is what the stacks this package reads say read them.
const ReaderName = "gpufeed's CPython reader (process_vm_readv)"

// Target is one CPython process opened for reading.
type Target struct {
	fs  procfs.FS
	pid int
	w   walker
	// pthreadTID is the offset of the OS tid in glibc's struct pthread,
	// found once (versions before 3.11 keep only pthread_self()).
	pthreadTID int
}

// Open finds pid's interpreter and checks its layout is known. Errors:
// *procfs.DeniedError (not visible: needs CAP_SYS_PTRACE), a vanished
// process (procfs.ErrVanished), *NotPythonError, *LayoutError.
func Open(fs procfs.FS, pid int) (*Target, error) {
	return open(fs, pid, processMemory{pid: pid})
}

func open(fs procfs.FS, pid int, mem Memory) (*Target, error) {
	maps, err := readMaps(fs, pid)
	if err != nil {
		return nil, err
	}
	b, err := findBinary(fs, pid, maps)
	if err != nil {
		return nil, err
	}
	return openBinary(fs, pid, mem, b)
}

func openBinary(fs procfs.FS, pid int, mem Memory, b *pyBinary) (*Target, error) {
	l, err := layoutFor(b.major, b.minor)
	if err != nil {
		return nil, &LayoutError{Version: fmt.Sprintf("%d.%d", b.major, b.minor)}
	}
	r := &reader{mem: mem, left: maxReadsPerPass}
	if b.major == 3 && b.minor == 13 {
		hdr := make([]byte, doSize)
		if err := r.read(hdr, b.runtime); err != nil {
			return nil, err
		}
		if err := fromDebugOffsets(&l, hdr, b.major, b.minor); err != nil {
			if le, ok := err.(*LayoutError); ok {
				le.Version = b.version
			}
			return nil, err
		}
	}
	l.finalize()
	t := &Target{fs: fs, pid: pid, w: walker{r: r, l: l, b: b, codes: map[uint64]*codeInfo{}}, pthreadTID: -1}
	// One read of the runtime proves the memory is readable (and the
	// privilege held) before any stack is promised.
	r.left = maxReadsPerPass
	if _, err := t.w.interpreters(); err != nil {
		return nil, err
	}
	return t, nil
}

// Version is the interpreter's version ("3.11.7").
func (t *Target) Version() string { return t.w.b.version }

// Reads is how many reads of the target were made so far.
func (t *Target) Reads() int { return t.w.r.reads }

// Stack is one thread's stack as sampled.
type Stack struct {
	TID    int // 0 when not mapped to an OS thread
	ID     uint64
	GIL    bool
	Frames []profile.Frame // innermost first
	Cut    bool
}

// Stacks reads every thread of every interpreter once. A thread whose
// stack changed under the read is retried, then left out (counted in
// skipped); a layout error fails the whole read.
func (t *Target) Stacks() (stacks []Stack, skipped int, err error) {
	t.w.r.left = maxReadsPerPass
	interps, err := t.w.interpreters()
	if err != nil {
		return nil, 0, err
	}
	var all []threadState
	holders := map[uint64]bool{}
	for _, ip := range interps {
		ths, err := t.w.threads(ip)
		if err != nil {
			var le *LayoutError
			if errors.As(err, &le) || len(ths) == 0 {
				return nil, 0, err
			}
			skipped++
		}
		all = append(all, ths...)
		if h := t.w.gilHolder(ip); h != 0 {
			holders[h] = true
		}
	}
	tids := t.mapTIDs(all)
	notCode := 0
	for _, ts := range all {
		var frames []rawFrame
		var cut bool
		var ferr error
		for range 3 {
			// re-read the head: the thread moved on since it was listed
			frames, cut, ferr = t.w.frames(ts.frame)
			if ferr == nil {
				break
			}
			if fresh, err := t.refresh(ts); err == nil {
				ts.frame = fresh
			}
		}
		if errors.Is(ferr, errBudget) {
			skipped += len(all) - len(stacks) - skipped
			break
		}
		if ferr != nil {
			var le *LayoutError
			if errors.As(ferr, &le) {
				return nil, 0, ferr
			}
			if errors.Is(ferr, errNotCode) {
				notCode++
			}
			skipped++
			continue
		}
		s := Stack{TID: tids[ts.addr], ID: ts.threadID, GIL: holders[ts.addr], Cut: cut}
		for _, f := range frames {
			s.Frames = append(s.Frames, profile.Frame{Function: f.code.Function, File: f.code.File, Line: max(f.line, 0)})
		}
		stacks = append(stacks, s)
	}
	if len(stacks) == 0 && len(all) > 0 {
		// not one thread's frames could be followed, each retried: the
		// frame layout is wrong, not the timing
		why := "no thread's frames could be followed"
		if notCode > 0 {
			why = "frames do not point at code objects"
		}
		return nil, 0, t.w.layoutErr("%s", why)
	}
	return stacks, skipped, nil
}

// stacksRetried is Stacks tried up to firstPassTries times while the
// process is there: one failed pass over a running interpreter is as often
// timing as a layout not read (see firstPassTries).
func (t *Target) stacksRetried() (stacks []Stack, skipped int, err error) {
	for range firstPassTries {
		if stacks, skipped, err = t.Stacks(); err == nil || errors.Is(err, procfs.ErrVanished) {
			return stacks, skipped, err
		}
	}
	return nil, 0, err
}

// refresh re-reads a thread state's current frame.
func (t *Target) refresh(ts threadState) (uint64, error) {
	p, err := t.w.r.ptr(ts.addr + t.w.l.tsFrame)
	if err != nil || t.w.l.cfCurrent < 0 || p == 0 {
		return p, err
	}
	return t.w.r.ptr(p + uint64(t.w.l.cfCurrent))
}

// Dump reads every thread's stack with its OS thread's name and state, as
// `py-spy dump` shows them: "active" when the OS thread was running,
// "+gil" when it held the GIL.
func (t *Target) Dump() (profile.Process, error) {
	stacks, skipped, err := t.stacksRetried()
	if err != nil {
		return profile.Process{}, err
	}
	p := profile.Process{PID: t.pid, Python: t.w.b.version, Exe: t.w.b.path, Reader: ReaderName, Skipped: skipped}
	if args, err := t.fs.ReadCmdline(t.pid); err == nil {
		p.Cmdline = strings.Join(args, " ")
	}
	sort.SliceStable(stacks, func(i, j int) bool {
		a, b := stacks[i].TID, stacks[j].TID
		if (a == t.pid) != (b == t.pid) {
			return a == t.pid
		}
		return a < b
	})
	for _, s := range stacks {
		th := profile.Thread{TID: s.TID, Frames: s.Frames}
		th.ID = fmt.Sprintf("%#X", s.ID)
		th.Status = "idle"
		if s.TID > 0 {
			th.ID = strconv.Itoa(s.TID)
			if st, err := procfs.ReadStatOnce(t.fs.TaskPath(t.pid, s.TID, "stat")); err == nil {
				th.Name = string(st.Comm)
				if st.State == 'R' {
					th.Status = "active"
				}
			}
		}
		if s.GIL {
			th.Status += "+gil"
		}
		if s.Cut {
			th.Frames = append(th.Frames, profile.Frame{Function: "(deeper frames not read)", File: "..."})
		}
		p.Threads = append(p.Threads, th)
	}
	return p, nil
}

// mapTIDs maps thread states to OS thread ids: native_thread_id where the
// version keeps it (3.11+); before, pthread_self() is all a thread state
// holds, and glibc's struct pthread (what pthread_t points to) holds the
// kernel tid at one fixed offset, found once as the offset at which every
// thread's struct holds a distinct tid of this process.
func (t *Target) mapTIDs(states []threadState) map[uint64]int {
	out := map[uint64]int{}
	need := false
	for _, ts := range states {
		if ts.nativeID > 0 {
			out[ts.addr] = ts.nativeID
		} else {
			need = true
		}
	}
	if !need {
		return out
	}
	live := t.liveTIDs()
	if t.pthreadTID >= 0 {
		// the offset is known: one small read per thread
		okAll := true
		for _, ts := range states {
			if ts.nativeID > 0 || ts.threadID == 0 {
				continue
			}
			var b [4]byte
			if err := t.w.r.read(b[:], ts.threadID+uint64(t.pthreadTID)); err == nil && live[int(int32(u32(b[:], 0)))] {
				out[ts.addr] = int(int32(u32(b[:], 0)))
			} else {
				okAll = false
			}
		}
		if okAll {
			return out
		}
	}
	mainPthread, _ := t.w.r.ptr(t.w.b.runtime + t.w.l.rtMainThread)
	const span = 2048
	structs := map[uint64][]byte{}
	for _, ts := range states {
		if ts.nativeID > 0 || ts.threadID == 0 {
			continue
		}
		b := make([]byte, span)
		if err := t.w.r.read(b, ts.threadID); err == nil {
			structs[ts.addr] = b
		}
	}
	try := func(off int) (map[uint64]int, bool) {
		m := map[uint64]int{}
		used := map[int]bool{}
		for addr, b := range structs {
			tid := int(int32(u32(b, uint64(off))))
			if !live[tid] || used[tid] {
				return nil, false
			}
			used[tid] = true
			m[addr] = tid
		}
		return m, len(m) > 0
	}
	// glibc's x86-64 struct pthread keeps tid at 0x2d0; verify it first,
	// else search (another libc, another layout), requiring the main
	// thread's struct to hold the pid.
	offs := []int{0x2d0}
	if t.pthreadTID >= 0 {
		offs = []int{t.pthreadTID}
	}
	for off := 0; off < span; off += 4 {
		offs = append(offs, off)
	}
	for _, off := range offs {
		m, ok := try(off)
		if !ok {
			continue
		}
		okMain := true
		for _, ts := range states {
			if ts.threadID == mainPthread && m[ts.addr] != 0 && m[ts.addr] != t.pid {
				okMain = false
			}
		}
		if !okMain || (len(structs) == 1 && off != 0x2d0 && off != t.pthreadTID) {
			continue // a single thread proves nothing at an arbitrary offset
		}
		t.pthreadTID = off
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, ts := range states {
		if ts.threadID == mainPthread && mainPthread != 0 && out[ts.addr] == 0 {
			out[ts.addr] = t.pid
		}
	}
	return out
}

// liveTIDs lists the process's threads.
func (t *Target) liveTIDs() map[int]bool {
	out := map[int]bool{}
	d, err := procfs.OpenDir(t.fs.PidPath(t.pid, "task"))
	if err != nil {
		return out
	}
	defer d.Close()
	_ = d.EachNumeric(func(n int) { out[n] = true })
	return out
}

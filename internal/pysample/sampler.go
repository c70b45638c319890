package pysample

import (
	"bufio"
	"context"
	"errors"
	"hash/maphash"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// Sampler samples the Python stacks of a process tree over a window, the
// way `py-spy top` does: every thread of every Python process, Rate times
// a second, within a CPU budget. It only reads (process_vm_readv and
// /proc); the target is never stopped.
type Sampler struct {
	FS procfs.FS
	// Rate is the sampling rate in Hz (DefaultRate when 0).
	Rate float64
	// MaxProcs bounds the processes sampled (DefaultMaxProcs when 0).
	MaxProcs int
	// MaxCPU bounds the sampler's own time as a share of one core
	// (DefaultMaxCPU when 0): past it, rounds are spaced out.
	MaxCPU float64
	// Opened, when set, is called once Run has opened (or tried) the
	// tree's Python processes present at its start: opening reads the
	// interpreter's binary and memory, seconds on a loaded host, and a
	// window that waits for it is sampled from its first tick.
	Opened func()
}

// Defaults: 50 Hz is py-spy's rate under its default 100 Hz halved, enough
// for a share to within a few percent over a 10 s window (500 samples), and
// cheap (a round of a few threads costs tens of microseconds).
const (
	DefaultRate     = 50
	DefaultMaxProcs = 16
	DefaultMaxCPU   = 0.05
)

// userFile says a frame is in the user's code: not an installed package,
// not the standard library, not frozen or generated code.
var libraryFile = regexp.MustCompile(`/(site|dist)-packages/|/lib/python\d\.\d+/|^<`)

type sampled struct {
	t *Target
	// frames is how many frames the kept stacks hold, against
	// maxKeptFrames: names come from the target, so what is kept is
	// bounded in count and in length.
	frames  int
	top     profile.PySamples
	threads map[int]*threadAgg
	stats   map[int]*procfs.Kept
	first   time.Time
	last    time.Time
	// fails is how many passes in a row could not be read (see round).
	fails int
}

// A pass over a running interpreter reads its thread and frame lists while
// they change: on a busy single-threaded loop about 1 % of passes found no
// frame chain that held still through three re-reads (measured: 38 of 4,000
// passes over a torchvision transforms loop, on an idle host), which the
// pass reports as a layout it cannot read. One such pass is timing, not
// layout: the first pass (and the end-of-window dump) is tried
// firstPassTries times before a process is left for the next scan (at most
// maxOpenTries scans), and a process being sampled is dropped only after
// maxPassFails failed passes in a row (or at once when it is gone).
// Before, one failed first pass left the process unsampled for the whole
// window, and one failed round dropped it until the next scan a second
// later.
const (
	firstPassTries = 5
	maxOpenTries   = 3
	maxPassFails   = 10
)

type threadAgg struct {
	th     profile.PySampleThread
	stacks map[uint64]*profile.PySampleStack // by a hash of the frames' names
	lines  map[lineKey]*profile.PySampleLine
}

type lineKey struct {
	file, fn string
	line     int
}

// maxLineKeys bounds the distinct lines counted per thread; maxKeptFrames
// the frames kept in one process's stacks; maxKeptName a name's length in
// a kept stack.
const (
	maxLineKeys   = 4096
	maxKeptFrames = 1 << 16
	maxKeptName   = 512
)

func clipName(s string) string {
	if len(s) <= maxKeptName {
		return s
	}
	return strings.ToValidUTF8(s[:maxKeptName], "") + "..."
}

// Run samples the tree under root until ctx is done and returns one PySamples
// per Python process sampled, by pid. Processes that are not CPython, or
// whose interpreter cannot be read, are left out (the end-of-window dump
// says why for each).
func (s Sampler) Run(ctx context.Context, root int) []profile.PySamples {
	rate := s.Rate
	if rate <= 0 {
		rate = DefaultRate
	}
	maxProcs := s.MaxProcs
	if maxProcs <= 0 {
		maxProcs = DefaultMaxProcs
	}
	maxCPU := s.MaxCPU
	if maxCPU <= 0 {
		maxCPU = DefaultMaxCPU
	}
	interval := time.Duration(float64(time.Second) / rate)
	procs := map[int]*sampled{}
	tried := map[int]string{}  // pid -> the executable it was last tried with
	openFails := map[int]int{} // pid -> scans whose first pass failed
	var lastScan time.Time
	defer func() {
		for _, p := range procs {
			for _, k := range p.stats {
				k.Close()
			}
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.finish(procs)
		case <-timer.C:
		}
		if time.Since(lastScan) >= time.Second {
			// discovery (opening new processes) is paid once per process,
			// not per round: it is left out of the rounds' pacing
			first := lastScan.IsZero()
			lastScan = time.Now()
			s.discover(root, procs, tried, openFails, maxProcs)
			if first && s.Opened != nil {
				s.Opened()
			}
		}
		start := time.Now()
		for pid, p := range procs {
			if !p.round(s.FS, start) {
				// exited, or exec'd into something else: drop, and try the
				// pid afresh at the next scan
				delete(tried, pid)
				if p.top.Rounds == 0 {
					delete(procs, pid)
				} else {
					p.t = nil
				}
			}
		}
		cost := time.Since(start)
		next := interval - cost
		if budget := time.Duration(float64(cost)/maxCPU) - cost; budget > next {
			next = budget
		}
		timer.Reset(max(next, time.Millisecond))
	}
}

// discover opens the tree's Python processes not yet sampled.
func (s Sampler) discover(root int, procs map[int]*sampled, tried map[int]string, openFails map[int]int, maxProcs int) {
	for _, pid := range tree(s.FS, root, 4096) {
		if p, ok := procs[pid]; ok && p.t != nil {
			continue
		}
		exe, _ := os.Readlink(s.FS.PidPath(pid, "exe"))
		if t, ok := tried[pid]; ok && t == exe {
			continue
		}
		tried[pid] = exe
		live := 0
		for _, p := range procs {
			if p.t != nil {
				live++
			}
		}
		if live >= maxProcs {
			return
		}
		t, err := Open(s.FS, pid)
		if err != nil {
			continue
		}
		// A first pass, not counted: it finds the thread-id offset (before
		// 3.11) and fills the code cache, one-off costs kept out of the
		// rounds' pacing. A pass that fails may be timing (above): tried
		// again, and the process again at the next scans.
		if _, _, err := t.stacksRetried(); err != nil {
			if openFails[pid]++; openFails[pid] < maxOpenTries && !errors.Is(err, procfs.ErrVanished) {
				delete(tried, pid)
			}
			continue
		}
		if p, ok := procs[pid]; ok {
			p.t, p.fails = t, 0 // exec'd into another Python: keep counting under the pid
			continue
		}
		procs[pid] = &sampled{t: t, threads: map[int]*threadAgg{}, stats: map[int]*procfs.Kept{},
			top: profile.PySamples{PID: pid, Python: t.Version(), Reader: ReaderName}}
	}
}

// round takes one sample of p; false when p can no longer be read.
func (p *sampled) round(fs procfs.FS, now time.Time) bool {
	if p.t == nil {
		return true
	}
	stacks, skipped, err := p.t.Stacks()
	if err != nil {
		// Gone, or failing pass after pass (exec'd into something else, a
		// layout not read): dropped. One failed pass: timing (above).
		p.fails++
		return !errors.Is(err, procfs.ErrVanished) && p.fails < maxPassFails
	}
	p.fails = 0
	if p.top.Rounds == 0 {
		p.first = now
	}
	p.last = now
	p.top.Rounds++
	p.top.Skipped += skipped
	var buf [512]byte
	for _, st := range stacks {
		if st.TID <= 0 {
			continue
		}
		a := p.threads[st.TID]
		if a == nil {
			if len(p.threads) >= profile.MaxPySampleThreads {
				continue
			}
			a = &threadAgg{th: profile.PySampleThread{TID: st.TID}, stacks: map[uint64]*profile.PySampleStack{}, lines: map[lineKey]*profile.PySampleLine{}}
			p.threads[st.TID] = a
		}
		active := false
		k := p.stats[st.TID]
		if k == nil {
			if k, err = procfs.OpenKept(fs.TaskPath(p.top.PID, st.TID, "stat"), procfs.PrivProcMount); err == nil {
				p.stats[st.TID] = k
			}
		}
		if k != nil {
			if b, err := k.ReadInto(buf[:]); err == nil {
				var s procfs.Stat
				if procfs.ParseStat(b, &s) == nil {
					active = s.State == 'R'
					if a.th.Name == "" {
						a.th.Name = string(s.Comm)
					}
				}
			}
		}
		p.frames += a.add(st, active, maxKeptFrames-p.frames)
	}
	return true
}

// add counts one sample; room is how many frames a new stack may keep.
// It returns the frames it kept.
func (a *threadAgg) add(st Stack, active bool, room int) (kept int) {
	a.th.Samples++
	if active {
		a.th.Active++
	}
	if st.GIL {
		a.th.GIL++
	}
	frames := st.Frames
	if len(frames) > profile.MaxPySampleStackFrames {
		frames = frames[:profile.MaxPySampleStackFrames]
	}
	var h maphash.Hash
	h.SetSeed(stackSeed)
	for _, f := range frames {
		h.WriteString(f.Function)
		h.WriteByte(0)
		h.WriteString(f.File)
		h.WriteByte(0)
	}
	key := h.Sum64()
	ts := a.stacks[key]
	if ts == nil {
		if len(a.stacks) >= profile.MaxPySampleStacks || len(frames) > room {
			a.th.Other++
		} else {
			ts = &profile.PySampleStack{}
			for _, f := range frames {
				ts.Frames = append(ts.Frames, profile.Frame{Function: clipName(f.Function), File: clipName(f.File)})
			}
			a.stacks[key] = ts
			kept = len(frames)
		}
	}
	if ts != nil {
		ts.Samples++
		if active {
			ts.Active++
		}
	}
	for _, f := range st.Frames {
		if libraryFile.MatchString(f.File) {
			continue
		}
		k := lineKey{f.File, f.Function, f.Line}
		l := a.lines[k]
		if l == nil {
			if len(a.lines) >= maxLineKeys {
				break
			}
			l = &profile.PySampleLine{Function: clipName(f.Function), File: f.File, Line: f.Line}
			a.lines[k] = l
		}
		l.Samples++
		if active {
			l.Active++
		}
		break
	}
	return kept
}

// stackSeed keys the stacks of one run (a hash of the names, so that a key
// costs 8 bytes whatever the names' length).
var stackSeed = maphash.MakeSeed()

// finish turns the counts into Tops, reading the source text of each
// thread's most frequent lines through the process's root.
func (s Sampler) finish(procs map[int]*sampled) []profile.PySamples {
	var out []profile.PySamples
	sources := map[string][]string{}
	for _, p := range procs {
		t := p.top
		if t.Rounds == 0 {
			continue
		}
		t.Seconds = p.last.Sub(p.first).Seconds()
		if t.Seconds > 0 && t.Rounds > 1 {
			t.RateHz = float64(t.Rounds-1) / t.Seconds
		}
		for _, a := range p.threads {
			th := a.th
			for _, st := range a.stacks {
				th.Stacks = append(th.Stacks, *st)
			}
			sort.Slice(th.Stacks, func(i, j int) bool {
				if th.Stacks[i].Samples != th.Stacks[j].Samples {
					return th.Stacks[i].Samples > th.Stacks[j].Samples
				}
				return stackKey(th.Stacks[i]) < stackKey(th.Stacks[j])
			})
			for _, l := range a.lines {
				th.Lines = append(th.Lines, *l)
			}
			sort.Slice(th.Lines, func(i, j int) bool {
				a, b := th.Lines[i], th.Lines[j]
				if a.Samples != b.Samples {
					return a.Samples > b.Samples
				}
				return a.File+strconv.Itoa(a.Line) < b.File+strconv.Itoa(b.Line)
			})
			if len(th.Lines) > profile.MaxPySampleLines {
				th.Lines = th.Lines[:profile.MaxPySampleLines]
			}
			for i := range th.Lines {
				th.Lines[i].Source = sourceLine(s.FS, p.top.PID, th.Lines[i].File, th.Lines[i].Line, sources)
			}
			t.Threads = append(t.Threads, th)
		}
		sort.Slice(t.Threads, func(i, j int) bool { return t.Threads[i].TID < t.Threads[j].TID })
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func stackKey(s profile.PySampleStack) string {
	var b strings.Builder
	for _, f := range s.Frames {
		b.WriteString(f.Function + "\x00" + f.File + "\x00")
	}
	return b.String()
}

// Bounds on reading source files for line text.
const (
	maxSourceFiles = 64
	maxSourceLines = 200000
	maxSourceLine  = 400
)

// sourceLine is line n of file as the process sees it (its root), trimmed;
// "" when it cannot be read.
func sourceLine(fs procfs.FS, pid int, file string, n int, cache map[string][]string) string {
	if n <= 0 || !strings.HasPrefix(file, "/") {
		return ""
	}
	lines, ok := cache[file]
	if !ok {
		if len(cache) >= maxSourceFiles {
			return ""
		}
		if f, err := os.Open(fs.PidPath(pid, "root") + file); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 0, 4096), 1<<20)
			for len(lines) < maxSourceLines && sc.Scan() {
				l := strings.TrimSpace(sc.Text())
				if len(l) > maxSourceLine {
					l = l[:maxSourceLine]
				}
				lines = append(lines, l)
			}
			f.Close()
		}
		cache[file] = lines
	}
	if n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// tree lists root and its descendants (through /proc/PID/task/TID/children),
// at most max.
func tree(fs procfs.FS, root, max int) []int {
	out := []int{root}
	seen := map[int]bool{root: true}
	for i := 0; i < len(out) && len(out) < max; i++ {
		pid := out[i]
		d, err := procfs.OpenDir(fs.PidPath(pid, "task"))
		if err != nil {
			continue
		}
		var tids []int
		_ = d.EachNumeric(func(n int) { tids = append(tids, n) })
		d.Close()
		for _, tid := range tids {
			b, err := os.ReadFile(fs.TaskPath(pid, tid, "children"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && c > 0 && !seen[c] && len(out) < max {
					seen[c] = true
					out = append(out, c)
				}
			}
		}
	}
	return out
}

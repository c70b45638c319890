package trace

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Builder fills a Trace: readers intern names, threads and streams, append
// records in any order, then call Finish to sort and link them.
type Builder struct {
	t       *Trace
	names   map[string]NameID
	threads map[threadKey]uint32
	streams map[Stream]uint32
}

type threadKey struct {
	pid, tid int64
	label    string
}

// NewBuilder starts an empty trace read from source in the given format.
func NewBuilder(source, format string) *Builder {
	return &Builder{
		t:       &Trace{Source: source, Format: format, Meta: Meta{Rank: -1}},
		names:   make(map[string]NameID),
		threads: make(map[threadKey]uint32),
		streams: make(map[Stream]uint32),
	}
}

// Trace gives access to the trace being built (metadata, counts, warnings).
func (b *Builder) Trace() *Trace { return b.t }

// Intern returns the NameID of s, adding it when new.
func (b *Builder) Intern(s string) NameID {
	if id, ok := b.names[s]; ok {
		return id
	}
	id := NameID(len(b.t.Names))
	b.t.Names = append(b.t.Names, s)
	b.names[s] = id
	return id
}

// InternBytes is Intern for a byte slice; it allocates only for a new name.
func (b *Builder) InternBytes(s []byte) NameID {
	if id, ok := b.names[string(s)]; ok {
		return id
	}
	return b.Intern(string(s))
}

// Thread returns the index of the thread with numeric ids pid and tid.
func (b *Builder) Thread(pid, tid int64) uint32 {
	return b.thread(threadKey{pid: pid, tid: tid})
}

// ThreadLabel returns the index of a thread named by text ids
// (Kineto's "pid": "Spans", "tid": "PyTorch Profiler").
func (b *Builder) ThreadLabel(label string) uint32 {
	return b.thread(threadKey{label: label})
}

func (b *Builder) thread(k threadKey) uint32 {
	if i, ok := b.threads[k]; ok {
		return i
	}
	i := uint32(len(b.t.Threads))
	b.t.Threads = append(b.t.Threads, Thread{PID: k.pid, TID: k.tid, Label: k.label})
	b.threads[k] = i
	return i
}

// SetThreadName records the name of thread i.
func (b *Builder) SetThreadName(i uint32, name string) {
	if int(i) < len(b.t.Threads) {
		b.t.Threads[i].Name = name
	}
}

// Stream returns the index of GPU stream id on device dev.
func (b *Builder) Stream(dev int32, id int64) uint32 {
	k := Stream{Device: dev, ID: id}
	if i, ok := b.streams[k]; ok {
		return i
	}
	i := uint32(len(b.t.Streams))
	b.t.Streams = append(b.t.Streams, k)
	b.streams[k] = i
	return i
}

// AddGPU appends a GPU op.
func (b *Builder) AddGPU(op GPUOp) {
	op.Launch = -1
	b.t.GPU = append(b.t.GPU, op)
	b.t.Counts.GPUOps++
}

// AddRuntime appends a runtime call; its Kind is derived from its name.
func (b *Builder) AddRuntime(rc RuntimeCall) {
	rc.GPU = -1
	b.t.Runtime = append(b.t.Runtime, rc)
	b.t.Counts.RuntimeCalls++
}

// AddCPU appends a CPU range.
func (b *Builder) AddCPU(op CPUOp) {
	b.t.CPU = append(b.t.CPU, op)
	b.t.Counts.CPUOps++
}

// Grow reserves room for n more records of each kind.
func (b *Builder) Grow(gpu, runtime, cpu int) {
	b.t.GPU = slices.Grow(b.t.GPU, gpu)
	b.t.Runtime = slices.Grow(b.t.Runtime, runtime)
	b.t.CPU = slices.Grow(b.t.CPU, cpu)
}

// Warnf records a problem the reader worked around.
func (b *Builder) Warnf(format string, args ...any) {
	b.t.Warnings = append(b.t.Warnings, fmt.Sprintf(format, args...))
}

// Finish sorts the records, links GPU ops to the runtime calls that launched
// them by correlation id, and returns the trace. The Builder must not be used
// afterwards.
func (b *Builder) Finish() *Trace {
	t := b.t
	slices.SortFunc(t.GPU, func(x, y GPUOp) int {
		if c := cmp.Compare(x.Stream, y.Stream); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Start, y.Start); c != 0 {
			return c
		}
		return cmp.Compare(x.End, y.End)
	})
	slices.SortFunc(t.Runtime, func(x, y RuntimeCall) int {
		if c := cmp.Compare(x.Thread, y.Thread); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Start, y.Start); c != 0 {
			return c
		}
		return cmp.Compare(x.End, y.End)
	})
	slices.SortFunc(t.CPU, func(x, y CPUOp) int {
		if c := cmp.Compare(x.Thread, y.Thread); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Start, y.Start); c != 0 {
			return c
		}
		// The enclosing range first.
		return cmp.Compare(y.End, x.End)
	})
	link(t)
	b.t = nil
	return t
}

// link sets GPUOp.Launch and RuntimeCall.GPU from correlation ids. A link
// is made only when it is certain: the id belongs to one runtime call, and
// that call enqueued this op alone (or is a graph or multi-device launch,
// which enqueue many ops under one id). Ops whose id several calls share,
// or several ops share under a call that enqueues one, are left unlinked,
// counted (AmbiguousCorr) and warned about: a guessed link attributes a gap
// to the wrong host activity (with every event sharing one id, every gap
// became a GPU-side wait).
func link(t *Trace) {
	type corrIdx struct {
		corr int64
		// idx is the runtime call, -1 when several calls have the id.
		idx int32
	}
	index := make([]corrIdx, 0, len(t.Runtime))
	for i := range t.Runtime {
		if c := t.Runtime[i].Corr; c > 0 {
			index = append(index, corrIdx{c, int32(i)})
		}
	}
	slices.SortFunc(index, func(x, y corrIdx) int {
		if c := cmp.Compare(x.corr, y.corr); c != 0 {
			return c
		}
		return cmp.Compare(x.idx, y.idx)
	})
	// One entry per id; an id several calls have is marked ambiguous.
	w, sharedIDs := 0, 0
	for i := range index {
		if w > 0 && index[w-1].corr == index[i].corr {
			t.Counts.DuplicateCorr++
			if index[w-1].idx >= 0 {
				sharedIDs++
				index[w-1].idx = -1
			}
			continue
		}
		index[w] = index[i]
		w++
	}
	index = index[:w]
	find := func(c int64) (int, bool) {
		return slices.BinarySearchFunc(index, c, func(e corrIdx, c int64) int { return cmp.Compare(e.corr, c) })
	}
	// How many ops each id has.
	ops := make([]int32, len(index))
	for i := range t.GPU {
		if c := t.GPU[i].Corr; c > 0 {
			if j, ok := find(c); ok {
				ops[j]++
			}
		}
	}
	// Ids several ops share under a call that enqueues one.
	single := make([]bool, len(index))
	var sharedOps, sharedOpIDs int64
	for j, e := range index {
		if e.idx >= 0 && ops[j] > 1 && !enqueuesMany(t.Name(t.Runtime[e.idx].Name)) {
			single[j] = true
			sharedOps += int64(ops[j])
			sharedOpIDs++
		}
	}
	for i := range t.GPU {
		g := &t.GPU[i]
		if g.Corr <= 0 {
			t.Counts.Unlinked++
			continue
		}
		j, found := find(g.Corr)
		if !found {
			t.Counts.Unlinked++
			continue
		}
		r := index[j].idx
		if r < 0 {
			t.Counts.AmbiguousCorr++
			g.AmbiguousLaunch = true
			continue
		}
		if single[j] {
			t.Counts.AmbiguousCorr++
			g.AmbiguousLaunch = true
			continue
		}
		g.Launch = r
		if t.Runtime[r].GPU < 0 {
			t.Runtime[r].GPU = int32(i)
		}
	}
	if t.Counts.AmbiguousCorr == 0 {
		return
	}
	var why []string
	if sharedIDs > 0 {
		why = append(why, fmt.Sprintf("%d runtime calls reuse the id of another call (%d ids are shared)", t.Counts.DuplicateCorr, sharedIDs))
	}
	if sharedOps > 0 {
		why = append(why, fmt.Sprintf("%d GPU operations share %d ids under calls that enqueue one operation each", sharedOps, sharedOpIDs))
	}
	t.Warnings = append(t.Warnings, fmt.Sprintf("%s: correlation ids are not unique: %s; %d GPU operations are left without a launch record rather than linked to a guess, so the gaps they end are not attributed to the host",
		t.Source, strings.Join(why, "; "), t.Counts.AmbiguousCorr))
}

// enqueuesMany reports whether a runtime call may put several operations on
// GPU queues under its one correlation id: a graph launch (every node of
// the graph), a multi-device launch (one kernel per device), or an MTIA
// runtime copy command ("enqueueCommand memcpyHtoDAsync"), which the
// device carries out as several dma_request operations under the call's
// id (HTA's MTIA inference test trace: 110 such calls, 4 to 9 requests
// each; HTA links every request to the call, and so must we to equal its
// idle breakdown).
func enqueuesMany(name string) bool {
	return strings.Contains(name, "GraphLaunch") || strings.Contains(name, "MultiDevice") || strings.HasPrefix(name, "enqueueCommand memcpy")
}
